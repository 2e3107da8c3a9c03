// An assistant-ui chat over AG-UI, as assistant-ui's README builds one:
// `@assistant-ui/react-ag-ui`'s runtime around `@ag-ui/client`'s
// HttpAgent, its thread and composer primitives, and a confirmation
// shown through its own interrupt hooks (`useAgUiInterrupts`,
// `useAgUiSubmitInterruptResponses`). Nothing here knows toolgate: the
// agent's URL is the page's own `/ag-ui` (agui-clients/browser.mjs serves
// the page and passes that path on to toolgate). Built by Vite in
// agui-clients/browser.mjs, driven in Chromium by tests/it/agui_browser.rs.
import { StrictMode, useMemo, useState } from "react";
import { createRoot } from "react-dom/client";
import { HttpAgent } from "@ag-ui/client";
import {
  AssistantRuntimeProvider,
  ComposerPrimitive,
  MessagePrimitive,
  ThreadPrimitive,
  useAuiState,
} from "@assistant-ui/react";
import {
  useAgUiInterrupts,
  useAgUiRuntime,
  useAgUiSubmitInterruptResponses,
} from "@assistant-ui/react-ag-ui";

const threadId = new URLSearchParams(location.search).get("thread") ?? crypto.randomUUID();

function ToolCall({ toolName, argsText, result, isError }) {
  return (
    <div className="tool-call" data-tool={toolName}>
      <code>
        {toolName}({argsText})
      </code>
      {result !== undefined && (
        <output className={isError ? "tool-error" : "tool-result"}>
          {typeof result === "string" ? result : JSON.stringify(result)}
        </output>
      )}
    </div>
  );
}

const Text = ({ text }) => <p>{text}</p>;

function UserMessage() {
  return (
    <MessagePrimitive.Root className="message user">
      <MessagePrimitive.Parts components={{ Text }} />
    </MessagePrimitive.Root>
  );
}

/// An assistant message, with its status (`running`, `requires-action`
/// while an interrupt waits, `complete`) on `data-status`.
function AssistantMessage() {
  const status = useAuiState((s) => s.message.status?.type);
  return (
    <MessagePrimitive.Root className="message assistant" data-status={status}>
      <MessagePrimitive.Parts components={{ Text, tools: { Fallback: ToolCall } }} />
    </MessagePrimitive.Root>
  );
}

/// The run's open interrupts, each answered as its `responseSchema`
/// asks: `approved`, and a `reason` when the user gives one.
function Interrupts() {
  const interrupts = useAgUiInterrupts();
  const submit = useAgUiSubmitInterruptResponses();
  const [reason, setReason] = useState("");
  const [error, setError] = useState(null);
  if (interrupts.length === 0) return null;
  const answer = (approved) =>
    submit(
      interrupts.map((interrupt) => ({
        interruptId: interrupt.id,
        status: "resolved",
        payload: approved || !reason ? { approved } : { approved, reason },
      })),
    ).catch((e) => setError(String(e?.message ?? e)));
  return (
    <section role="dialog" aria-label="Confirmation">
      {interrupts.map((interrupt) => (
        <p key={interrupt.id} className="interrupt" data-reason={interrupt.reason}>
          {interrupt.message}
        </p>
      ))}
      <input
        aria-label="Reason"
        value={reason}
        onChange={(event) => setReason(event.target.value)}
      />
      <button onClick={() => answer(true)}>Approve</button>
      <button onClick={() => answer(false)}>Deny</button>
      {error && <p role="alert">{error}</p>}
    </section>
  );
}

function App() {
  const agent = useMemo(() => new HttpAgent({ url: "/ag-ui", threadId }), []);
  const runtime = useAgUiRuntime({
    agent,
    onError: (e) => console.error(`the run failed: ${e?.message ?? e}`),
  });
  return (
    <AssistantRuntimeProvider runtime={runtime}>
      <ThreadPrimitive.Root>
        <ThreadPrimitive.Viewport>
          <ThreadPrimitive.Messages components={{ UserMessage, AssistantMessage }} />
        </ThreadPrimitive.Viewport>
        <Interrupts />
        <ComposerPrimitive.Root>
          <ComposerPrimitive.Input aria-label="Message" />
          <ComposerPrimitive.Send>Send</ComposerPrimitive.Send>
        </ComposerPrimitive.Root>
      </ThreadPrimitive.Root>
    </AssistantRuntimeProvider>
  );
}

createRoot(document.getElementById("root")).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
