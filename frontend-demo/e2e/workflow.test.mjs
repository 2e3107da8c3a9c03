// The demo's workflow mode (`/?transport=workflow`: `@ai-sdk/workflow`'s
// WorkflowChatTransport, unmodified, under useChat) in a real headless
// Chromium, through a proxy that cuts the turn in the middle:
//   TOOLGATE_URL=http://127.0.0.1:8080 node --test e2e/workflow.test.mjs
// The server should run tests/fixtures/browser/toolgate.yaml, as for
// demo.test.mjs. The page is loaded through the proxy, which forwards
// everything to toolgate and keeps the page's Host (so toolgate's
// cross-origin guard sees the page's own origin). It cuts the first
// POST /api/chat once the question went through and the held turn waits;
// the transport reads the turn on with GET /api/chat/{chatId}/stream
// ?startIndex=N, the user approves on the card, the payment runs once, and
// the chunks the proxy handed the page, POST and GET together, are the
// turn's chunks exactly once, in order: the same as a reader of the
// whole turn straight from toolgate.
import assert from 'node:assert/strict';
import { createServer, request } from 'node:http';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { launchChromium, watchedFlow } from './harness.mjs';

const URL = process.env.TOOLGATE_URL;
assert.ok(URL, 'set TOOLGATE_URL to a running toolgate');
const ARTIFACTS = process.env.TOOLGATE_E2E_ARTIFACTS ?? join(import.meta.dirname, 'artifacts');
mkdirSync(ARTIFACTS, { recursive: true });
const TIMEOUT = 15_000;

/** The `data:` events of SSE text, `[DONE]` left out, parsed. */
function events(text) {
  return text
    .split('\n\n')
    .flatMap((event) => event.split('\n').filter((line) => line.startsWith('data: ')))
    .map((line) => line.slice('data: '.length))
    .filter((data) => data !== '[DONE]')
    .map((data) => JSON.parse(data));
}

/** The chunk that asks, in each confirmation protocol. */
const QUESTION = {
  adk: (chunk) => chunk.type === 'tool-input-available' && chunk.toolName === 'adk_request_confirmation',
  'ai-sdk': (chunk) => chunk.type === 'tool-approval-request',
};

/**
 * A proxy to toolgate that cuts the first turn's POST once its question
 * (the chunk `isQuestion` finds) went through; it keeps, for each turn
 * response (the POST, each GET read on), the chunks it handed on, and
 * resolves `reconnected` when a GET read on answers 200.
 */
