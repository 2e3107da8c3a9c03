import { useChat } from '@ai-sdk/react';
import {
  getToolName,
  isToolUIPart,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
  type UIMessage,
  WebSocketChatTransport,
} from 'ai';
import { useEffect, useMemo, useRef, useState, type FormEvent } from 'react';
import {
  decide,
  describeApprovers,
  followInbox,
  listTools,
  openConfirmations,
  question,
  type ApiDecision,
  type OpenConfirmation,
  type ToolInfo,
} from './api';
import type { CardDetails } from './ApprovalCard';
import { browserTools } from './browserTools';
import { Message, type Answerers } from './Parts';
import { saveMessages, type Settings } from './settings';
import { makeTransport } from './transport';

const EXAMPLES = [
  'Send 50 USD to Hanako',
  'Pay 20 EUR to Taro and send 5 USD to Hanako',
  'What is the weather in Tokyo?',
];

export function Chat({
  chatId,
  initialMessages,
  settings,
}: {
  chatId: string;
  initialMessages: UIMessage[];
  settings: Settings;
}) {
  const transport = useMemo(() => makeTransport(settings), [settings]);
  // A socket left open would count against the server's idle limit.
  useEffect(() => {
    return () => {
      if (transport instanceof WebSocketChatTransport) transport.close();
    };
  }, [transport]);
  const chat = useChat({
    id: chatId,
    messages: initialMessages,
    transport,
    // ADK: every question of the step answered; native: every approval;
    // client-side tools: every result in.
    sendAutomaticallyWhen: (options) =>
      lastAssistantMessageIsCompleteWithToolCalls(options) ||
      lastAssistantMessageIsCompleteWithApprovalResponses(options),
    // Tools the server hands to the browser that this page knows how to run.
    onToolCall: ({ toolCall }) => {
      const run = browserTools[toolCall.toolName];
      if (!run) return;
      void chat.addToolOutput({ tool: toolCall.toolName, toolCallId: toolCall.toolCallId, output: run() });
    },
  });
  const { messages, sendMessage, addToolOutput, addToolApprovalResponse, status, error, stop, clearError } = chat;
  const [input, setInput] = useState('');

  // Only settled states are kept: a reload in mid-stream restores the
  // chat as it was before, not a half-streamed answer nobody finishes.
  useEffect(() => {
    if (status === 'ready' || status === 'error') saveMessages(chatId, messages);
  }, [chatId, messages, status]);

  const pending = pendingIds(messages);
  const details = useDetails(chatId, settings.apiKey, pending);
  // A held turn (the workflow transport) is still streaming while its
  // question is open, and useChat sends nothing then: the card decides
  // through the API, and the turn goes on in the same stream.
  const [refused, setRefused] = useState<string>();
  const decideHeld = (id: string, decision: ApiDecision) => {
    void decide(id, decision, settings.apiKey).then(
      () => {
        setRefused(undefined);
      },
      (e: unknown) => {
        setRefused(e instanceof Error ? e.message : String(e));
      },
    );
  };
  const held = settings.transport === 'workflow';
  const answerers: Answerers = {
    pending: new Set(pending),
    details: details.byId,
    detailsLoaded: details.loaded,
    detailsError: details.error,
    answerAdk: (toolCallId, { approved, reason, remember, editedArgs }) => {
      if (held) decideHeld(toolCallId, { approved, reason, remember, editedArgs });
      else
        void addToolOutput({
          tool: 'adk_request_confirmation',
          toolCallId,
          output: { confirmed: approved, reason, remember, editedArgs },
        });
    },
    answerNative: (id, { approved, reason }) => {
      if (held) decideHeld(id, { approved, reason });
      else void addToolApprovalResponse({ id, approved, reason });
    },
    lookup: (id) => question(id, settings.apiKey),
    answerClient: (tool, toolCallId, result) =>
      void ('errorText' in result
        ? addToolOutput({ tool, toolCallId, state: 'output-error', errorText: result.errorText })
        : addToolOutput({ tool, toolCallId, output: result.output })),
  };

  const busy = status === 'submitted' || status === 'streaming';
  const unsent = status === 'ready' && hasUnsentAnswers(messages);
  const send = (text: string) => {
    if (!text.trim() || busy) return;
    void sendMessage({ text });
    setInput('');
  };
  const submit = (event: FormEvent) => {
    event.preventDefault();
    send(input);
  };
  const retry = () => {
    clearError();
    void sendMessage();
  };

  const end = useRef<HTMLDivElement>(null);
  // A block body: what scrollIntoView returns (a Promise in newer
  // browsers) must not become the effect's cleanup.
  useEffect(() => {
    end.current?.scrollIntoView({ block: 'end' });
  }, [messages]);

  return (
    <main className="chat">
      <section role="log" aria-label="Conversation" aria-busy={busy}>
        <ol className="messages">
          {messages.map((message) => (
            <Message key={message.id} message={message} answerers={answerers} />
          ))}
        </ol>
      </section>
      {messages.length === 0 && (
        <div className="examples">
          <p>Try:</p>
          {EXAMPLES.map((text) => (
            <button
              key={text}
              type="button"
              onClick={() => {
                send(text);
              }}
            >
              {text}
            </button>
          ))}
        </div>
      )}
      {error && (
        <div className="banner" role="alert">
          <span>{error.message || 'The request failed.'}</span>
          <span className="actions">
            <button type="button" onClick={retry}>
              Retry
            </button>
            <button type="button" onClick={clearError}>
              Dismiss
            </button>
          </span>
        </div>
      )}
      {!error && refused && (
        <div className="banner" role="alert">
          <span>Your answer was not taken: {refused}</span>
          <button
            type="button"
            onClick={() => {
              setRefused(undefined);
            }}
          >
            Dismiss
          </button>
        </div>
      )}
      {!error && unsent && (
        <div className="banner" role="alert">
          <span>Your answers have not reached the server yet.</span>
          <button type="button" onClick={() => void sendMessage()}>
            Send them
          </button>
        </div>
      )}
      <form className="composer" onSubmit={submit}>
        <label htmlFor="prompt" className="visually-hidden">
          Message
        </label>
        <input
          id="prompt"
          value={input}
          onChange={(e) => {
            setInput(e.target.value);
          }}
          placeholder="Send 50 USD to Hanako"
          autoComplete="off"
        />
        {busy ? (
          <button type="button" onClick={() => void stop()}>
            Stop
          </button>
        ) : (
          <button type="submit" disabled={!input.trim()}>
            Send
          </button>
        )}
      </form>
      <div ref={end} />
    </main>
  );
}

