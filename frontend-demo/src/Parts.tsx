import { getToolName, isToolUIPart, type DynamicToolUIPart, type ToolUIPart, type UIMessage } from 'ai';
import { useState, type FormEvent } from 'react';
import { ApprovalCard, type CardDetails, type Decision } from './ApprovalCard';
import type { Ended } from './api';
import { Args } from './Args';
import { Alert, TextField } from './Field';
import { saidOf, type Later } from './outcome';

type ToolPart = ToolUIPart | DynamicToolUIPart;

/** What the parts need from the chat. */
export type Answerers = {
  /** The questions that can be answered now (the last step's). */
  pending: Set<string>;
  /** The server's view of the open questions (`GET /api/confirmations`). */
  details: Map<string, CardDetails>;
  detailsLoaded: boolean;
  detailsError?: string;
  answerAdk: (toolCallId: string, decision: Decision) => void;
  answerNative: (approvalId: string, decision: Decision) => void;
  answerClient: (tool: string, toolCallId: string, result: { output: unknown } | { errorText: string }) => void;
  /** Where a question stands (`GET /api/confirmations/{id}`): how it ended, its fingerprint. */
  lookup: (id: string) => Promise<Ended>;
};

/** The card's details, or why it has none. */
function cardDetails(answerers: Answerers, id: string): CardDetails | undefined {
  const known = answerers.details.get(id);
  if (known) return known;
  if (answerers.detailsLoaded) return { editable: false, closed: true };
  if (answerers.detailsError) return { editable: false, problem: answerers.detailsError };
  return undefined;
}

const LEFT = 'Not answered: the chat went on without it.';

export function Message({ message, answerers }: { message: UIMessage; answerers: Answerers }) {
  return (
    <li className={`message ${message.role}`}>
      <span className="who">{message.role === 'user' ? 'You' : 'Assistant'}</span>
      {message.parts.map((part, i) => {
        if (part.type === 'text') return <p key={i} className="text">{part.text}</p>;
        if (part.type === 'reasoning')
          return (
            <details key={i} className="reasoning">
              <summary>Reasoning</summary>
              <p>{part.text}</p>
            </details>
          );
        if (isToolUIPart(part)) return <Tool key={part.toolCallId} part={part} answerers={answerers} />;
        if (part.type === 'data-toolgate-outcome') return <LaterOutcome key={i} data={part.data} />;
        return null;
      })}
    </li>
  );
}

function Tool({ part, answerers }: { part: ToolPart; answerers: Answerers }) {
  const name = getToolName(part);
  if (name === 'adk_request_confirmation') return <AdkQuestion part={part} answerers={answerers} />;

  if (part.state === 'approval-requested') {
    const id = part.approval.id;
    if (!answerers.pending.has(id)) return <p className="pending">{LEFT}</p>;
    return (
      <ApprovalCard
        toolName={name}
        args={part.input}
        protocol="ai-sdk"
        details={cardDetails(answerers, id)}
        onLookup={() => answerers.lookup(id)}
        onFingerprint={() => answerers.lookup(id).then((q) => q.fingerprint)}
        onDecide={(decision) => {
          answerers.answerNative(id, decision);
        }}
      />
    );
  }
  if (part.state === 'input-available' && handedOff(part)) {
    return <ClientTool name={name} part={part} answerers={answerers} />;
  }
  return (
    <div className="tool" data-state={part.state} data-testid={`tool-${name}`}>
      <p className="tool-name">
        <code>{name}</code> <span className="state">{label(part)}</span>
      </p>
      {part.input !== undefined && <Args toolName={name} args={part.input} />}
      {part.state === 'output-available' && <Output output={part.output} />}
      {part.state === 'output-error' && (
        <p className="error" role="alert">
          {part.errorText}
        </p>
      )}
      {part.state === 'output-denied' && (
        <p className="error">Denied{part.approval?.reason ? `: ${part.approval.reason}` : ''}</p>
      )}
    </div>
  );
}

