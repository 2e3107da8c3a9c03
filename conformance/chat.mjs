#!/usr/bin/env node
// Real-client conformance check for toolgate.
//
// Drives the Vercel AI SDK chat client (`ai`, pinned in package.json, or one of
// the older releases installed next to it under an npm alias) against a running
// toolgate server and checks the flows.
//
//   cd conformance && npm ci
//   node chat.mjs http://127.0.0.1:4000                        # ai 7.0.173, ADK confirmations
//   node chat.mjs http://127.0.0.1:4000 approve remember       # only the named flows
//   node chat.mjs http://127.0.0.1:4000 --client ai-5.0.60     # another installed release
//   node chat.mjs http://127.0.0.1:4000 --client ai-6.0.0 --protocol ai-sdk
//
// Options:
//   --client <package>   the installed `ai` package to drive: `ai` (7.0.173, the
//                        default) or an alias from package.json (`ai-5.0.60`,
//                        `ai-5.0.216`, `ai-6.0.0-beta.148`, `ai-6.0.0`,
//                        `ai-6.0.326`, `ai-7.0.0`).
//   --protocol adk|ai-sdk  how tool confirmations are asked (default adk).
//                        `ai-sdk` is the native approval flow and needs ai >= 6.
//   --transport sse|ws   `sse` (default): DefaultChatTransport on POST /stream;
//                        `ws`: the client's own WebSocketChatTransport (ai >=
//                        7.0.135) on GET /live, with the `ws` package as its
//                        WebSocket. The transport validates every chunk with
//                        its schema and every sequence number itself.
//   --denied-as output-denied|output-error  what the server's
//                        `toolConfirmation.deniedAs` is (default output-denied):
//                        how a natively denied payment must end.
//
// The transport sends `toolgate: {clientVersion, protocol}` in the body, with
// the version read from the client package, so the server fits its chunks to
// that client.
//
// Flows: text, weather, client-tool, client-approve, client-deny and
// client-policy-deny run with both protocols (the client tools
// `get_location`, `pick_file` and `read_clipboard` must be declared under
// `tools.client`, `pick_file` asking first, `read_clipboard` under
// `alwaysDeny`); approve, deny,
// two-confirmations and remember only with `--protocol adk`; native-approve,
// native-deny and native-two only with `--protocol ai-sdk`. Without flow names, every flow of
// the chosen protocol runs; a named flow of the other protocol is skipped.
//
// Flows for toolgate in front of a Google ADK agent (`model.provider: adk`,
// app `payments` of tests/fixtures/adk/agents), run only when named:
// adk-text with both protocols, adk-approve and adk-deny with `--protocol
// adk`, adk-native-approve and adk-native-deny with `--protocol ai-sdk`. They
// pay 500 USD to Alice with the agent's own process_payment
// (`transaction_id` txn-alice-500); a denial must end the part denied or in
// error, with the agent's text saying the call was rejected.
//
// Prints `ok <flow>` or `FAIL <flow>: <reason>` per flow (the raw SSE of a
// failed flow goes to stderr), then `N passed, N failed`. Exits 0 only if all
// flows pass (2 on a usage error).
//
// Every response is also checked on a tee of its body, apart from the client,
// with the chosen release's own exports: status 200,
// `x-vercel-ai-ui-message-stream: v1`, each chunk valid against its
// `uiMessageChunkSchema` (through its `parseJsonEventStream`), the chunks
// replayed through its `readUIMessageStream({ terminateOnError: true })`, and
// the stream going from `start` to `finish` and ending with `data: [DONE]`.
import { createRequire } from 'node:module';
import { WebSocket as WebSocketImpl } from 'ws';
import { isDeepStrictEqual } from 'node:util';

const FLOW_TIMEOUT_MS = 10_000;
const MAX_REQUESTS = 6; // per flow; more means the client is re-sending in a loop
const PROTOCOLS = ['adk', 'ai-sdk'];

function usage(problem) {
  if (problem) console.error(`chat.mjs: ${problem}`);
  console.error('usage: node chat.mjs <baseUrl> [--client ai|ai-<version>] [--protocol adk|ai-sdk] [flow ...]');
  console.error('   e.g. node chat.mjs http://127.0.0.1:4000 --client ai-6.0.0 --protocol ai-sdk');
  process.exit(2);
}