async function cuttingProxy(isQuestion) {
  const seen = { posts: [], gets: [], cuts: 0 };
  let reconnected;
  seen.reconnected = new Promise((resolve) => {
    reconnected = resolve;
  });
  const proxy = createServer((incoming, outgoing) => {
    const target = new globalThis.URL(incoming.url, URL);
    const post = incoming.method === 'POST' && target.pathname === '/api/chat';
    const get = incoming.method === 'GET' && /^\/api\/chat\/[^/]+\/stream$/.test(target.pathname);
    const upstream = request(target, { method: incoming.method, headers: incoming.headers }, (response) => {
      outgoing.writeHead(response.statusCode, response.headers);
      const handed = { query: target.search, status: response.statusCode, chunks: [] };
      if (post) seen.posts.push(handed);
      if (get) {
        seen.gets.push(handed);
        if (response.statusCode === 200) reconnected();
      }
      const cut = post && seen.cuts === 0;
      let pending = '';
      response.on('data', (piece) => {
        outgoing.write(piece);
        if (!post && !get) return;
        pending += piece.toString();
        const end = pending.lastIndexOf('\n\n');
        if (end < 0) return;
        const done = events(pending.slice(0, end + 2));
        pending = pending.slice(end + 2);
        handed.chunks.push(...done);
        if (cut && done.some(isQuestion)) {
          seen.cuts += 1;
          // The turn is marked waiting a moment after its question goes
          // out (cut before that, with nobody reading, it would stop).
          setTimeout(() => {
            response.destroy();
            outgoing.socket?.destroy();
          }, 300);
        }
      });
      response.on('end', () => outgoing.end());
      response.on('error', () => outgoing.destroy());
    });
    upstream.on('error', () => outgoing.destroy());
    incoming.pipe(upstream);
  });
  await new Promise((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const close = () => {
    proxy.close();
    proxy.closeAllConnections();
  };
  return { url: `http://127.0.0.1:${proxy.address().port}`, seen, close };
}

let browser;
before(async () => {
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
});

/**
 * A fresh profile with the demo open through `proxy` in workflow mode;
 * `allow`: the console errors the flow causes on purpose.
 */
async function open(t, problem, proxy, allow) {
  const context = await browser.newContext({ viewport: { width: 1000, height: 900 } });
  t.after(() => context.close());
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  const requests = [];
  page.on('request', (r) => requests.push(`${r.method()} ${new globalThis.URL(r.url()).pathname}`));
  page.on('pageerror', (e) => problem(context, `page error: ${e.stack ?? e.message}`));
  page.on('console', (m) => {
    if (m.type() !== 'error' || allow.some((expected) => expected.test(m.text()))) return;
    const { url, lineNumber } = m.location();
    problem(context, `console.error: ${m.text()}${url ? ` (${url}:${lineNumber})` : ''}`);
  });
  await page.goto(`${proxy}/?transport=workflow`);
  await page.getByRole('heading', { name: 'toolgate' }).waitFor();
  return { page, requests };
}

for (const protocol of ['adk', 'ai-sdk']) watchedFlow(
  `workflow (${protocol}): a held turn cut by a proxy is read on from where it was; approved on the page, it runs once`,
  open,
  async (open) => {
    const isQuestion = QUESTION[protocol];
    const proxy = await cuttingProxy(isQuestion);
    try {
      // Chromium reports the cut response, and the transport says that the
      // POST's stream broke before it reads on: those, and nothing else.
      const { page, requests } = await open(proxy.url, [
        /^Failed to load resource: net::ERR_INCOMPLETE_CHUNKED_ENCODING$/,
        /^Error in chat POST stream/,
      ]);
      assert.equal(await page.getByLabel('Transport').inputValue(), 'workflow');
      await page.getByLabel('Confirmation').selectOption(protocol);
      await page.getByLabel('Message').fill('Send 50 USD to Hanako');
      await page.getByLabel('Message').press('Enter');
      const card = page.getByTestId('approval-card');
      await card.waitFor();

      // The cut, and the transport reading on by itself; a reader of the
      // whole turn straight from toolgate, for the reference.
      await proxy.seen.reconnected;
      const chatId = await page.evaluate(() => JSON.parse(localStorage.getItem('toolgate-demo:chat')));
      const whole = fetch(`${URL}/api/chat/${encodeURIComponent(chatId)}/stream`).then((r) => r.text());
      assert.equal(await card.count(), 1, 'the page goes on with the one card it had');
      assert.match(await card.innerText(), /Approve process_payment\?/);
      await page.screenshot({ path: join(ARTIFACTS, `workflow-${protocol}-1-card-after-cut.png`), fullPage: true });

      await card.getByRole('button', { name: 'Approve', exact: true }).click();
      const payment = page.getByTestId('tool-process_payment');
      await payment.and(page.locator('[data-state="output-available"]')).waitFor();
      await page.locator('.message.assistant .text', { hasText: /Sent 50 USD to Hanako \(transaction tx-/ }).waitFor();
      await page.getByRole('button', { name: 'Send' }).waitFor();
      if (protocol === 'adk') {
        assert.match(await page.getByTestId('answered').innerText(), /You approved process_payment/);
      }
      assert.equal(await page.getByTestId('approval-card').count(), 0);
      // One answer, one payment, one text: nothing shown twice.
      assert.equal(await page.locator('.message.assistant').count(), 1);
      assert.equal(await payment.count(), 1);
      assert.equal(await page.locator('.message.assistant .text').count(), 1);
      await page.screenshot({ path: join(ARTIFACTS, `workflow-${protocol}-2-result.png`), fullPage: true });

      const { posts, gets, cuts } = proxy.seen;
      assert.equal(cuts, 1, 'the proxy cut the turn once');
      assert.equal(posts.length, 1, 'one turn posted');
      assert.equal(gets.length, 1, `read on once: ${JSON.stringify(gets.map((g) => g.query))}`);
      const [{ chunks: before }] = posts;
      const [{ chunks: rest, query, status }] = gets;
      assert.equal(status, 200);
      assert.equal(query, `?startIndex=${before.length}`, 'read on from the first chunk it had not seen');
      assert.ok(before.some(isQuestion), 'the question came before the cut');
      assert.deepEqual([...before, ...rest], events(await whole), 'every chunk of the turn once, in order');
      const ran = rest.filter((c) => c.type === 'tool-output-available' && c.output?.recipient === 'Hanako');
      assert.equal(ran.length, 1, 'the payment ran once');
      assert.equal(rest.at(-1)?.type, 'finish');
      const decided = requests.filter((r) => r.startsWith('POST /api/confirmations/'));
      assert.equal(decided.length, 1, 'the card decided once, through the API');
      assert.equal(requests.filter((r) => r === 'POST /api/chat').length, 1);

      // The audit log: asked once, approved once.
      const audit = await (await fetch(`${URL}/api/audit?chatId=${encodeURIComponent(chatId)}`)).text();
      const decisions = audit.trim().split('\n').map((line) => JSON.parse(line).decision);
      assert.equal(decisions.filter((d) => d === 'approved').length, 1, decisions.join());
    } finally {
      proxy.close();
    }
  },
);
