import { useEffect, useId, useState } from 'react';
import {
  decide,
  describeApprovers,
  followInbox,
  type ApiDecision,
  type InboxItem,
  type InboxStatus,
} from './api';
import { formatDuration, useRemaining } from './ApprovalCard';
import { Args } from './Args';
import { Alert, TextField } from './Field';
import { FingerprintLine } from './Fingerprint';

/**
 * The approvals inbox: every open question this user may decide, in any
 * chat, kept live by `GET /api/confirmations/events`; each decided here
 * through `POST /api/confirmations/{id}`.
 */
export function Approvals({ apiKey }: { apiKey: string }) {
  const [inbox, setInbox] = useState<{ items: InboxItem[]; receivedAt: number }>();
  const [status, setStatus] = useState<InboxStatus>({ live: false });
  useEffect(() => {
    return followInbox(
      apiKey,
      '',
      (items, receivedAt) => {
        setInbox({ items, receivedAt });
      },
      setStatus,
    );
  }, [apiKey]);

  return (
    <main className="approvals">
      <h2>Approvals</h2>
      <p className="status" role="status">
        {status.live
          ? 'Live: questions appear and leave as they are asked and decided.'
          : status.problem
            ? `Reconnecting (${status.problem})…`
            : 'Connecting…'}
      </p>
      {inbox && inbox.items.length === 0 && <p className="empty">Nothing waits for you.</p>}
      {inbox && inbox.items.length > 0 && (
        <ul className="inbox" aria-label="Waiting for a decision">
          {inbox.items.map((item) => (
            <li key={item.id}>
              <Question item={item} deadline={inbox.receivedAt + item.expiresInMs} apiKey={apiKey} />
            </li>
          ))}
        </ul>
      )}
    </main>
  );
}

type Sending = { state: 'idle' } | { state: 'sending' } | { state: 'sent'; approved: boolean } | { state: 'refused'; why: string };

/** One question: who asked, what, until when; approve or deny it. */
function Question({ item, deadline, apiKey }: { item: InboxItem; deadline: number; apiKey: string }) {
  const titleId = useId();
  const call = item.originalFunctionCall;
  const [reason, setReason] = useState('');
  const [editing, setEditing] = useState(false);
  const [args, setArgs] = useState(() => JSON.stringify(call.args, null, 2));
  const [payload, setPayload] = useState('');
  const [sending, setSending] = useState<Sending>({ state: 'idle' });
  const remaining = useRemaining(deadline);
  const expired = remaining !== undefined && remaining <= 0;
  const busy = sending.state === 'sending' || sending.state === 'sent';

  const send = async (approved: boolean) => {
    let decision: ApiDecision;
    try {
      decision = decisionOf(approved, reason, editing ? args : undefined, payload);
    } catch (e) {
      setSending({ state: 'refused', why: e instanceof Error ? e.message : String(e) });
      return;
    }
    setSending({ state: 'sending' });
    try {
      await decide(item.id, decision, apiKey);
      setSending({ state: 'sent', approved });
    } catch (e) {
      setSending({ state: 'refused', why: e instanceof Error ? e.message : String(e) });
    }
  };

  return (
    <section className="card" aria-labelledby={titleId} data-testid="inbox-item">
      <h3 id={titleId}>
        <code>{call.name}</code> for {item.principal}
      </h3>
      <p className="meta">
        {item.tool} · chat <code>{item.chatId}</code>
      </p>
      {item.hint && <p className="hint">{item.hint}</p>}
      <Args toolName={call.name} args={call.args} />
      <FingerprintLine fingerprint={item.fingerprint} />
      <p className={expired ? 'countdown expired' : 'countdown'} role="timer" aria-live="off">
        {expired ? 'Expired: nobody may decide it any more.' : `Decide within ${formatDuration(remaining ?? 0)}`}
      </p>
      <form
        className="decision"
        onSubmit={(e) => {
          e.preventDefault();
        }}
      >
        <TextField label="Reason (optional, the model sees it)" value={reason} onChange={setReason} />
        {item.mayApprove && item.editable && (
          <label className="toggle">
            <input
              type="checkbox"
              checked={editing}
              onChange={(e) => {
                setEditing(e.target.checked);
              }}
            />
            Edit the arguments
          </label>
        )}
        {item.mayApprove && editing && (
          <TextField label="Arguments (JSON)" rows={4} value={args} onChange={setArgs} />
        )}
        {item.mayApprove && (
          <TextField label="Payload (optional JSON, for the tool)" rows={2} value={payload} onChange={setPayload} />
        )}
        <Alert text={sending.state === 'refused' ? sending.why : undefined} />
        <div className="actions">
          {item.mayApprove ? (
            <button
              type="button"
              className="approve"
              disabled={expired || busy}
              onClick={() => void send(true)}
            >
              Approve
            </button>
          ) : (
            <p className="waiting" role="note">
              Waiting for approval by {describeApprovers(item.approvers)}
            </p>
          )}
          <button type="button" className="deny" disabled={busy} onClick={() => void send(false)}>
            Deny
          </button>
        </div>
      </form>
      {sending.state === 'sending' && <p className="sent">Sending…</p>}
      {sending.state === 'sent' && (
        <p className="sent" role="status">
          {sending.approved ? 'Approved.' : 'Denied.'}
        </p>
      )}
    </section>
  );
}

/** The body of a decision; throws, with what is wrong, on JSON that does not parse. */
export function decisionOf(approved: boolean, reason: string, args: string | undefined, payload: string): ApiDecision {
  const decision: ApiDecision = { approved };
  if (reason.trim()) decision.reason = reason.trim();
  if (!approved) return decision;
  if (args !== undefined) {
    const edited = parse(args, 'the arguments are not JSON');
    if (typeof edited !== 'object' || edited === null || Array.isArray(edited)) {
      throw new Error('the arguments must be a JSON object');
    }
    decision.editedArgs = edited as Record<string, unknown>;
  }
  if (payload.trim()) decision.payload = parse(payload, 'the payload is not JSON');
  return decision;
}

function parse(text: string, otherwise: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(otherwise);
  }
}
