#!/usr/bin/env node
// `@ai-sdk/workflow`'s WorkflowChatTransport (2.0.43, pinned in
// package.json), unmodified, against a running toolgate, through a proxy
// that cuts the turn's POST response in the middle of a held turn (once
// the question has gone through and the turn waits):
//
//   node workflow.mjs http://127.0.0.1:4000
//
// The transport reconnects by itself with GET /api/chat/{runId}/stream
// ?startIndex=N; the payment is approved through the decisions API; the
// client must see every chunk of the turn exactly once, in order (the
// same as a reader of the whole turn straight from toolgate), ending in
// `finish`. Prints `workflow: passed` and exits 0, or says what differed.
import assert from 'node:assert/strict';
import { createServer, request } from 'node:http';
import { WorkflowChatTransport } from '@ai-sdk/workflow/client';

const toolgate = process.argv[2];
assert.ok(toolgate, 'usage: node workflow.mjs <toolgate url>');
const chatId = `chat-workflow-${process.pid}`;
const QUESTION = '"toolName":"adk_request_confirmation"';

let cuts = 0;
const reconnects = [];
let reconnected;
const resumed = new Promise((resolve) => {
  reconnected = resolve;
});
let waiting;
const waited = new Promise((resolve) => {
  waiting = resolve;
});

// Forwards every request to toolgate; the first POST's response is cut
// (its socket destroyed) once the question went through and the turn
// waits for a human.
const proxy = createServer((incoming, outgoing) => {
  const target = new URL(incoming.url, toolgate);
  if (incoming.method === 'GET') reconnects.push(target.search);
  const upstream = request(
    target,
    { method: incoming.method, headers: { ...incoming.headers, host: target.host } },
    (response) => {
      if (incoming.method === 'GET' && response.statusCode === 200) reconnected();
      outgoing.writeHead(response.statusCode, response.headers);
      const cut = incoming.method === 'POST' && cuts === 0;
      let seen = '';
      response.on('data', (piece) => {
        outgoing.write(piece);
        if (!cut) return;
        seen += piece.toString();
        if (seen.includes(QUESTION) && seen.endsWith('\n\n')) {
          cuts += 1;
          // The turn is marked waiting a moment after its question (one cut
          // before that, with nobody reading, stops the turn).
          setTimeout(() => {
            response.destroy();
            outgoing.socket?.destroy();
            waiting();
          }, 300);
        }
      });
      response.on('end', () => outgoing.end());
    },
  );
  incoming.pipe(upstream);
});
await new Promise((resolve) => proxy.listen(0, '127.0.0.1', resolve));
const api = `http://127.0.0.1:${proxy.address().port}/api/chat`;

const transport = new WorkflowChatTransport({
  api,
  // The transport sends no chat id and no content type (a string body is
  // text/plain, which toolgate's guard refuses on a POST): both are given.
  prepareSendMessagesRequest: ({ id, messages }) => ({
    headers: { 'content-type': 'application/json' },
    body: { id, messages, toolgate: { flow: 'hold' } },
  }),
});

// Errors the transport reports as it reconnects go to console.error: kept.
const logged = [];
console.error = (...args) => logged.push(args.map(String).join(' '));

const stream = await transport.sendMessages({
  chatId,
  trigger: 'submit-message',
  messageId: undefined,
  messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'Send 50 USD to Hanako' }] }],
  abortSignal: undefined,
});

const got = [];
let whole;
let approved;
const reader = stream.getReader();
for (;;) {
  const { done, value } = await reader.read().catch((error) => {
    throw new Error(`${error.message}; reconnects: ${reconnects}; got: ${got.map((c) => c.type)}; said: ${logged}`);
  });
  if (done) break;
  got.push(value);
  if (value.type === 'tool-input-available' && value.toolName === 'adk_request_confirmation') {
    // Approved once the cut turn is read again (a held turn decided and
    // ended while nobody reads it is gone from a server without Redis).
    approved = (async () => {
      await waited;
      // A reader of the whole turn, straight from toolgate: the reference.
      whole = fetch(`${toolgate}/api/chat/${chatId}/stream`).then((r) => r.text());
      await resumed;
      const decided = await fetch(`${toolgate}/api/confirmations/${value.toolCallId}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ approved: true }),
      });
      assert.equal(decided.status, 200, await decided.text());
    })();
  }
}
await approved;
proxy.close();

const reference = (await whole)
  .split('\n\n')
  .map((event) => event.replace(/^data: /, ''))
  .filter((data) => data.startsWith('{'))
  .map((data) => JSON.parse(data));
assert.equal(cuts, 1, 'the proxy cut the turn once');
assert.ok(reconnects.length >= 1, 'the transport reconnected');
assert.match(reconnects[0], /^\?startIndex=[1-9]\d*$/, `it read on from a chunk: ${reconnects}`);
assert.equal(got.at(-1)?.type, 'finish', JSON.stringify(got.at(-1)));
assert.ok(
  got.some((c) => c.type === 'tool-output-available' && JSON.stringify(c.output).includes('Hanako')),
  'the approved payment ran',
);
assert.deepEqual(got, reference, 'every chunk once, in order');
console.log(`workflow: passed (reconnected with ${reconnects.join(', ')}; ${got.length} chunks)`);
if (logged.length) console.log(`the transport said: ${logged.join(' | ')}`);