// ---- command line ----
const cli = { client: 'ai', protocol: 'adk', transport: 'sse', deniedAs: 'output-denied', claimVersion: undefined, positional: [] };
{
  const args = process.argv.slice(2);
  const options = { '--client': 'client', '--protocol': 'protocol', '--transport': 'transport', '--denied-as': 'deniedAs', '--claim-version': 'claimVersion' };
  for (let i = 0; i < args.length; i++) {
    const [flag, inline] = args[i].startsWith('--') ? args[i].split(/=(.*)/s, 2) : [args[i]];
    if (flag in options) {
      const value = inline ?? args[++i];
      if (value === undefined || value === '') usage(`${flag} needs a value`);
      cli[options[flag]] = value;
    } else if (flag.startsWith('--')) {
      usage(`unknown option ${flag}`);
    } else {
      cli.positional.push(args[i]);
    }
  }
}
const baseUrl = (cli.positional[0] ?? '').replace(/\/+$/, '');
if (!/^https?:\/\//.test(baseUrl)) usage('the first argument that is not an option must be the server\'s base URL');
if (!PROTOCOLS.includes(cli.protocol)) usage(`--protocol must be one of ${PROTOCOLS.join(', ')}, not ${cli.protocol}`);
if (!['sse', 'ws'].includes(cli.transport)) usage(`--transport must be sse or ws, not ${cli.transport}`);
if (!['output-denied', 'output-error'].includes(cli.deniedAs)) usage(`--denied-as must be output-denied or output-error, not ${cli.deniedAs}`);

// ---- the client package: imported dynamically, everything below uses its own exports ----
let ai;
let clientVersion;
try {
  clientVersion = createRequire(import.meta.url)(`${cli.client}/package.json`).version;
  ai = await import(cli.client);
} catch (err) {
  usage(`cannot load the client package ${JSON.stringify(cli.client)} (is it in package.json and installed?): ${err.message}`);
}
const {
  AbstractChat,
  DefaultChatTransport,
  WebSocketChatTransport,
  lastAssistantMessageIsCompleteWithToolCalls,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  parseJsonEventStream,
  readUIMessageStream,
  uiMessageChunkSchema,
} = ai;
for (const [name, value] of Object.entries({ AbstractChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithToolCalls, parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema })) {
  // parseJsonEventStream and uiMessageChunkSchema are exported from ai 5.0.51 on
  if (value === undefined) usage(`${cli.client} (ai ${clientVersion}) does not export ${name}`);
}
if (cli.transport === 'ws' && WebSocketChatTransport === undefined) {
  usage(`--transport ws needs ai 7.0.135 or later (WebSocketChatTransport); ${cli.client} is ai ${clientVersion}`);
}
const nativeApprovals = typeof lastAssistantMessageIsCompleteWithApprovalResponses === 'function'; // ai >= 6.0.0
// ai 6.0.0's lastAssistantMessageIsCompleteWithApprovalResponses (and that of
// its pre-releases, such as 6.0.0-beta.148) skips provider-executed parts, so
// there the app sends an answer about one itself.
const sendsProviderExecutedAnswers = !/^6\.0\.0(-|$)/.test(clientVersion);
if (cli.protocol === 'ai-sdk' && !nativeApprovals) {
  usage(`--protocol ai-sdk needs ai 6 or later (native approvals); ${cli.client} is ai ${clientVersion}`);
}
// What the server is told; --claim-version (undocumented) lies about it, to
// show that fitting the chunks to the client matters.
const toolgateOptions = { clientVersion: cli.claimVersion ?? clientVersion, protocol: cli.protocol };

// ---- the chat: AbstractChat needs a ChatState (src/ui/chat.ts; `snapshot` in every version) ----
class PlainChatState {
  status = 'ready';
  error = undefined;
  messages = [];
  snapshot = value => structuredClone(value);
  pushMessage = message => { this.messages = [...this.messages, this.snapshot(message)]; };
  popMessage = () => { this.messages = this.messages.slice(0, -1); };
  replaceMessage = (index, message) => {
    this.messages = this.messages.map((m, i) => (i === index ? this.snapshot(message) : m));
  };
}

class ConformanceChat extends AbstractChat {
  constructor(init) {
    super({ ...init, state: new PlainChatState() });
  }
}

// ---- the validating fetch: one tee branch to the client, one checked here ----
function makeRecorder() {
  const rec = { requests: [], problems: [], pending: [], inflight: 0 };
  rec.fetch = async (url, init) => {
    const req = { n: rec.requests.length + 1, body: JSON.parse(init.body), raw: '', chunks: [] };
    rec.requests.push(req);
    if (req.n > MAX_REQUESTS) {
      rec.problems.push(`more than ${MAX_REQUESTS} requests: the client keeps re-sending (auto-send loop)`);
      throw new Error('conformance: request limit reached');
    }
    rec.inflight++;
    let res;
    try {
      res = await fetch(url, init);
    } catch (err) {
      rec.inflight--;
      rec.problems.push(`request ${req.n}: fetch failed: ${err.cause?.code ?? err.cause?.message ?? err.message}`);
      throw err;
    }
    const problem = text => rec.problems.push(`request ${req.n}: ${text}`);
    if (res.status !== 200) problem(`HTTP status ${res.status}, expected 200`);
    const header = res.headers.get('x-vercel-ai-ui-message-stream');
    if (header !== 'v1') problem(`header x-vercel-ai-ui-message-stream is ${JSON.stringify(header)}, expected "v1"`);
    const contentType = res.headers.get('content-type') ?? '';
    if (!contentType.startsWith('text/event-stream')) problem(`content-type is ${JSON.stringify(contentType)}`);
    if (res.status !== 200 || !res.body) {
      if (!res.body) problem('response has no body');
      rec.inflight--;
      return res;
    }
    const [toClient, toCheck] = res.body.tee();
    rec.pending.push(validateStream(toCheck, req).catch(err => problem(err.message)).finally(() => rec.inflight--));
    return new Response(toClient, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  return rec;
}

async function validateStream(stream, req) {
  const decoder = new TextDecoder();
  const recorded = stream.pipeThrough(new TransformStream({
    transform(bytes, controller) { req.raw += decoder.decode(bytes, { stream: true }); controller.enqueue(bytes); },
  }));
  const chunks = parseJsonEventStream({ stream: recorded, schema: uiMessageChunkSchema }).pipeThrough(
    new TransformStream({
      transform(result, controller) {
        if (!result.success) {
          throw new Error(result.rawValue === undefined
            ? `chunk is not JSON: ${oneLine(result.error.message)}`
            : `chunk fails uiMessageChunkSchema of ai ${clientVersion}: ${JSON.stringify(result.rawValue)} (${schemaIssue(result.error)})`);
        }
        req.chunks.push(result.value);
        controller.enqueue(result.value);
      },
    }),
  );
  // Like the client: a continuation (messageId of an assistant message) extends that message.
  const { messages = [], messageId } = req.body;
  const target = messageId != null ? messages.find(m => m.id === messageId) : messages.at(-1);
  const message = target?.role === 'assistant' ? structuredClone(target) : undefined;
  try {
    for await (const _ of readUIMessageStream({ message, stream: chunks, terminateOnError: true }));
  } catch (err) {
    throw new Error(err.message.startsWith('chunk ') ? err.message : `readUIMessageStream: ${oneLine(err.message)}`);
  }
  if (req.chunks[0]?.type !== 'start') throw new Error(`first chunk is ${req.chunks[0]?.type}, expected start`);
  if (req.chunks.at(-1)?.type !== 'finish') throw new Error(`last chunk is ${req.chunks.at(-1)?.type}, expected finish`);
  if (!req.raw.endsWith('data: [DONE]\n\n')) throw new Error('stream does not end with "data: [DONE]\\n\\n"');
}

// ---- running a flow ----
// `onToolCall` answers the client-side tools; approvals and client results
// each send the follow-up by themselves.
function newChat(flowName, ctx, { onToolCall } = {}) {
  const rec = makeRecorder();
  const id = `conf-${flowName}-${Math.random().toString(36).slice(2, 10)}`;
  const transport = cli.transport === 'ws'
    ? new WebSocketChatTransport({ url: `${baseUrl.replace(/^http/, 'ws')}/live`, webSocket: recordingWebSocket(rec), body: { toolgate: toolgateOptions } })
    : new DefaultChatTransport({ api: `${baseUrl}/stream`, fetch: rec.fetch, body: { toolgate: toolgateOptions } });
  const chat = new ConformanceChat({
    id,
    transport,
    onToolCall,
    sendAutomaticallyWhen: cli.protocol === 'ai-sdk'
      ? options => lastAssistantMessageIsCompleteWithApprovalResponses(options) || lastAssistantMessageIsCompleteWithToolCalls(options)
      : lastAssistantMessageIsCompleteWithToolCalls,
  });
  Object.assign(ctx, { chat, rec });
  return { chat, rec };
}

// The `ws` WebSocket, counting `send` frames as requests and keeping each
// request's frames for a failure report. The transport itself checks them.
function recordingWebSocket(rec) {
  const settled = req => {
    if (req.settled) return;
    req.settled = true;
    rec.inflight--;
  };
  return class extends WebSocketImpl {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', event => {
        let frame;
        try { frame = JSON.parse(String(event.data)); } catch { rec.problems.push(`a frame that is not JSON: ${String(event.data).slice(0, 200)}`); return; }
        const req = rec.requests.find(r => r.requestId === frame.requestId);
        if (!req) return;
        req.raw += `${JSON.stringify(frame)}\n`;
        if (frame.type === 'end' || frame.type === 'error' || frame.type === 'no-active') settled(req);
        if (frame.type === 'error') rec.problems.push(`request ${req.n}: error frame: ${frame.errorText}`);
      });
    }
    send(data) {
      const frame = JSON.parse(String(data));
      if (frame.type === 'send' || frame.type === 'resume') {
        const req = { n: rec.requests.length + 1, requestId: frame.requestId, body: frame, raw: '', chunks: [] };
        rec.requests.push(req);
        if (req.n > MAX_REQUESTS) rec.problems.push(`more than ${MAX_REQUESTS} requests: the client keeps re-sending (auto-send loop)`);
        rec.inflight++;
      }
      // The server's `end` may cross an `abort` on the wire (the client
      // ignores it): a request stops counting once, whichever comes first.
      if (frame.type === 'abort') {
        const req = rec.requests.find(r => r.requestId === frame.requestId);
        if (req) settled(req);
      }
      super.send(data);
    }
  };
}

