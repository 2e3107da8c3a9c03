import { useEffect, useId, useLayoutEffect, useRef, useState, type FormEvent } from 'react';
import type { Ended, Fingerprint, JsonSchema } from './api';
import { Args } from './Args';
import { Alert, TextField } from './Field';
import { FingerprintLine, useFingerprint } from './Fingerprint';
import { saidOf } from './outcome';

/** The user's answer to one question. */
export type Decision = {
  approved: boolean;
  reason?: string;
  /** ADK only: don't ask again for this tool in this chat, in every chat, or in every chat for a while. */
  remember?: 'session' | 'global' | { scope: 'window'; minutes: number };
  /** Only where the server allows editing this tool. */
  editedArgs?: Record<string, unknown>;
};

/** What the server says about an open question (`GET /api/confirmations`). */
export type CardDetails = {
  editable: boolean;
  /** When the server stops accepting an answer, on this browser's clock. */
  deadline?: number;
  hint?: string;
  parameters?: JsonSchema;
  /** The server no longer has this question open: expired, or answered elsewhere. */
  closed?: boolean;
  /** The server's details could not be read. */
  problem?: string;
  /** Someone else must approve (`approvers`, in words): this user may only deny. */
  waitingFor?: string;
};

type Props = {
  toolName: string;
  args: unknown;
  hint?: string;
  /** `adk` answers carry remember and edits; native AI SDK approvals cannot. */
  protocol: 'adk' | 'ai-sdk';
  details?: CardDetails;
  onDecide: (decision: Decision) => void;
  /** Once the question is no longer open: how it ended, for the card to say. */
  onLookup?: () => Promise<Ended>;
  /** The question's fingerprint (`GET /api/confirmations/{id}`), called once when the card appears. */
  onFingerprint?: () => Promise<Fingerprint | null | undefined>;
};

type Mode = 'ask' | 'deny' | 'edit' | 'sent';

export function ApprovalCard({ toolName, args, hint, protocol, details, onDecide, onLookup, onFingerprint }: Props) {
  const titleId = useId();
  const [mode, setMode] = useState<Mode>('ask');
  const [reason, setReason] = useState('');
  const [remember, setRemember] = useState<'once' | 'session' | 'hour' | 'global'>('once');
  const remaining = useRemaining(details?.deadline);
  const expired = details?.closed === true || (remaining !== undefined && remaining <= 0);
  const editable = protocol === 'adk' && details?.editable === true;
  const question = hint ?? details?.hint;
  const fingerprint = useFingerprint(onFingerprint);

  const section = useRef<HTMLElement>(null);
  const decide = (decision: Decision) => {
    // The card goes away once answered: keep keyboard users in the flow.
    const next = nextFocus(section.current);
    setMode('sent');
    onDecide(decision);
    setTimeout(() => {
      next?.focus();
    }, 0);
  };
  const approve = (editedArgs?: Record<string, unknown>) => {
    const reach: Decision['remember'] =
      remember === 'once' ? undefined : remember === 'hour' ? { scope: 'window', minutes: 60 } : remember;
    decide({
      approved: true,
      ...(reach && protocol === 'adk' ? { remember: reach } : {}),
      ...(editedArgs ? { editedArgs } : {}),
    });
  };
  const deny = (event: FormEvent) => {
    event.preventDefault();
    const text = reason.trim();
    decide({ approved: false, ...(text ? { reason: text } : {}) });
  };
  // Offered whether or not the user may approve.
  const denyButton = (
    <button
      type="button"
      className="deny"
      onClick={() => {
        setMode('deny');
      }}
    >
      Deny…
    </button>
  );

  return (
    <section className="card" aria-labelledby={titleId} data-testid="approval-card" ref={section}>
      <h3 id={titleId}>
        Approve <code>{toolName}</code>?
      </h3>
      {question && <p className="hint">{question}</p>}
      <Args toolName={toolName} args={args} />
      <FingerprintLine fingerprint={fingerprint} />
      {details?.closed ? (
        <Closed toolName={toolName} onLookup={onLookup} />
      ) : (
        remaining !== undefined && (
          <p className={expired ? 'countdown expired' : 'countdown'} role="timer" aria-live="off">
            {expired
              ? 'Expired: the server no longer accepts an approval.'
              : `Answer within ${formatDuration(remaining)}`}
          </p>
        )
      )}
      {details?.problem && <p className="countdown">Cannot read the deadline: {details.problem}</p>}
      {mode === 'ask' && details?.waitingFor !== undefined && (
        <div className="actions">
          <p className="waiting" role="note">
            Waiting for approval by {details.waitingFor}
          </p>
          {denyButton}
        </div>
      )}
      {mode === 'ask' && details?.waitingFor === undefined && (
        <div className="actions">
          {protocol === 'adk' && (
            <label className="remember">
              Ask again
              <select
                value={remember}
                onChange={(e) => {
                  setRemember(e.target.value as typeof remember);
                }}
              >
                <option value="once">next time</option>
                <option value="session">not in this chat</option>
                <option value="hour">not for 1 hour (all my chats)</option>
                <option value="global">never (all my chats)</option>
              </select>
            </label>
          )}
          <button
            type="button"
            className="approve"
            disabled={expired}
            onClick={() => {
              approve();
            }}
          >
            Approve
          </button>
          {editable && (
            <button
              type="button"
              disabled={expired}
              onClick={() => {
                setMode('edit');
              }}
            >
              Edit…
            </button>
          )}
          {denyButton}
        </div>
      )}
      {mode === 'deny' && (
        <form className="actions" onSubmit={deny}>
          <TextField label="Reason (optional, the model sees it)" value={reason} onChange={setReason} autoFocus />
          <button type="submit" className="deny">
            Deny
          </button>
          <button
            type="button"
            onClick={() => {
              setMode('ask');
            }}
          >
            Back
          </button>
        </form>
      )}
      {mode === 'edit' && (
        <EditForm
          args={args}
          schema={details?.parameters}
          disabled={expired}
          onApprove={(edited) => {
            approve(edited);
          }}
          onCancel={() => {
            setMode('ask');
          }}
        />
      )}
      {mode === 'sent' && (
        <p className="sent" role="status">
          Answer sent…
        </p>
      )}
    </section>
  );
}

