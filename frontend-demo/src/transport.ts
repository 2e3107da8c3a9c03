import { DefaultChatTransport, WebSocketChatTransport, type ChatTransport, type UIMessage } from 'ai';
import { authHeaders } from './api';
import type { Settings } from './settings';

/** SSE to `/stream`, or one WebSocket to `/live`, asking in the chosen protocol. */
export function makeTransport(settings: Settings): ChatTransport<UIMessage> {
  // `finish`: a turn that asks ends, and the answer comes with the next
  // request, which useChat sends by itself. (With `hold` the stream stays
  // open, and useChat sends nothing while it streams.)
  const body = { toolgate: { protocol: settings.protocol, flow: 'finish' } };
  // A browser cannot set headers on a WebSocket upgrade; the
  // WebSocket transport sends these in each frame instead.
  const headers = authHeaders(settings.apiKey);
  if (settings.transport === 'ws') {
    const url = new URL('/live', window.location.href);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    return new WebSocketChatTransport({ url: url.toString(), headers, body });
  }
  return new DefaultChatTransport({ api: '/stream', headers, body });
}