// addToolOutput exists from ai 5.0.89; before, addToolResult takes the same arguments.
function addToolOutput(chat, args) {
  return typeof chat.addToolOutput === 'function' ? chat.addToolOutput(args) : chat.addToolResult(args);
}

// Wait until the chat is idle (including automatic follow-ups) and every
// response body has been validated.
async function settle(ctx) {
  const { chat, rec } = ctx;
  for (let stable = 0; stable < 3 && !ctx.timedOut;) {
    await new Promise(resolve => setTimeout(resolve, 10));
    if (chat.status === 'error') {
      await Promise.all(rec.pending); // the validator's finding is usually the more precise one
      throw new Error([...rec.problems, `chat status error: ${oneLine(chat.error?.message ?? chat.error).slice(0, 300)}`].join('; '));
    }
    stable = chat.status === 'ready' && rec.inflight === 0 ? stable + 1 : 0;
  }
  await Promise.all(rec.pending);
  if (rec.problems.length) throw new Error(rec.problems.join('; '));
}

async function runFlow(name, flow) {
  const ctx = { timedOut: false };
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => { ctx.timedOut = true; reject(new Error(`timed out after ${FLOW_TIMEOUT_MS / 1000} s (chat status ${ctx.chat?.status})`)); }, FLOW_TIMEOUT_MS);
  });
  try {
    await Promise.race([flow(ctx), timeout]);
    console.log(`ok ${name}`);
    return true;
  } catch (err) {
    console.log(`FAIL ${name}: ${oneLine(err.message)}`);
    for (const req of ctx.rec?.requests ?? []) {
      console.error(`  [${name}] request ${req.n} trigger=${req.body.trigger} messageId=${req.body.messageId} raw SSE:`);
      console.error(req.raw.trimEnd().split('\n').filter(Boolean).map(l => `    ${l}`).join('\n'));
    }
    if (ctx.chat) console.error(`  [${name}] messages: ${JSON.stringify(ctx.chat.messages)}`);
    return false;
  } finally {
    clearTimeout(timer);
    // abort whatever is still running; never let a stuck stop hold up the run
    await Promise.race([ctx.chat?.stop().catch(() => {}), new Promise(r => setTimeout(r, 1000))]);
  }
}

