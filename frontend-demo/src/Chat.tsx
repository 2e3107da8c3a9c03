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
import { listTools, openConfirmations, type ToolInfo } from './api';
import type { CardDetails } from './ApprovalCard';
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
  useEffect(
    () => () => {
      if (transport instanceof WebSocketChatTransport) transport.close();
    },
    [transport],
  );
  const { messages, sendMessage, addToolOutput, addToolApprovalResponse, status, error, stop, clearError } =
    useChat({
      id: chatId,
      messages: initialMessages,
      transport,
      // ADK: every question of the step answered; native: every approval.
      sendAutomaticallyWhen: (options) =>
        lastAssistantMessageIsCompleteWithToolCalls(options) ||
        lastAssistantMessageIsCompleteWithApprovalResponses(options),
    });
  const [input, setInput] = useState('');

  useEffect(() => saveMessages(chatId, messages), [chatId, messages]);

  const details = useDetails(chatId, settings.apiKey, pendingIds(messages));
  const answerers: Answerers = {
    details,
    answerAdk: (toolCallId, { approved, reason, remember, editedArgs }) =>
      void addToolOutput({
        tool: 'adk_request_confirmation',
        toolCallId,
        output: { confirmed: approved, reason, remember, editedArgs },
      }),
    answerNative: (id, { approved, reason }) => void addToolApprovalResponse({ id, approved, reason }),
  };

  const busy = status === 'submitted' || status === 'streaming';
  const send = (text: string) => {
    if (!text.trim() || busy) return;
    void sendMessage({ text });
    setInput('');
  };
  const submit = (event: FormEvent) => {
    event.preventDefault();
    send(input);
  };

  const end = useRef<HTMLDivElement>(null);
  useEffect(() => end.current?.scrollIntoView({ block: 'end' }), [messages]);

  return (
    <main className="chat">
      <ol className="messages" role="log" aria-live="polite" aria-label="Conversation">
        {messages.map((message) => (
          <Message key={message.id} message={message} answerers={answerers} />
        ))}
      </ol>
      {messages.length === 0 && (
        <div className="examples">
          <p>Try:</p>
          {EXAMPLES.map((text) => (
            <button key={text} type="button" onClick={() => send(text)}>
              {text}
            </button>
          ))}
        </div>
      )}
      {error && (
        <div className="banner" role="alert">
          <span>{error.message || 'The request failed.'}</span>
          <button type="button" onClick={clearError}>
            Dismiss
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
          onChange={(e) => setInput(e.target.value)}
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

/** Ids of the questions the last assistant message leaves open. */
function pendingIds(messages: UIMessage[]): string[] {
  const last = messages.at(-1);
  if (last?.role !== 'assistant') return [];
  const ids: string[] = [];
  for (const part of last.parts) {
    if (!isToolUIPart(part)) continue;
    if (getToolName(part) === 'adk_request_confirmation' && part.state === 'input-available') {
      ids.push(part.toolCallId);
    } else if (part.state === 'approval-requested') {
      ids.push(part.approval.id);
    }
  }
  return ids;
}

/** The server's view of the open questions: deadline, editability, schema. */
function useDetails(chatId: string, apiKey: string, ids: string[]): Map<string, CardDetails> {
  const [details, setDetails] = useState(new Map<string, CardDetails>());
  const tools = useRef<ToolInfo[]>(undefined);
  const key = ids.join(' ');
  useEffect(() => {
    if (!key) return;
    let live = true;
    void (async () => {
      try {
        const known = tools.current ?? (await listTools(apiKey));
        tools.current = known;
        const open = await openConfirmations(chatId, apiKey);
        if (!live) return;
        const fetchedAt = Date.now();
        setDetails(
          new Map(
            open.map((c) => [
              c.id,
              {
                editable: c.editable,
                deadline: fetchedAt + c.expiresInMs,
                hint: c.hint,
                parameters: known.find((t) => t.name === c.originalFunctionCall.name)?.parameters,
              },
            ]),
          ),
        );
      } catch (e) {
        // The cards still work without these extras.
        console.warn('cannot read the open confirmations', e);
      }
    })();
    return () => {
      live = false;
    };
  }, [chatId, apiKey, key]);
  return details;
}
