import { WorkflowChatTransport } from '@ai-sdk/workflow/client';
import { DefaultChatTransport, WebSocketChatTransport, type ChatTransport, type UIMessage } from 'ai';
import { authHeaders } from './api';
import type { Settings } from './settings';

/**
 * SSE to `/stream`, one WebSocket to `/live`, or `@ai-sdk/workflow`'s
 * WorkflowChatTransport to `/api/chat`, asking in the chosen protocol.
 */
export function makeTransport(settings: Settings): ChatTransport<UIMessage> {
  // A browser cannot set headers on a WebSocket upgrade; the
  // WebSocket transport sends these in each frame instead.
  const headers = authHeaders(settings.apiKey);
  if (settings.transport === 'workflow') return workflowTransport(settings, headers);
  // `finish`: a turn that asks ends, and the answer comes with the next
  // request, which useChat sends by itself. (With `hold` the stream stays
  // open, and useChat sends nothing while it streams.)
  const body = { toolgate: { protocol: settings.protocol, flow: 'finish' } };
  if (settings.transport === 'ws') {
    const url = new URL('/live', window.location.href);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    return new WebSocketChatTransport({ url: url.toString(), headers, body });
  }
  return new DefaultChatTransport({ api: '/stream', headers, body });
}

/**
 * The turn is held open (`flow: hold`): a question keeps the stream
 * waiting, the card decides it through `POST /api/confirmations/{id}`, and
 * the turn goes on in the same stream. When a proxy or the network cuts
 * that stream before `finish`, the transport reads it on with `GET
 * /api/chat/{chatId}/stream?startIndex=N` from the first chunk it has not
 * seen.
 */
function workflowTransport(settings: Settings, headers: Record<string, string>): ChatTransport<UIMessage> {
  return new WorkflowChatTransport<UIMessage>({
    api: '/api/chat',
    // It posts `{messages, ...body}` as a string: no chat id, and a
    // string body goes as text/plain, which toolgate refuses on a POST.
    prepareSendMessagesRequest: ({ id, messages, trigger, messageId }) => ({
      headers: { 'content-type': 'application/json', ...headers },
      body: { id, messages, trigger, messageId, toolgate: { protocol: settings.protocol, flow: 'hold' } },
    }),
    prepareReconnectToStreamRequest: ({ api }) => ({ api, headers }),
  });
}