// ---- assertion helpers ----
const oneLine = s => String(s).replace(/\s+/g, ' ').slice(0, 600);
// The validation error's own words (TypeValidationError carries the zod failure as its cause).
function schemaIssue(error) {
  const inner = error?.cause ?? error; // a zod error, or (ai 5.0.60) its issues array
  const issues = Array.isArray(inner) ? inner : inner?.issues;
  if (Array.isArray(issues) && issues.length) {
    return issues.map(i => `${i.message}${i.keys ? ` ${show(i.keys)}` : ''}${i.path?.length ? ` at ${i.path.join('.')}` : ''}`).join('; ').slice(0, 300);
  }
  return oneLine(inner?.message ?? inner).slice(0, 300);
}
const show = v => JSON.stringify(v);
function check(cond, msg) { if (!cond) throw new Error(msg); }
function eq(actual, expected, what) {
  check(isDeepStrictEqual(actual, expected), `${what}: expected ${show(expected)}, got ${show(actual)}`);
}
const isNonEmptyString = v => typeof v === 'string' && v.length > 0;
function onlyAssistant(chat) {
  const assistants = chat.messages.filter(m => m.role === 'assistant');
  eq(assistants.length, 1, 'number of assistant messages');
  return assistants[0];
}
const partsOfType = (msg, type) => msg.parts.filter(p => p.type === type);
function onePart(msg, type) {
  const parts = partsOfType(msg, type);
  eq(parts.length, 1, `number of ${type} parts`);
  return parts[0];
}
function textAfter(msg, part) {
  return msg.parts.slice(msg.parts.indexOf(part) + 1).filter(p => p.type === 'text').map(p => p.text).join('');
}
function paymentPart(msg, toolCallId) {
  const parts = partsOfType(msg, 'tool-process_payment').filter(p => p.toolCallId === toolCallId);
  eq(parts.length, 1, `number of tool-process_payment parts with toolCallId ${toolCallId}`);
  return parts[0];
}
function checkConfirmation(part, args) {
  eq(part.state, 'input-available', 'confirmation part state');
  const { originalFunctionCall: call, toolConfirmation: confirmation } = part.input ?? {};
  check(isNonEmptyString(call?.id), `originalFunctionCall.id is not a non-empty string: ${show(part.input)}`);
  eq(call.name, 'process_payment', 'originalFunctionCall.name');
  eq(call.args, args, 'originalFunctionCall.args');
  check(isNonEmptyString(confirmation?.hint), `toolConfirmation.hint is not a non-empty string: ${show(part.input)}`);
  eq(confirmation.confirmed, false, 'toolConfirmation.confirmed');
  return call;
}
function checkCompletedPayment(part, args) {
  eq(part.state, 'output-available', `process_payment ${part.toolCallId} state`);
  eq(part.input, args, `process_payment ${part.toolCallId} input`);
  const out = part.output ?? {};
  eq(out.status, 'completed', 'payment output.status');
  check(isNonEmptyString(out.transactionId), `payment output.transactionId is not a string: ${show(out)}`);
  for (const key of Object.keys(args)) eq(out[key], args[key], `payment output.${key}`);
  return out;
}
function checkNativeRequest(part, args) {
  eq(part.state, 'approval-requested', `process_payment ${part.toolCallId} state`);
  eq(part.input, args, `process_payment ${part.toolCallId} input`);
  check(isNonEmptyString(part.approval?.id), `process_payment ${part.toolCallId} approval.id is not a non-empty string: ${show(part.approval)}`);
  return part;
}
// With `--denied-as output-error` the client must have taken a
// `tool-output-error` for a part whose approval it had answered.
function checkNativeDenied(part, reason) {
  eq(part.state, cli.deniedAs, `process_payment ${part.toolCallId} state`);
  eq(part.approval?.approved, false, `process_payment ${part.toolCallId} approval.approved`);
  eq(part.approval?.reason, reason, `process_payment ${part.toolCallId} approval.reason`);
  if (cli.deniedAs === 'output-error') eq(part.errorText, `User denied execution: ${reason}`, `process_payment ${part.toolCallId} errorText`);
}
function checkDeniedPayment(part, ...fragments) {
  eq(part.state, 'output-error', `process_payment ${part.toolCallId} state`);
  for (const f of fragments) check(String(part.errorText).includes(f), `errorText ${show(part.errorText)} lacks ${show(f)}`);
}
const requestCount = (rec, n, when) => eq(rec.requests.length, n, `number of requests ${when}`);

// ---- the flows ----
// What the browser's client-side tools answer.
const CLIENT_RESULTS = {
  get_location: { city: 'Kyoto', latitude: 35.01, longitude: 135.77 },
  pick_file: { name: 'report.pdf', bytes: 18234 },
};

// Runs the client-side tools as an app would: answers each call it is handed
// (not awaited: the chat is still reading the stream that handed it out).
function clientTools(ctx) {
  ctx.handed = [];
  // Every call of a tool (not a confirmation question) onToolCall saw, answered or not.
  ctx.seen = [];
  return ({ toolCall }) => {
    if (toolCall.toolName !== 'adk_request_confirmation') ctx.seen.push(toolCall.toolName);
    const output = CLIENT_RESULTS[toolCall.toolName];
    if (output === undefined) return;
    ctx.handed.push(toolCall.toolCallId);
    addToolOutput(ctx.chat, { tool: toolCall.toolName, toolCallId: toolCall.toolCallId, output });
  };
}