/** The next open card's Approve button, else the message box. */
function nextFocus(card: HTMLElement | null): HTMLElement | null {
  const cards = [...document.querySelectorAll<HTMLElement>('[data-testid="approval-card"]')];
  const others = [...cards.slice(cards.indexOf(card as HTMLElement) + 1), ...cards].filter((c) => c !== card);
  const button = others.map((c) => c.querySelector<HTMLElement>('button.approve')).find(Boolean);
  return button ?? document.getElementById('prompt');
}

/** Milliseconds left until `deadline`, ticking each second. */
export function useRemaining(deadline?: number): number | undefined {
  const [now, setNow] = useState(() => Date.now());
  // Before paint: a deadline that arrives after the card mounted counts from
  // now, not from the mount (which would show more time than the question has).
  useLayoutEffect(() => {
    if (deadline === undefined) return;
    setNow(Date.now());
    const timer = setInterval(() => {
      setNow(Date.now());
    }, 1000);
    return () => {
      clearInterval(timer);
    };
  }, [deadline]);
  return deadline === undefined ? undefined : Math.max(0, deadline - now);
}

export function formatDuration(ms: number): string {
  const seconds = Math.ceil(ms / 1000);
  if (seconds >= 3600) return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
  const m = Math.floor(seconds / 60);
  const s = seconds % 60;
  return `${m}:${String(s).padStart(2, '0')}`;
}

type Field = { name: string; kind: 'number' | 'integer' | 'boolean' | 'string' | 'json'; schema: JsonSchema };

function fieldsOf(schema: JsonSchema | undefined, args: unknown): Field[] | undefined {
  const properties = schema?.properties;
  if (!properties || typeof args !== 'object' || args === null || Array.isArray(args)) return undefined;
  const names = [...new Set([...Object.keys(properties), ...Object.keys(args)])];
  return names.map((name) => {
    const property = properties[name] ?? {};
    const type = Array.isArray(property.type) ? property.type[0] : property.type;
    const kind =
      type === 'number' || type === 'integer' || type === 'boolean' || type === 'string' ? type : 'json';
    return { name, kind, schema: property };
  });
}

function initialText(value: unknown, kind: Field['kind']): string {
  if (value === undefined) return '';
  if (kind === 'json') return JSON.stringify(value, null, 2);
  return String(value);
}

