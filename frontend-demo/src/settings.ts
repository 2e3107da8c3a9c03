import type { UIMessage } from 'ai';

/** How this page talks to toolgate; kept in localStorage. */
export type Settings = {
  /**
   * `workflow`: `@ai-sdk/workflow`'s WorkflowChatTransport to `/api/chat`,
   * the turn held open and read on from where it was when cut.
   */
  transport: 'sse' | 'ws' | 'workflow';
  /** `adk`: an `adk_request_confirmation` tool call; `ai-sdk`: native approvals. */
  protocol: 'adk' | 'ai-sdk';
  /** Needed only when the server has `auth.apiKeys`. */
  apiKey: string;
};

const SETTINGS = 'toolgate-demo:settings';
const CURRENT = 'toolgate-demo:chat';
const MESSAGES = 'toolgate-demo:messages:';

export const defaults: Settings = { transport: 'sse', protocol: 'adk', apiKey: '' };

function read<T>(key: string): T | undefined {
  try {
    const raw = localStorage.getItem(key);
    return raw === null ? undefined : (JSON.parse(raw) as T);
  } catch {
    return undefined;
  }
}

function write(key: string, value: unknown) {
  try {
    localStorage.setItem(key, JSON.stringify(value));
  } catch {
    // Full or disabled storage: the chat still works, a reload forgets it.
  }
}

function isTransport(value: unknown): value is Settings['transport'] {
  return value === 'sse' || value === 'ws' || value === 'workflow';
}

/** The saved settings; `?transport=` in the page's address overrides the saved transport. */
export function loadSettings(): Settings {
  const saved = read<Partial<Settings>>(SETTINGS) ?? {};
  const asked = new URLSearchParams(location.search).get('transport');
  return {
    transport: isTransport(asked) ? asked : isTransport(saved.transport) ? saved.transport : 'sse',
    protocol: saved.protocol === 'ai-sdk' ? 'ai-sdk' : 'adk',
    apiKey: typeof saved.apiKey === 'string' ? saved.apiKey : '',
  };
}

export function saveSettings(settings: Settings) {
  write(SETTINGS, settings);
}

/** The chat this tab shows, with its messages, so a reload keeps pending cards. */
export function loadChat(): { id: string; messages: UIMessage[] } {
  const id = read<string>(CURRENT);
  if (typeof id !== 'string') return newChat();
  const messages = read<UIMessage[]>(MESSAGES + id);
  return { id, messages: Array.isArray(messages) ? messages : [] };
}

export function newChat(): { id: string; messages: UIMessage[] } {
  const previous = read<string>(CURRENT);
  if (typeof previous === 'string') localStorage.removeItem(MESSAGES + previous);
  const id = `chat-${crypto.randomUUID()}`;
  write(CURRENT, id);
  return { id, messages: [] };
}

export function saveMessages(id: string, messages: UIMessage[]) {
  write(MESSAGES + id, messages);
}