/** The parts of the last assistant message's last step. */
function lastStep(messages: UIMessage[]) {
  const last = messages.at(-1);
  if (last?.role !== 'assistant') return [];
  const start = last.parts.findLastIndex((part) => part.type === 'step-start');
  return last.parts.slice(start + 1);
}

/** Ids of the questions the last step leaves open: only these can be answered. */
function pendingIds(messages: UIMessage[]): string[] {
  const ids: string[] = [];
  for (const part of lastStep(messages)) {
    if (!isToolUIPart(part)) continue;
    if (getToolName(part) === 'adk_request_confirmation' && part.state === 'input-available') {
      ids.push(part.toolCallId);
    } else if (part.state === 'approval-requested') {
      ids.push(part.approval.id);
    }
  }
  return ids;
}

/**
 * Answers given but never sent: the request failed, or the page was
 * reloaded before it went out. The server's answer would have started a
 * new step.
 */
function hasUnsentAnswers(messages: UIMessage[]): boolean {
  const parts = lastStep(messages).filter(isToolUIPart);
  const answered = parts.some(
    (part) =>
      (getToolName(part) === 'adk_request_confirmation' && part.state === 'output-available') ||
      part.state === 'approval-responded',
  );
  const open = parts.some(
    (part) =>
      (getToolName(part) === 'adk_request_confirmation' && part.state === 'input-available') ||
      part.state === 'approval-requested',
  );
  return answered && !open;
}

type Details = { byId: Map<string, CardDetails>; loaded: boolean; error?: string };

/** Each open question's card details, from the server's listing fetched at `fetchedAt`. */
function detailsOf(open: OpenConfirmation[], tools: ToolInfo[], fetchedAt: number): Map<string, CardDetails> {
  return new Map(
    open.map((c): [string, CardDetails] => [
      c.id,
      {
        editable: c.editable,
        deadline: fetchedAt + c.expiresInMs,
        hint: c.hint,
        parameters: tools.find((t) => t.name === c.originalFunctionCall.name)?.parameters,
        waitingFor: c.mayApprove ? undefined : describeApprovers(c.approvers),
      },
    ]),
  );
}

/**
 * The server's view of the open questions: deadline, editability, schema,
 * who else must approve. While a card waits for someone else, the user's
 * own inbox is followed, so the card learns at once when it is decided.
 */
function useDetails(chatId: string, apiKey: string, ids: string[]): Details {
  const [details, setDetails] = useState<Details>({ byId: new Map(), loaded: false });
  const tools = useRef<ToolInfo[]>(undefined);
  const key = ids.join(' ');
  useEffect(() => {
    if (!key) {
      setDetails({ byId: new Map(), loaded: false });
      return;
    }
    let live = true;
    void (async () => {
      try {
        const known = tools.current ?? (await listTools(apiKey));
        tools.current = known;
        const open = await openConfirmations(chatId, apiKey);
        if (!live) return;
        setDetails({ byId: detailsOf(open, known, Date.now()), loaded: true });
      } catch (e) {
        if (live) setDetails({ byId: new Map(), loaded: false, error: e instanceof Error ? e.message : String(e) });
      }
    })();
    return () => {
      live = false;
    };
  }, [chatId, apiKey, key]);
  const waiting = [...details.byId.values()].some((d) => d.waitingFor !== undefined);
  useEffect(() => {
    if (!waiting) return;
    return followInbox(
      apiKey,
      '?mine=true',
      (items, receivedAt) => {
        const here = items.filter((item) => item.chatId === chatId);
        setDetails({ byId: detailsOf(here, tools.current ?? [], receivedAt), loaded: true });
      },
      () => undefined,
    );
  }, [waiting, chatId, apiKey]);
  return details;
}