/** A form over the tool's JSON schema; the server checks the edit again. */
function EditForm({
  args,
  schema,
  disabled,
  onApprove,
  onCancel,
}: {
  args: unknown;
  schema?: JsonSchema;
  disabled: boolean;
  onApprove: (edited: Record<string, unknown>) => void;
  onCancel: () => void;
}) {
  const fields = fieldsOf(schema, args);
  const record = (typeof args === 'object' && args !== null ? args : {}) as Record<string, unknown>;
  const [values, setValues] = useState<Record<string, string | boolean>>(() =>
    Object.fromEntries(
      (fields ?? [{ name: '', kind: 'json' as const, schema: {} }]).map((f) => [
        f.name,
        f.kind === 'boolean' ? record[f.name] === true : initialText(f.name ? record[f.name] : args, f.kind),
      ]),
    ),
  );
  const [error, setError] = useState<string>();

  const submit = (event: FormEvent) => {
    event.preventDefault();
    try {
      if (!fields) {
        const parsed: unknown = JSON.parse(String(values['']));
        if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
          throw new Error('the arguments must be a JSON object');
        }
        onApprove(parsed as Record<string, unknown>);
        return;
      }
      const edited: Record<string, unknown> = {};
      for (const field of fields) {
        const value = values[field.name];
        if (field.kind === 'boolean') {
          edited[field.name] = value === true;
          continue;
        }
        const text = String(value);
        if (text === '' && !schema?.required?.includes(field.name)) continue;
        if (field.kind === 'number' || field.kind === 'integer') {
          const n = Number(text);
          if (text.trim() === '' || !Number.isFinite(n)) throw new Error(`${field.name} must be a number`);
          edited[field.name] = n;
        } else if (field.kind === 'string') {
          edited[field.name] = text;
        } else {
          edited[field.name] = JSON.parse(text);
        }
      }
      onApprove(edited);
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
  };

  const set = (name: string, value: string | boolean) => {
    setValues((v) => ({ ...v, [name]: value }));
  };
  return (
    <form className="edit" onSubmit={submit}>
      {(fields ?? [{ name: '', kind: 'json' as const, schema: {} }]).map((field) => (
        <label key={field.name}>
          {field.name || 'Arguments (JSON)'}
          {field.kind === 'boolean' ? (
            <input
              type="checkbox"
              checked={values[field.name] === true}
              onChange={(e) => {
                set(field.name, e.target.checked);
              }}
            />
          ) : field.kind === 'json' ? (
            <textarea
              rows={4}
              value={String(values[field.name])}
              onChange={(e) => {
                set(field.name, e.target.value);
              }}
            />
          ) : field.kind === 'string' && Array.isArray(field.schema.enum) ? (
            <select
              value={String(values[field.name])}
              onChange={(e) => {
                set(field.name, e.target.value);
              }}
            >
              {field.schema.enum.map((option) => (
                <option key={String(option)} value={String(option)}>
                  {String(option)}
                </option>
              ))}
            </select>
          ) : (
            <input
              type={field.kind === 'string' ? 'text' : 'number'}
              step={field.kind === 'integer' ? 1 : 'any'}
              value={String(values[field.name])}
              onChange={(e) => {
                set(field.name, e.target.value);
              }}
            />
          )}
        </label>
      ))}
      <Alert text={error} />
      <div className="actions">
        <button type="submit" className="approve" disabled={disabled}>
          Approve with these arguments
        </button>
        <button type="button" onClick={onCancel}>
          Back
        </button>
      </div>
    </form>
  );
}

/** A question no longer open: how it ended, once the server says. */
function Closed({ toolName, onLookup }: { toolName: string; onLookup?: () => Promise<Ended> }) {
  const [said, setSaid] = useState<string>();
  useEffect(() => {
    if (!onLookup) return;
    let current = true;
    onLookup().then(
      (ended) => {
        if (current && ended.status === 'decided' && ended.outcome) setSaid(saidOf(toolName, ended.outcome));
      },
      () => undefined,
    );
    return () => {
      current = false;
    };
  }, [onLookup]);
  return (
    <p className="countdown expired" data-testid="closed">
      {said ?? 'No longer open on the server: it expired or was answered elsewhere.'}
    </p>
  );
}
