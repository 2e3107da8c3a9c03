/** The parts of toolgate's JSON API the page reads. */
import { jsonSchema, parseJsonEventStream } from 'ai';

/** An entry of `GET /api/confirmations`: a question waiting for its answer. */
export type OpenConfirmation = {
  id: string;
  chatId: string;
  protocol: 'adk' | 'ai-sdk';
  originalFunctionCall: { id: string; name: string; args: unknown };
  hint: string;
  expiresAtMs: number;
  expiresInMs: number;
  editable: boolean;
  /** Who must approve (principals, or `role:NAME`); empty: the user who asked. */
  approvers: string[];
  requireDistinctApprover: boolean;
  /** Whether the caller may approve it (the user who asked may always deny). */
  mayApprove: boolean;
  /** What the approver is shown, as digests; `null` for a question from before toolgate kept them. */
  fingerprint?: Fingerprint | null;
};

/** A question's fingerprint: SHA-256 digests (lowercase hex) of the tool's definition and of the call. */
export type Fingerprint = { definition: string; call: string };

/** An entry of the inbox: a question the caller may decide, in any chat. */
export type InboxItem = OpenConfirmation & {
  /** The user who asked. */
  principal: string;
  /** The tool's qualified name (`internal--process_payment`). */
  tool: string;
};

/** Who a question waits for, in words: `boss or role:finance`. */
export function describeApprovers(approvers: string[]): string {
  return approvers.length > 0 ? approvers.join(' or ') : 'another user';
}

/** A decision through `POST /api/confirmations/{id}`. */
export type ApiDecision = {
  approved: boolean;
  reason?: string;
  /** Don't ask again for this tool: in this chat, in every chat, or in every chat for a while. */
  remember?: 'session' | 'global' | { scope: 'window'; minutes: number };
  editedArgs?: Record<string, unknown>;
  payload?: unknown;
};

/** An entry of `GET /api/tools`. */
export type ToolInfo = {
  name: string;
  qualifiedName: string;
  description: string;
  parameters: JsonSchema;
  policy: string;
  /** `builtin`, `http`, `mcp` (with `server`), `client` or `application`. */
  source: string;
};

export type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  enum?: unknown[];
  description?: string;
};

export function authHeaders(apiKey: string): Record<string, string> {
  return apiKey ? { authorization: `Bearer ${apiKey}` } : {};
}

async function getJson<T>(path: string, apiKey: string): Promise<T> {
  const response = await fetch(path, { headers: authHeaders(apiKey) });
  if (!response.ok) {
    const text = await response.text();
    throw new Error(`${path}: ${response.status} ${text}`.trim());
  }
  return (await response.json()) as T;
}

export function openConfirmations(chatId: string, apiKey: string) {
  return getJson<OpenConfirmation[]>(
    `/api/confirmations?chatId=${encodeURIComponent(chatId)}`,
    apiKey,
  );
}

/** Where a question stands and how it ended, as `GET /api/confirmations/{id}` says. */
export type Ended = {
  status: 'open' | 'deciding' | 'decided';
  outcome?: { kind: string; output?: unknown; message?: string; reason?: string | null; responded?: boolean };
  fingerprint?: Fingerprint | null;
};

/** One question and where it stands (`GET /api/confirmations/{id}`). */
export function question(id: string, apiKey: string) {
  return getJson<Ended>(`/api/confirmations/${encodeURIComponent(id)}`, apiKey);
}

export async function listTools(apiKey: string): Promise<ToolInfo[]> {
  return (await getJson<{ tools: ToolInfo[] }>('/api/tools', apiKey)).tools;
}

/** Decides a question out of band; a refusal throws with the server's own words. */
export async function decide(id: string, decision: ApiDecision, apiKey: string): Promise<void> {
  const response = await fetch(`/api/confirmations/${encodeURIComponent(id)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...authHeaders(apiKey) },
    body: JSON.stringify(decision),
  });
  if (response.ok) return;
  const text = await response.text();
  let said = text;
  try {
    const error = (JSON.parse(text) as { error?: unknown }).error;
    if (typeof error === 'string') said = error;
  } catch {
    // Not toolgate's JSON (a proxy's page): its text as it came.
  }
  throw new Error(said.trim() || `${response.status} ${response.statusText}`);
}

/** What `GET /api/confirmations/events` sends. */
type InboxEvent = { confirmations: InboxItem[] } | { error: string };

const inboxEvent = jsonSchema<InboxEvent>(
  { type: 'object' },
  {
    validate: (value) => {
      const event = value as Partial<{ confirmations: unknown; error: unknown }>;
      return Array.isArray(event.confirmations) || typeof event.error === 'string'
        ? { success: true, value: value as InboxEvent }
        : { success: false, error: new Error('not an inbox event') };
    },
  },
);

/** How the live inbox is doing. */
export type InboxStatus = { live: boolean; problem?: string };

/** Waits before connecting again: 1 s, doubling, at most 30 s. */
const RETRY_FIRST = 1_000;
const RETRY_MOST = 30_000;

/**
 * Follows the caller's inbox (`GET /api/confirmations/events`, with the
 * filter in `query`), calling `onList` with each listing the server sends
 * and `onStatus` as the connection comes and goes; connects again when it
 * drops. A fetch rather than an `EventSource`, which cannot send the API
 * key. Returns the function that stops it.
 */
export function followInbox(
  apiKey: string,
  query: string,
  onList: (items: InboxItem[], receivedAt: number) => void,
  onStatus: (status: InboxStatus) => void,
): () => void {
  const stop = new AbortController();
  void (async () => {
    let wait = RETRY_FIRST;
    while (!stop.signal.aborted) {
      let problem: string | undefined;
      try {
        const response = await fetch(`/api/confirmations/events${query}`, {
          headers: { accept: 'text/event-stream', ...authHeaders(apiKey) },
          signal: stop.signal,
        });
        if (!response.ok || !response.body) {
          throw new Error(`${response.status} ${(await response.text()).trim()}`.trim());
        }
        const events = parseJsonEventStream({ stream: response.body, schema: inboxEvent }).getReader();
        for (;;) {
          const { done, value: event } = await events.read();
          if (done) break;
          if (!event.success) continue;
          if ('error' in event.value) {
            onStatus({ live: false, problem: event.value.error });
            continue;
          }
          wait = RETRY_FIRST;
          onStatus({ live: true });
          onList(event.value.confirmations, Date.now());
        }
        problem = 'the server closed the stream';
      } catch (e) {
        if (stop.signal.aborted) return;
        problem = e instanceof Error ? e.message : String(e);
      }
      onStatus({ live: false, problem });
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, RETRY_MOST);
    }
  })();
  return () => {
    stop.abort();
  };
}