// The client tool's part answered by the client, and the model's answer that uses it.
function checkClientResult(ctx, msg, tool) {
  const part = onePart(msg, `tool-${tool}`);
  eq(part.state, 'output-available', `${tool} state`);
  eq(part.output, CLIENT_RESULTS[tool], `${tool} output`);
  eq(ctx.handed, [part.toolCallId], `${tool} calls handed to onToolCall`);
  const fact = Object.values(CLIENT_RESULTS[tool])[0];
  check(textAfter(msg, part).includes(fact), `text after the ${tool} part lacks ${show(fact)}: ${show(textAfter(msg, part))}`);
}

const HANAKO = { amount: 50, recipient: 'Hanako', currency: 'USD' };
const BOB = { amount: 20, recipient: 'Bob', currency: 'USD' };
const CAROL = { amount: 5, recipient: 'Carol', currency: 'USD' };

// In front of an ADK agent (tests/fixtures/adk/agents, app `payments`): its
// scripted model calls process_payment for this, and the tool answers
// `{"status": "success", "transaction_id": "txn-alice-500", ...}`.
const ADK_PAYMENT = { text: 'Send 500 USD to Alice', args: { amount: 500, recipient: 'Alice', currency: 'USD' }, transactionId: 'txn-alice-500' };

// Sends `text`, checks the single confirmation request, answers it with `output`.
async function paymentTurnOne(ctx, name, output, { text = 'Send 50 USD to Hanako', args = HANAKO } = {}) {
  const { chat, rec } = newChat(name, ctx);
  await chat.sendMessage({ text });
  await settle(ctx);
  requestCount(rec, 1, 'after the first turn');
  const first = onlyAssistant(chat);
  const confirm = onePart(first, 'tool-adk_request_confirmation');
  eq(partsOfType(first, 'tool-process_payment').length, 0, 'process_payment parts before confirmation');
  const call = checkConfirmation(confirm, args);
  await addToolOutput(chat, { tool: 'adk_request_confirmation', toolCallId: confirm.toolCallId, output });
  await settle(ctx);
  requestCount(rec, 2, 'in total (one follow-up)');
  const msg = onlyAssistant(chat);
  eq(msg.id, first.id, 'continued assistant message id');
  const answered = onePart(msg, 'tool-adk_request_confirmation');
  eq(answered.state, 'output-available', 'confirmation part state after answering');
  eq(answered.output, output, 'confirmation part output');
  return { msg, call };
}

// Native approvals (--protocol ai-sdk): sends the payment, checks the single
// approval request on the process_payment part, answers it.
async function nativeTurnOne(ctx, name, response, { text = 'Send 50 USD to Hanako', args = HANAKO } = {}) {
  const { chat, rec } = newChat(name, ctx);
  check(typeof chat.addToolApprovalResponse === 'function', `ai ${clientVersion} has no addToolApprovalResponse`);
  await chat.sendMessage({ text });
  await settle(ctx);
  requestCount(rec, 1, 'after the first turn');
  const first = onlyAssistant(chat);
  eq(partsOfType(first, 'tool-adk_request_confirmation').length, 0, 'tool-adk_request_confirmation parts');
  const requested = checkNativeRequest(onePart(first, 'tool-process_payment'), args);
  await chat.addToolApprovalResponse({ id: requested.approval.id, ...response });
  // ai 6.0.0 does not send an answer about a provider-executed part (a tool
  // the ADK agent runs) by itself.
  if (requested.providerExecuted && !sendsProviderExecutedAnswers) {
    await settle(ctx);
    await chat.sendMessage();
  }
  await settle(ctx);
  requestCount(rec, 2, 'in total (one follow-up)');
  const msg = onlyAssistant(chat);
  eq(msg.id, first.id, 'continued assistant message id');
  eq(partsOfType(msg, 'tool-adk_request_confirmation').length, 0, 'tool-adk_request_confirmation parts after answering');
  const pay = paymentPart(msg, requested.toolCallId);
  eq(pay.approval?.id, requested.approval.id, 'approval.id after answering');
  return { msg, pay };
}

// Flows of one confirmation protocol only; the others run with both.
// Flows that need one transport: an abort over SSE leaves a cut body, which
// the SSE validator would report.
const FLOW_TRANSPORT = { abort: 'ws' };

const FLOW_PROTOCOL = {
  approve: 'adk',
  deny: 'adk',
  'two-confirmations': 'adk',
  remember: 'adk',
  'native-approve': 'ai-sdk',
  'native-deny': 'ai-sdk',
  'native-two': 'ai-sdk',
  'adk-approve': 'adk',
  'adk-deny': 'adk',
  'adk-native-approve': 'ai-sdk',
  'adk-native-deny': 'ai-sdk',
};

// Flows for toolgate in front of an ADK agent: they run only when named.
const NAMED_ONLY = new Set(['adk-text', 'adk-approve', 'adk-deny', 'adk-native-approve', 'adk-native-deny']);

