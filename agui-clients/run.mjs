// AG-UI's own client, @ag-ui/client's HttpAgent (1.0.0), unmodified, with
// its event validation, driving toolgate's POST /ag-ui. Run by
// tests/it/agui_clients.rs:
//
//   node agui-clients/run.mjs <toolgate url> <scenario> [user]
//
// Each scenario prints one JSON line: what the client saw (its runs'
// event types, the text, the tool results, the interrupts, the errors).
import { HttpAgent } from "@ag-ui/client";

const [base, scenario, user = "alice"] = process.argv.slice(2);
if (!base || !scenario) {
  console.error("usage: node run.mjs <toolgate url> <scenario> [user]");
  process.exit(2);
}

const agent = (threadId, who = user, messages = []) =>
  new HttpAgent({
    url: `${base}/ag-ui`,
    threadId,
    headers: { "x-user": who },
    initialMessages: structuredClone(messages),
  });

let lastMessageId = 0;
const say = (a, text) =>
  a.addMessage({ id: `u-${++lastMessageId}`, role: "user", content: text });

/// One run through the client: what it saw, or the error it raised.
async function run(a, params = {}, { abortAfterText = false } = {}) {
  const seen = { types: [], text: "", results: [], interrupts: [], errors: [] };
  const subscriber = {
    onEvent({ event }) {
      seen.types.push(event.type);
      if (event.type === "TEXT_MESSAGE_CONTENT") {
        seen.text += event.delta;
        if (abortAfterText) a.abortRun();
      }
      if (event.type === "TOOL_CALL_RESULT") {
        seen.results.push({ toolCallId: event.toolCallId, content: event.content });
      }
      if (event.type === "RUN_ERROR") {
        seen.errors.push({ code: event.code, message: event.message });
      }
      if (event.type === "RUN_FINISHED") {
        seen.outcome = event.outcome?.type ?? "success";
      }
    },
  };
  try {
    await a.runAgent(params, subscriber);
  } catch (e) {
    seen.thrown = String(e?.message ?? e);
  }
  seen.interrupts = a.pendingInterrupts.map((i) => ({
    id: i.id,
    reason: i.reason,
    toolCallId: i.toolCallId,
    message: i.message,
    responseSchema: i.responseSchema,
    expiresAt: i.expiresAt,
  }));
  return seen;
}

const resolved = (interrupt, payload) => ({
  interruptId: interrupt.id,
  status: "resolved",
  payload,
});

/// A first run that asks: the agent, and what it saw.
async function asked(thread, text) {
  const a = agent(thread);
  say(a, text);
  const first = await run(a);
  return { a, first };
}

/// The same thread on a page that kept the messages but not the client's
/// memory of the interrupts (a reload): its run reaches the server as sent.
const reloaded = (a, who = user) => agent(a.threadId, who, a.messages);

const scenarios = {
  async text() {
    const a = agent("t-text");
    say(a, "Hello there");
    return { run: await run(a) };
  },
  async approved() {
    const { a, first } = await asked("t-approved", "Send 50 USD to Hanako");
    const second = await run(a, {
      resume: [resolved(first.interrupts[0], { approved: true })],
    });
    return { first, second, messages: a.messages };
  },
  async denied() {
    const { a, first } = await asked("t-denied", "Send 50 USD to Hanako");
    const second = await run(a, {
      resume: [resolved(first.interrupts[0], { approved: false, reason: "not today" })],
    });
    return { first, second };
  },
  async edited() {
    const { a, first } = await asked("t-edited", "Send 50 USD to Hanako");
    const editedArgs = { amount: 20, recipient: "Hanako", currency: "USD" };
    const second = await run(a, {
      resume: [resolved(first.interrupts[0], { approved: true, editedArgs })],
    });
    return { first, second };
  },
  async cancelled() {
    const { a, first } = await asked("t-cancelled", "Send 50 USD to Hanako");
    const second = await run(a, {
      resume: [{ interruptId: first.interrupts[0].id, status: "cancelled" }],
    });
    return { first, second };
  },
  async two() {
    const { a, first } = await asked("t-two", "Send 10 USD to Taro and 20 USD to Jiro");
    const [one, other] = first.interrupts;
    // The client refuses a partial resume itself; a reloaded page's
    // partial resume reaches the server, which refuses it.
    const local = await run(a, { resume: [resolved(one, { approved: true })] });
    const partial = await run(reloaded(a), { resume: [resolved(one, { approved: true })] });
    const both = await run(a, {
      resume: [resolved(one, { approved: true }), resolved(other, { approved: false })],
    });
    return { first, local, partial, both };
  },
  async pending() {
    const { a, first } = await asked("t-pending", "Send 50 USD to Hanako");
    const page = reloaded(a);
    say(page, "What's the weather in Paris?");
    const refused = await run(page);
    return { first, refused };
  },
  async expired() {
    const { a, first } = await asked("t-expired", "Send 50 USD to Hanako");
    const wait = Date.parse(first.interrupts[0].expiresAt) - Date.now() + 500;
    await new Promise((r) => setTimeout(r, Math.max(wait, 0)));
    const resume = [resolved(first.interrupts[0], { approved: true })];
    const local = await run(a, { resume });
    const refused = await run(reloaded(a), { resume });
    return { first, local, refused };
  },
  async replayed() {
    const { a, first } = await asked("t-replayed", "Send 50 USD to Hanako");
    const page = reloaded(a);
    const resume = [resolved(first.interrupts[0], { approved: true })];
    const second = await run(a, { resume });
    const again = await run(page, { resume });
    return { first, second, again };
  },
  async forged() {
    const { a, first } = await asked("t-forged", "Send 50 USD to Hanako");
    const forged = await run(reloaded(a), {
      resume: [{ interruptId: "approval-999999", status: "resolved", payload: { approved: true } }],
    });
    const theirs = await run(reloaded(a, "mallory"), {
      resume: [resolved(first.interrupts[0], { approved: true })],
    });
    return { first, forged, theirs };
  },
  async reload() {
    const a = agent("t-reload");
    say(a, "count to 20000");
    const cut = await run(a, {}, { abortAfterText: true });
    const page = reloaded(a);
    say(page, "Hello again");
    const after = await run(page);
    return { cut, after };
  },
};

const chosen = scenarios[scenario];
if (!chosen) {
  console.error(`no scenario ${scenario}`);
  process.exit(2);
}
console.log(JSON.stringify(await chosen()));
