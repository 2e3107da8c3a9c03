#!/usr/bin/env node
// One tool call through toolgate's MCP face with the official TypeScript SDK.
//
// @modelcontextprotocol/sdk (pinned in package.json), unmodified: its
// `Client` on a `StreamableHTTPClientTransport` (a 2025-11-25 session),
// declaring elicitation and answering toolgate's `elicitation/create` form
// as told.
//
//   cd mcp-clients && npm ci
//   node call.mjs http://127.0.0.1:8080/mcp --token KEY \
//     --tool internal--lookup_order --args '{"id": 7}' --answer approve
//
// --answer approve|deny|decline|cancel answers every form.
//
// Prints one JSON line: the negotiated protocol, the tools listed, every
// form asked (message and schema) and the call's result, or {"error": ...}
// (exit 1) when the SDK threw.

import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const { values: opts, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    token: { type: 'string' },
    tool: { type: 'string' },
    args: { type: 'string', default: '{}' },
    answer: { type: 'string', default: 'approve' },
    reason: { type: 'string', default: 'not this one' },
  },
});
const [url] = positionals;
if (!url || !opts.tool || !['approve', 'deny', 'decline', 'cancel'].includes(opts.answer)) {
  console.error('usage: node call.mjs URL --tool NAME [--args JSON] [--token KEY] [--answer approve|deny|decline|cancel]');
  process.exit(2);
}

/** What a user pressing `answer` on toolgate's form sends back. */
function formAnswer(answer, schema) {
  if (answer === 'decline' || answer === 'cancel') return { action: answer };
  const props = schema.properties ?? {};
  const yes = answer === 'approve';
  const content = { approve: props.approve?.type === 'boolean' ? yes : yes ? 'approve' : 'deny' };
  if (!yes && props.reason) content.reason = opts.reason;
  if ((schema.required ?? []).includes('remember')) {
    // Only what the form demands: the narrowest choice it offers.
    const choices = props.remember.enum ?? (props.remember.oneOf ?? []).map((c) => c.const);
    content.remember = choices.includes('once') ? 'once' : choices[0];
  }
  return { action: 'accept', content };
}

const asked = [];
const client = new Client(
  { name: 'toolgate-test-typescript', version: '1.32.2' },
  { capabilities: { elicitation: { form: {} } } },
);
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  const { message, requestedSchema } = request.params;
  asked.push({ message, schema: requestedSchema });
  return formAnswer(opts.answer, requestedSchema);
});

const headers = opts.token ? { authorization: `Bearer ${opts.token}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  const result = await client.callTool(
    { name: opts.tool, arguments: JSON.parse(opts.args) },
    undefined,
    // toolgate may hold the call with progress notifications while it waits.
    { onprogress: () => {}, resetTimeoutOnProgress: true },
  );
  console.log(
    JSON.stringify({
      protocol: transport.protocolVersion ?? null,
      tools: tools.map((t) => t.name),
      asked,
      result,
    }),
  );
  await transport.terminateSession().catch(() => {});
  await client.close();
} catch (e) {
  console.log(JSON.stringify({ error: String(e?.stack ?? e) }));
  await client.close().catch(() => {});
  process.exit(1);
}
