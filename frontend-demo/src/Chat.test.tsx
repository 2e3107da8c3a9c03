import { cleanup, fireEvent, render, screen } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Chat } from './Chat';
import { defaults } from './settings';

/** A turn as toolgate streams it: one short text answer. */
function answer(text: string): string {
  const chunks = [
    { type: 'start', messageId: 'msg-1' },
    { type: 'start-step' },
    { type: 'text-start', id: 'text-1' },
    { type: 'text-delta', id: 'text-1', delta: text },
    { type: 'text-end', id: 'text-1' },
    { type: 'finish-step' },
    { type: 'finish', finishReason: 'stop' },
  ];
  return [...chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`), 'data: [DONE]\n\n'].join('');
}

/** A response whose body is sent when the test says so. */
function held(): { response: Response; send: (body: string) => void } {
  let send: (body: string) => void = () => undefined;
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      send = (body) => {
        controller.enqueue(new TextEncoder().encode(body));
        controller.close();
      };
    },
  });
  const response = new Response(stream, {
    headers: { 'content-type': 'text/event-stream', 'x-vercel-ai-ui-message-stream': 'v1' },
  });
  return { response, send };
}

beforeEach(() => {
  localStorage.clear();
});

afterEach(() => {
  cleanup();
  vi.restoreAllMocks();
  vi.unstubAllGlobals();
});

describe('Chat', () => {
  it('stays mounted where scrollIntoView returns a Promise (Chromium 156)', async () => {
    const scrolled = vi.fn(() => Promise.resolve());
    vi.spyOn(Element.prototype, 'scrollIntoView').mockImplementation(
      scrolled as unknown as Element['scrollIntoView'],
    );
    const turn = held();
    const fetched = vi.fn((..._: Parameters<typeof fetch>) => Promise.resolve(turn.response));
    vi.stubGlobal('fetch', fetched);
    const errors = vi.spyOn(console, 'error');

    render(<Chat chatId="chat-1" initialMessages={[]} settings={defaults} />);
    fireEvent.change(screen.getByLabelText('Message'), { target: { value: 'Hi' } });
    fireEvent.click(screen.getByRole('button', { name: 'Send' }));

    // Each new message re-runs the scroll effect, and cleans up the last
    // run: the question renders before the answer is sent, so the effect
    // runs for each however fast the answer comes.
    expect(await screen.findByText('Hi')).toBeTruthy();
    await vi.waitFor(() => {
      expect(fetched).toHaveBeenCalledOnce();
    });
    const before = scrolled.mock.calls.length;
    turn.send(answer('Hello from toolgate'));
    expect(await screen.findByText('Hello from toolgate')).toBeTruthy();
    expect(screen.getByLabelText('Message')).toBeTruthy();
    expect(fetched).toHaveBeenCalledOnce();
    expect(before).toBeGreaterThan(0);
    expect(scrolled.mock.calls.length).toBeGreaterThan(before);
    expect(errors).not.toHaveBeenCalled();
  });
});

/** The SSE text of `chunks`. */
const sse = (chunks: object[]) => chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join('');

const QUESTION = [
  { type: 'start', messageId: 'msg-1' },
  { type: 'start-step' },
  {
    type: 'tool-input-available',
    toolCallId: 'adk-1',
    toolName: 'adk_request_confirmation',
    input: {
      originalFunctionCall: { id: 'call-1', name: 'process_payment', args: { amount: 50, recipient: 'Hanako' } },
      toolConfirmation: { hint: 'Send 50 USD to Hanako?', confirmed: false },
    },
  },
];

/**
 * The workflow mode's server: POST /api/chat holds the turn after its
 * question until `goOn`; the card's details; a decision answered with
 * `decided`.
 */
function heldServer(decided: () => Response) {
  let push: (text: string) => void = () => undefined;
  const turn = new ReadableStream<Uint8Array>({
    start(controller) {
      push = (text) => {
        controller.enqueue(new TextEncoder().encode(text));
      };
    },
  });
  const fetched = vi.fn((input: RequestInfo | URL, init?: RequestInit) => {
    const url = new URL(String(input), 'http://localhost');
    const json = (value: unknown, status = 200) =>
      Promise.resolve(new Response(JSON.stringify(value), { status, headers: { 'content-type': 'application/json' } }));
    if (init?.method === 'POST' && url.pathname === '/api/chat') {
      push(sse(QUESTION));
      return Promise.resolve(
        new Response(turn, { headers: { 'content-type': 'text/event-stream', 'x-workflow-run-id': 'chat-1' } }),
      );
    }
    if (init?.method === 'POST' && url.pathname === '/api/confirmations/adk-1') return Promise.resolve(decided());
    if (url.pathname === '/api/confirmations') {
      return json([
        {
          id: 'adk-1',
          chatId: 'chat-1',
          protocol: 'adk',
          originalFunctionCall: QUESTION[2].input,
          hint: 'Send 50 USD to Hanako?',
          expiresAtMs: Date.now() + 60_000,
          expiresInMs: 60_000,
          editable: false,
          approvers: [],
          requireDistinctApprover: false,
          mayApprove: true,
        },
      ]);
    }
    if (url.pathname === '/api/tools') return json({ tools: [] });
    return json({ error: `unexpected ${init?.method ?? 'GET'} ${url.pathname}` }, 404);
  });
  const goOn = () => {
    push(
      sse([
        { type: 'tool-output-available', toolCallId: 'adk-1', output: { confirmed: true } },
        { type: 'finish-step' },
        { type: 'finish', finishReason: 'stop' },
      ]) + 'data: [DONE]\n\n',
    );
  };
  return { fetched, goOn };
}

const workflow = { ...defaults, transport: 'workflow' as const };

async function askAndApprove() {
  render(<Chat chatId="chat-1" initialMessages={[]} settings={workflow} />);
  fireEvent.change(screen.getByLabelText('Message'), { target: { value: 'Send 50 USD to Hanako' } });
  fireEvent.click(screen.getByRole('button', { name: 'Send' }));
  const approve = await screen.findByRole('button', { name: 'Approve' });
  fireEvent.click(approve);
}

describe('Chat in the workflow mode', () => {
  it('decides a held question through the API, and the turn goes on in its stream', async () => {
    const server = heldServer(() => new Response(JSON.stringify({ id: 'adk-1', outcome: { kind: 'output' } })));
    vi.stubGlobal('fetch', server.fetched);
    await askAndApprove();
    const posted = (path: string) =>
      server.fetched.mock.calls.filter(([url, init]) => init?.method === 'POST' && String(url) === path);
    await vi.waitFor(() => {
      expect(posted('/api/confirmations/adk-1').map(([, init]) => init?.body)).toEqual([
        JSON.stringify({ approved: true }),
      ]);
    });
    server.goOn();
    expect(await screen.findByText('You approved process_payment.')).toBeTruthy();
    // One turn: the answer went through the API, not in a new request.
    expect(posted('/api/chat')).toHaveLength(1);
  });

  it("shows the server's words when it refuses the decision", async () => {
    const server = heldServer(() => new Response(JSON.stringify({ error: 'already decided' }), { status: 409 }));
    vi.stubGlobal('fetch', server.fetched);
    await askAndApprove();
    expect((await screen.findByRole('alert')).textContent).toContain('Your answer was not taken: already decided');
  });
});