const flows = {
  // The client stops a long answer: the server stops the turn, and the chat
  // goes on with a new one on the same socket.
  async abort(ctx) {
    const { chat } = newChat('abort', ctx);
    const sending = chat.sendMessage({ text: 'count to 100000' }).catch(() => {});
    const counted = () => {
      const last = chat.messages.at(-1);
      return last?.role === 'assistant' && partsOfType(last, 'text').some(p => p.text.length > 0);
    };
    for (let i = 0; i < 500 && !counted(); i++) await new Promise(resolve => setTimeout(resolve, 10));
    check(counted(), 'no text arrived before the abort');
    await chat.stop();
    await sending;
    await settle(ctx);
    const text = partsOfType(onlyAssistant(chat), 'text').map(p => p.text).join('');
    check(!text.includes('100000'), 'the whole count arrived: the abort stopped nothing');
    await chat.sendMessage({ text: 'hello there' });
    await settle(ctx);
    eq(chat.messages.filter(m => m.role === 'assistant').length, 2, 'assistant messages after the abort and a new turn');
  },

  async text(ctx) {
    const { chat, rec } = newChat('text', ctx);
    await chat.sendMessage({ text: 'hello there' });
    await settle(ctx);
    requestCount(rec, 1, '');
    const msg = onlyAssistant(chat);
    check(partsOfType(msg, 'text').map(p => p.text).join('').trim().length > 0, 'assistant text is empty');
  },

  async weather(ctx) {
    const { chat, rec } = newChat('weather', ctx);
    await chat.sendMessage({ text: 'What is the weather in Tokyo?' });
    await settle(ctx);
    requestCount(rec, 1, '(no automatic follow-up expected)');
    const msg = onlyAssistant(chat);
    const tool = onePart(msg, 'tool-get_weather');
    eq(tool.state, 'output-available', 'get_weather state');
    eq(tool.input, { city: 'Tokyo' }, 'get_weather input');
    check(tool.output !== null && typeof tool.output === 'object' && !Array.isArray(tool.output), `get_weather output is not an object: ${show(tool.output)}`);
    check(textAfter(msg, tool).trim().length > 0, 'no non-empty text after the get_weather part');
    eq(partsOfType(msg, 'tool-adk_request_confirmation').length, 0, 'confirmation parts');
  },

  // A client-side tool: handed to onToolCall, answered with addToolOutput,
  // and the model's final answer uses that output.
  async 'client-tool'(ctx) {
    const { chat, rec } = newChat('client-tool', ctx, { onToolCall: clientTools(ctx) });
    await chat.sendMessage({ text: 'Use get_location' });
    await settle(ctx);
    requestCount(rec, 2, '(the hand-off, then the follow-up with the result)');
    checkClientResult(ctx, onlyAssistant(chat), 'get_location');
  },

  // A client-side tool that asks first: approved, then handed out once.
  async 'client-approve'(ctx) {
    const { chat, rec } = newChat('client-approve', ctx, { onToolCall: clientTools(ctx) });
    await chat.sendMessage({ text: 'Use pick_file' });
    await settle(ctx);
    requestCount(rec, 1, 'after the question');
    eq(ctx.handed, [], 'calls handed out before the approval');
    const first = onlyAssistant(chat);
    if (cli.protocol === 'ai-sdk') {
      const part = onePart(first, 'tool-pick_file');
      eq(part.state, 'approval-requested', 'pick_file state');
      eq(part.providerExecuted, true, 'pick_file providerExecuted while it waits for approval');
      await chat.addToolApprovalResponse({ id: part.approval.id, approved: true });
      // ai 6.0.0 does not send an answer about a provider-executed part by itself.
      if (!sendsProviderExecutedAnswers) {
        await settle(ctx);
        await chat.sendMessage();
      }
    } else {
      const confirm = onePart(first, 'tool-adk_request_confirmation');
      eq(confirm.input?.originalFunctionCall?.name, 'pick_file', 'originalFunctionCall.name');
      await addToolOutput(chat, { tool: 'adk_request_confirmation', toolCallId: confirm.toolCallId, output: { confirmed: true } });
    }
    await settle(ctx);
    requestCount(rec, 3, '(the question, the approval that hands it out, the result)');
    checkClientResult(ctx, onlyAssistant(chat), 'pick_file');
  },

  // A client-side tool the user denies: onToolCall never runs it.
  async 'client-deny'(ctx) {
    const { chat, rec } = newChat('client-deny', ctx, { onToolCall: clientTools(ctx) });
    await chat.sendMessage({ text: 'Use pick_file' });
    await settle(ctx);
    requestCount(rec, 1, 'after the question');
    const first = onlyAssistant(chat);
    if (cli.protocol === 'ai-sdk') {
      const part = onePart(first, 'tool-pick_file');
      eq(part.state, 'approval-requested', 'pick_file state');
      await chat.addToolApprovalResponse({ id: part.approval.id, approved: false, reason: 'not now' });
      // ai 6.0.0 does not send an answer about a provider-executed part by itself.
      if (!sendsProviderExecutedAnswers) {
        await settle(ctx);
        await chat.sendMessage();
      }
    } else {
      const confirm = onePart(first, 'tool-adk_request_confirmation');
      await addToolOutput(chat, { tool: 'adk_request_confirmation', toolCallId: confirm.toolCallId, output: { confirmed: false } });
    }
    await settle(ctx);
    requestCount(rec, 2, '(the question, the denial)');
    eq(ctx.seen, [], 'calls onToolCall saw after the denial');
    const part = onePart(onlyAssistant(chat), 'tool-pick_file');
    eq(part.state, cli.protocol === 'ai-sdk' ? cli.deniedAs : 'output-error', 'pick_file state after the denial');
  },

  // A client-side tool the policy denies (alwaysDeny): onToolCall never runs it.
  async 'client-policy-deny'(ctx) {
    const { chat, rec } = newChat('client-policy-deny', ctx, { onToolCall: clientTools(ctx) });
    await chat.sendMessage({ text: 'Use read_clipboard' });
    await settle(ctx);
    requestCount(rec, 1, '(denied at once)');
    eq(ctx.seen, [], 'calls onToolCall saw');
    const part = onePart(onlyAssistant(chat), 'tool-read_clipboard');
    eq(part.state, 'output-error', 'read_clipboard state');
    check(part.errorText.includes('denied by policy'), `read_clipboard error ${show(part.errorText)}`);
  },

  // A new message while the card is open is an ordinary turn; decided
  // through the API meanwhile, the card's outcome comes with the next
  // message as a data-toolgate-outcome part.
  async 'moved-on'(ctx) {
    const { chat, rec } = newChat('moved-on', ctx);
    await chat.sendMessage({ text: 'Send 50 USD to Hanako' });
    await settle(ctx);
    const first = onlyAssistant(chat);
    const id = cli.protocol === 'ai-sdk'
      ? onePart(first, 'tool-process_payment').approval.id
      : onePart(first, 'tool-adk_request_confirmation').toolCallId;
    await chat.sendMessage({ text: 'What is the weather in Paris?' });
    await settle(ctx);
    requestCount(rec, 2, '(the question, the new message)');
    const decided = await fetch(`${baseUrl}/api/confirmations/${id}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ approved: true }),
    });
    eq(decided.status, 200, 'status of the decision through the API');
    await chat.sendMessage({ text: 'Thanks' });
    await settle(ctx);
    requestCount(rec, 3, '(and the next message)');
    const brought = partsOfType(chat.messages.at(-1), 'data-toolgate-outcome');
    eq(brought.length, 1, 'data-toolgate-outcome parts in the last message');
    eq(brought[0].data.confirmationId, id, 'the brought confirmationId');
    eq(brought[0].data.outcome.kind, 'output', 'the brought outcome');
  },

  async approve(ctx) {
    const { msg, call } = await paymentTurnOne(ctx, 'approve', { confirmed: true });
    const pay = paymentPart(msg, call.id);
    const out = checkCompletedPayment(pay, HANAKO);
    check(textAfter(msg, pay).includes(out.transactionId), `text after the payment lacks transactionId ${out.transactionId}`);
  },

  async deny(ctx) {
    const { msg, call } = await paymentTurnOne(ctx, 'deny', { confirmed: false, reason: 'too much' });
    const pay = paymentPart(msg, call.id);
    checkDeniedPayment(pay, 'User denied execution', 'too much');
    check(/denied/i.test(textAfter(msg, pay)), `text after the payment does not mention "denied": ${show(textAfter(msg, pay))}`);
  },

  async 'two-confirmations'(ctx) {
    const { chat, rec } = newChat('two-confirmations', ctx);
    await chat.sendMessage({ text: 'Send 50 USD to Hanako and pay $20 to Bob' });
    await settle(ctx);
    requestCount(rec, 1, 'after the first turn');
    const confirms = partsOfType(onlyAssistant(chat), 'tool-adk_request_confirmation');
    eq(confirms.length, 2, 'number of confirmation parts');
    const hanako = checkConfirmation(confirms[0], HANAKO);
    const bob = checkConfirmation(confirms[1], BOB);
    check(hanako.id !== bob.id, 'both confirmations carry the same originalFunctionCall.id');
    await addToolOutput(chat, { tool: 'adk_request_confirmation', toolCallId: confirms[0].toolCallId, output: { confirmed: true } });
    await settle(ctx);
    requestCount(rec, 1, 'after answering only the first confirmation');
    await addToolOutput(chat, { tool: 'adk_request_confirmation', toolCallId: confirms[1].toolCallId, output: { confirmed: false, reason: 'no' } });
    await settle(ctx);
    requestCount(rec, 2, 'in total (one follow-up)');
    const msg = onlyAssistant(chat);
    checkCompletedPayment(paymentPart(msg, hanako.id), HANAKO);
    checkDeniedPayment(paymentPart(msg, bob.id), 'User denied execution');
  },

  // An approval answered with `remember: 'session'` is not asked again in the
  // same chat: the next payment runs in a single request.
  async remember(ctx) {
    const output = { confirmed: true, remember: 'session' };
    const { msg: first, call } = await paymentTurnOne(ctx, 'remember', output);
    const firstPay = paymentPart(first, call.id);
    const firstOut = checkCompletedPayment(firstPay, HANAKO);
    check(textAfter(first, firstPay).includes(firstOut.transactionId), `text after the first payment lacks transactionId ${firstOut.transactionId}`);

    const { chat, rec } = ctx;
    await chat.sendMessage({ text: 'Send 5 USD to Carol' });
    await settle(ctx);
    requestCount(rec, 3, 'in total (two for the first payment, one for the second)');
    const assistants = chat.messages.filter(m => m.role === 'assistant');
    eq(assistants.length, 2, 'number of assistant messages after the second payment');
    check(assistants[1].id !== first.id, `the second payment continued the first assistant message ${first.id}`);
    const msg = assistants[1];
    eq(partsOfType(msg, 'tool-adk_request_confirmation').length, 0, 'tool-adk_request_confirmation parts in the second payment (remembered)');
    const pay = onePart(msg, 'tool-process_payment');
    check(pay.toolCallId !== call.id, `the second payment reuses toolCallId ${call.id}`);
    const out = checkCompletedPayment(pay, CAROL);
    check(out.transactionId !== firstOut.transactionId, `both payments carry transactionId ${out.transactionId}`);
    check(textAfter(msg, pay).includes(out.transactionId), `text after the second payment lacks transactionId ${out.transactionId}`);
  },

  async 'native-approve'(ctx) {
    const { msg, pay } = await nativeTurnOne(ctx, 'native-approve', { approved: true });
    const out = checkCompletedPayment(pay, HANAKO);
    check(textAfter(msg, pay).includes(out.transactionId), `text after the payment lacks transactionId ${out.transactionId}`);
  },

  async 'native-deny'(ctx) {
    const { msg, pay } = await nativeTurnOne(ctx, 'native-deny', { approved: false, reason: 'too much' });
    checkNativeDenied(pay, 'too much');
    const after = textAfter(msg, pay);
    check(/denied/i.test(after), `text after the payment does not mention "denied": ${show(after)}`);
    check(after.includes('too much'), `text after the payment does not mention the reason "too much": ${show(after)}`);
  },

  async 'native-two'(ctx) {
    const { chat, rec } = newChat('native-two', ctx);
    check(typeof chat.addToolApprovalResponse === 'function', `ai ${clientVersion} has no addToolApprovalResponse`);
    await chat.sendMessage({ text: 'Send 50 USD to Hanako and pay $20 to Bob' });
    await settle(ctx);
    requestCount(rec, 1, 'after the first turn');
    const first = onlyAssistant(chat);
    eq(partsOfType(first, 'tool-adk_request_confirmation').length, 0, 'tool-adk_request_confirmation parts');
    const requested = partsOfType(first, 'tool-process_payment');
    eq(requested.length, 2, 'number of tool-process_payment parts');
    const hanako = checkNativeRequest(requested[0], HANAKO);
    const bob = checkNativeRequest(requested[1], BOB);
    check(hanako.toolCallId !== bob.toolCallId, 'both payments carry the same toolCallId');
    check(hanako.approval.id !== bob.approval.id, 'both payments carry the same approval.id');
    await chat.addToolApprovalResponse({ id: hanako.approval.id, approved: true });
    await settle(ctx);
    requestCount(rec, 1, 'after answering only the first approval');
    await chat.addToolApprovalResponse({ id: bob.approval.id, approved: false, reason: 'no' });
    await settle(ctx);
    requestCount(rec, 2, 'in total (one follow-up)');
    const msg = onlyAssistant(chat);
    eq(msg.id, first.id, 'continued assistant message id');
    checkCompletedPayment(paymentPart(msg, hanako.toolCallId), HANAKO);
    checkNativeDenied(paymentPart(msg, bob.toolCallId), 'no');
  },
};

// A payment the ADK agent ran: its own output, and its model's summary of it.
function checkAdkPayment(msg, pay) {
  eq(pay.state, 'output-available', `process_payment ${pay.toolCallId} state`);
  eq(pay.input, ADK_PAYMENT.args, `process_payment ${pay.toolCallId} input`);
  eq(pay.output?.status, 'success', 'payment output.status');
  eq(pay.output?.transaction_id, ADK_PAYMENT.transactionId, 'payment output.transaction_id');
  check(textAfter(msg, pay).includes(ADK_PAYMENT.transactionId), `text after the payment lacks ${ADK_PAYMENT.transactionId}: ${show(textAfter(msg, pay))}`);
}

// A payment the user denied: ADK's tool never ran, and its model was told.
function checkAdkDenial(msg, pay) {
  check(pay.output?.transaction_id === undefined, `the denied payment ran: ${show(pay.output)}`);
  const after = textAfter(msg, pay);
  check(/rejected/i.test(after), `text after the payment does not mention "rejected": ${show(after)}`);
}

Object.assign(flows, {
  async 'adk-text'(ctx) {
    const { chat, rec } = newChat('adk-text', ctx);
    await chat.sendMessage({ text: 'hello there' });
    await settle(ctx);
    requestCount(rec, 1, '');
    const text = partsOfType(onlyAssistant(chat), 'text').map(p => p.text).join('');
    eq(text, 'You said: hello there. I am a scripted model.', 'assistant text');
  },

  async 'adk-approve'(ctx) {
    const { msg, call } = await paymentTurnOne(ctx, 'adk-approve', { confirmed: true }, ADK_PAYMENT);
    checkAdkPayment(msg, paymentPart(msg, call.id));
  },

  async 'adk-deny'(ctx) {
    const { msg, call } = await paymentTurnOne(ctx, 'adk-deny', { confirmed: false, reason: 'too much' }, ADK_PAYMENT);
    const pay = paymentPart(msg, call.id);
    check(['output-error', 'output-denied'].includes(pay.state), `process_payment ${pay.toolCallId} state: expected output-error or output-denied, got ${show(pay.state)}`);
    checkAdkDenial(msg, pay);
  },

  async 'adk-native-approve'(ctx) {
    const { msg, pay } = await nativeTurnOne(ctx, 'adk-native-approve', { approved: true }, ADK_PAYMENT);
    checkAdkPayment(msg, pay);
  },

  async 'adk-native-deny'(ctx) {
    const { msg, pay } = await nativeTurnOne(ctx, 'adk-native-deny', { approved: false, reason: 'too much' }, ADK_PAYMENT);
    checkNativeDenied(pay, 'too much');
    checkAdkDenial(msg, pay);
  },
});

const forProtocol = name => (FLOW_PROTOCOL[name] ?? cli.protocol) === cli.protocol
  && (FLOW_TRANSPORT[name] ?? cli.transport) === cli.transport;
const named = cli.positional.slice(1);
const selected = named.length > 0 ? named : Object.keys(flows).filter(name => forProtocol(name) && !NAMED_ONLY.has(name));
console.log(`# client ${cli.client} (ai ${clientVersion}), protocol ${cli.protocol}, transport ${cli.transport}, body toolgate ${show(toolgateOptions)}`);
let passed = 0;
let failed = 0;
for (const name of selected) {
  if (!flows[name]) {
    console.log(`FAIL ${name}: no such flow (have: ${Object.keys(flows).join(', ')})`);
    failed++;
  } else if (!forProtocol(name)) {
    console.log(`skip ${name}: runs only with --protocol ${FLOW_PROTOCOL[name] ?? cli.protocol} --transport ${FLOW_TRANSPORT[name] ?? cli.transport}`);
  } else if (await runFlow(name, flows[name])) passed++;
  else failed++;
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