function label(part: ToolPart): string {
  switch (part.state) {
    case 'input-streaming':
      return 'preparing…';
    case 'input-available':
      return 'running…';
    case 'approval-requested':
      return 'waiting for you';
    case 'approval-responded':
      return part.approval.approved ? 'approved, running…' : 'denied';
    case 'output-available':
      return 'done';
    case 'output-error':
      if (part.errorText.startsWith('User denied')) return 'denied by you';
      return part.errorText.startsWith('denied by policy') ? 'denied by policy' : 'failed';
    case 'output-denied':
      return 'denied';
    default:
      return '';
  }
}

function Output({ output }: { output: unknown }) {
  return (
    <pre className="output" aria-label="result">
      {JSON.stringify(output, null, 2)}
    </pre>
  );
}

type AdkInput = {
  originalFunctionCall?: { id?: string; name?: string; args?: unknown };
  toolConfirmation?: { hint?: string };
};

/** An `adk_request_confirmation` call: a card while open, a line once answered. */
function AdkQuestion({ part, answerers }: { part: ToolPart; answerers: Answerers }) {
  const input = (part.input ?? {}) as AdkInput;
  const call = input.originalFunctionCall ?? {};
  const toolName = call.name ?? 'tool';
  switch (part.state) {
    case 'input-streaming':
      return <p className="pending">Preparing a question…</p>;
    case 'input-available':
      if (!answerers.pending.has(part.toolCallId)) return <p className="pending">{LEFT}</p>;
      return (
        <ApprovalCard
          toolName={toolName}
          args={call.args}
          hint={input.toolConfirmation?.hint}
          protocol="adk"
          details={cardDetails(answerers, part.toolCallId)}
          onLookup={() => answerers.lookup(part.toolCallId)}
          onFingerprint={() => answerers.lookup(part.toolCallId).then((q) => q.fingerprint)}
          onDecide={(decision) => {
            answerers.answerAdk(part.toolCallId, decision);
          }}
        />
      );
    case 'output-available': {
      const output = (part.output ?? {}) as {
        confirmed?: boolean;
        reason?: string;
        remembered?: boolean;
        decision?: string;
      };
      return (
        <p className="answered" data-testid="answered">
          {output.decision === 'respond'
            ? `Answered in place of ${toolName}.`
            : output.confirmed
            ? `You approved ${toolName}${output.remembered ? ' (remembered)' : ''}.`
            : `You denied ${toolName}${output.reason ? `: ${output.reason}` : ''}.`}
        </p>
      );
    }
    case 'output-error':
      return (
        <p className="error" role="alert">
          {part.errorText}
        </p>
      );
    default:
      return null;
  }
}

/** A question left open earlier, decided (or closed) since. */
export function LaterOutcome({ data }: { data: unknown }) {
  const later = (data ?? {}) as Later;
  const tool = later.toolName ?? 'a tool';
  const outcome = later.outcome ?? {};
  return (
    <div className="later" data-testid="later-outcome">
      <p>{saidOf(tool, outcome)}</p>
      {outcome.kind === 'output' && <Output output={outcome.output} />}
    </div>
  );
}


/** Whether the server handed this call to the client (a client-side tool). */
function handedOff(part: ToolPart): boolean {
  const meta = part.callProviderMetadata as { toolgate?: { handoff?: unknown } } | undefined;
  return typeof meta?.toolgate?.handoff === 'string' && !part.providerExecuted;
}

/** A client-side tool this page does not run by itself: the user gives the result. */
function ClientTool({ name, part, answerers }: { name: string; part: ToolPart; answerers: Answerers }) {
  const [text, setText] = useState('');
  const [error, setError] = useState<string>();
  const send = (event: FormEvent) => {
    event.preventDefault();
    try {
      answerers.answerClient(name, part.toolCallId, { output: JSON.parse(text) as unknown });
    } catch {
      setError('The result must be JSON, e.g. {"color": "blue"} or "blue".');
    }
  };
  return (
    <form className="card client" onSubmit={send} data-testid="client-tool">
      <h3>
        <code>{name}</code> runs in your browser
      </h3>
      <Args toolName={name} args={part.input} />
      <TextField label="Result (JSON)" rows={2} value={text} onChange={setText} />
      <Alert text={error} />
      <div className="actions">
        <button type="submit" className="approve">
          Send result
        </button>
        <button
          type="button"
          onClick={() => {
            answerers.answerClient(name, part.toolCallId, { errorText: 'the user could not run it' });
          }}
        >
          Report failure
        </button>
      </div>
    </form>
  );
}
