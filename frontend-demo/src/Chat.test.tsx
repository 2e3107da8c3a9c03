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
