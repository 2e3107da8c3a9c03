// A page on another origin calling toolgate, in a real headless Chromium:
//   TOOLGATE_BIN=target/debug/toolgate node --test e2e/
// This file starts its own toolgate (TOOLGATE_BIN) with an API key and
// `--cors-origin` naming one of two small pages it serves itself, each on
// its own port, so its own origin. The page does what useChat's
// DefaultChatTransport does: a JSON POST with the key, the SSE read back.
// The allowed page reads the turn; the browser blocks the other's fetch
// after the preflight toolgate does not answer for it.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before, test } from 'node:test';
import { launchChromium, serveToolgate } from './harness.mjs';

const KEY = 'cross-origin-page-key';
const TIMEOUT = 15_000;

// Both pages are this one: `chat` posts a turn as DefaultChatTransport
// does and returns the streamed text; `live` sends one over /live.
const PAGE = `<!doctype html>
<meta charset="utf-8">
<title>a page on another origin</title>
<script>
  const turn = (text) => ({
    id: 'chat-' + crypto.randomUUID(),
    trigger: 'submit-message',
    messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text }] }],
  });
  const deltas = (chunks) => chunks.filter((c) => c.type === 'text-delta').map((c) => c.delta).join('');
  window.chat = async (toolgate, key, text) => {
    const response = await fetch(toolgate + '/stream', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer ' + key },
      body: JSON.stringify(turn(text)),
    });
    if (!response.ok) throw new Error('status ' + response.status);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let sse = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      sse += value;
    }
    const chunks = sse
      .split('\\n')
      .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
      .map((line) => JSON.parse(line.slice('data: '.length)));
    return { text: deltas(chunks), marker: response.headers.get('x-vercel-ai-ui-message-stream') };
  };
  window.live = (toolgate, key, text) =>
    new Promise((resolve) => {
      const socket = new WebSocket(toolgate.replace(/^http/, 'ws') + '/live');
      const chunks = [];
      socket.onopen = () => {
        const { id, messages, trigger } = turn(text);
        const headers = { 'x-api-key': key };
        socket.send(JSON.stringify({ type: 'send', requestId: 'r1', id, messages, trigger, headers, body: {} }));
      };
      socket.onmessage = (event) => {
        const frame = JSON.parse(event.data);
        if (frame.type === 'chunk') chunks.push(frame.chunk);
        if (frame.type === 'end' || frame.type === 'error') {
          resolve({ opened: true, end: frame.type, text: deltas(chunks) });
          socket.close();
        }
      };
      socket.onclose = () => resolve({ opened: false });
    });
</script>
<h1>another origin</h1>
`;

let browser;
let stopToolgate;
const pages = [];
let server;

/** A page server on 127.0.0.1 and a free port; its origin. */
async function page() {
  const http = createServer((_, response) => {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end(PAGE);
  });
  await new Promise((resolve) => http.listen(0, '127.0.0.1', resolve));
  pages.push(http);
  return `http://127.0.0.1:${http.address().port}`;
}

let allowed;
let other;
before(async () => {
  allowed = await page();
  other = await page();
  let url;
  ({ url, stop: stopToolgate } = await serveToolgate(
    'store: {kind: memory}\nauth: {apiKeys: [{principal: page, keyEnv: TOOLGATE_E2E_KEY}]}\n',
    { args: ['--cors-origin', allowed], env: { TOOLGATE_E2E_KEY: KEY } },
  ));
  server = url;
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
  stopToolgate?.();
  for (const http of pages) http.close();
});

/** A fresh profile with the page of `origin` open; an uncaught page error fails. */
async function open(t, origin) {
  const context = await browser.newContext();
  t.after(() => context.close());
  const tab = await context.newPage();
  tab.setDefaultTimeout(TIMEOUT);
  const errors = [];
  tab.on('pageerror', (e) => errors.push(e.message));
  await tab.goto(origin);
  await tab.getByRole('heading', { name: 'another origin' }).waitFor();
  t.after(() => assert.deepEqual(errors, [], 'no uncaught page error'));
  return tab;
}

test('cross-origin: a page of an allowed origin streams a turn with its key', async (t) => {
  const tab = await open(t, allowed);
  const answer = await tab.evaluate(([url, key]) => window.chat(url, key, 'hello'), [server, KEY]);
  assert.deepEqual(answer, { text: 'You said: hello', marker: 'v1' });
});

test('cross-origin: the browser blocks a page of an origin the config does not name', async (t) => {
  const tab = await open(t, other);
  const failure = await tab.evaluate(([url, key]) =>
    window.chat(url, key, 'hello').then(
      () => 'it was read',
      (e) => `${e.name}: ${e.message}`,
    ),
    [server, KEY],
  );
  assert.match(failure, /^TypeError: /);
});

test('cross-origin: /live opens for the allowed origin only, the key in the frame', async (t) => {
  const allowedTab = await open(t, allowed);
  const answer = await allowedTab.evaluate(([url, key]) => window.live(url, key, 'hello'), [server, KEY]);
  assert.deepEqual(answer, { opened: true, end: 'end', text: 'You said: hello' });
  const otherTab = await open(t, other);
  const refused = await otherTab.evaluate(([url, key]) => window.live(url, key, 'hello'), [server, KEY]);
  assert.deepEqual(refused, { opened: false });
});
