import { act, cleanup, fireEvent, render, screen, waitFor, within } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { InboxItem } from './api';
import { Approvals, decisionOf } from './Approvals';

function question(over: Partial<InboxItem> = {}): InboxItem {
  return {
    id: 'adk-3',
    chatId: 'chat-clerk',
    protocol: 'adk',
    originalFunctionCall: { id: 'call-1', name: 'process_payment', args: { amount: 50, recipient: 'Hanako', currency: 'USD' } },
    hint: 'Send 50 USD to Hanako? (waiting for approval by role:finance)',
    expiresAtMs: 0,
    expiresInMs: 90_000,
    editable: true,
    approvers: ['role:finance'],
    requireDistinctApprover: true,
    mayApprove: true,
    principal: 'clerk',
    tool: 'internal--process_payment',
    ...over,
  };
}

/** The server: an inbox stream the test writes to, and the decisions posted. */
function server(answers: Record<string, { status: number; body: unknown }> = {}) {
  let push: (event: unknown) => void = () => undefined;
  const posted: { path: string; body: unknown; headers: Record<string, string> }[] = [];
  const streams: Record<string, string>[] = [];
  const fetched = vi.fn((input: RequestInfo | URL, init?: RequestInit) => {
    const path = String(input);
    if (path.startsWith('/api/confirmations/events')) {
      streams.push((init?.headers ?? {}) as Record<string, string>);
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          push = (event) => {
            controller.enqueue(new TextEncoder().encode(`: keep-alive\n\ndata: ${JSON.stringify(event)}\n\n`));
          };
        },
      });
      return Promise.resolve(new Response(body, { headers: { 'content-type': 'text/event-stream' } }));
    }
    posted.push({
      path,
      body: JSON.parse(String(init?.body)) as unknown,
      headers: (init?.headers ?? {}) as Record<string, string>,
    });
    const answer = answers[path] ?? { status: 200, body: { id: 'adk-3', outcome: { kind: 'output' } } };
    return Promise.resolve(new Response(JSON.stringify(answer.body), { status: answer.status }));
  });
  vi.stubGlobal('fetch', fetched);
  return {
    posted,
    streams,
    /** Sends a listing, as the server does after each change. */
    list: async (...items: InboxItem[]) => {
      await act(async () => {
        push({ confirmations: items });
        await new Promise((resolve) => setTimeout(resolve, 0));
      });
    },
  };
}

/** The inbox, with no API key, once the server listed `listed`. */
async function shown(listed: InboxItem, answers?: Parameters<typeof server>[0]) {
  const inbox = server(answers);
  render(<Approvals apiKey="" />);
  await inbox.list(listed);
  return inbox;
}

const item = () => screen.getByTestId('inbox-item');
const button = (name: string) => within(item()).getByRole('button', { name });

beforeEach(() => {
  localStorage.clear();
});

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  vi.useRealTimers();
});

describe('Approvals', () => {
  it('shows each question live: who asked, the tool, the arguments, the hint and the time left', async () => {
    const inbox = server();
    render(<Approvals apiKey="" />);
    await inbox.list();
    expect(screen.getByText('Nothing waits for you.')).toBeTruthy();
    expect(screen.getByRole('status').textContent).toMatch(/^Live/);

    await inbox.list(question());
    expect(within(item()).getByRole('heading').textContent).toBe('process_payment for clerk');
    expect(within(item()).getByText(/internal--process_payment/)).toBeTruthy();
    expect(within(item()).getByText('chat-clerk')).toBeTruthy();
    expect(within(item()).getByText('50 USD')).toBeTruthy();
    expect(within(item()).getByText('Hanako')).toBeTruthy();
    expect(within(item()).getByText(/waiting for approval by role:finance/)).toBeTruthy();
    expect(within(item()).getByRole('timer').textContent).toBe('Decide within 1:30');

    await inbox.list(question(), question({ id: 'adk-9', principal: 'bob' }));
    expect(screen.getAllByTestId('inbox-item')).toHaveLength(2);
    await inbox.list(question({ id: 'adk-9', principal: 'bob' }));
    expect(within(item()).getByRole('heading').textContent).toBe('process_payment for bob');
  });

  it("shows each question's call fingerprint, short, with the whole in the title", async () => {
    const call = '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';
    const inbox = server();
    render(<Approvals apiKey="" />);
    await inbox.list(question({ fingerprint: { definition: 'e'.repeat(64), call } }));
    const shown = within(item()).getByTestId('fingerprint');
    expect(shown.textContent).toBe('Fingerprint 0123456789ab');
    expect(shown.title).toBe(call);
    // A question from before toolgate kept fingerprints: no line.
    await inbox.list(question({ fingerprint: null }));
    expect(within(item()).queryByTestId('fingerprint')).toBeNull();
  });

  it('sends the API key with the stream and the decision', async () => {
    const inbox = server();
    render(<Approvals apiKey="k1" />);
    await inbox.list(question());
    fireEvent.click(button('Approve'));
    await waitFor(() => {
      expect(inbox.posted).toHaveLength(1);
    });
    expect(inbox.streams[0]?.authorization).toBe('Bearer k1');
    expect(inbox.posted[0]?.headers.authorization).toBe('Bearer k1');
  });

  it('approves with a reason and a payload, then says so', async () => {
    const inbox = await shown(question());
    fireEvent.change(within(item()).getByLabelText(/Reason/), { target: { value: ' checked ' } });
    fireEvent.change(within(item()).getByLabelText(/Payload/), { target: { value: '{"ticket": 7}' } });
    fireEvent.click(button('Approve'));
    await within(item()).findByText('Approved.');
    expect(inbox.posted).toEqual([
      {
        path: '/api/confirmations/adk-3',
        body: { approved: true, reason: 'checked', payload: { ticket: 7 } },
        headers: { 'content-type': 'application/json' },
      },
    ]);
    expect((button('Deny') as HTMLButtonElement).disabled).toBe(true);
  });

  it('denies with the reason typed', async () => {
    const inbox = await shown(question());
    fireEvent.change(within(item()).getByLabelText(/Reason/), { target: { value: 'wrong person' } });
    fireEvent.click(button('Deny'));
    await within(item()).findByText('Denied.');
    expect(inbox.posted.map((p) => p.body)).toEqual([{ approved: false, reason: 'wrong person' }]);
  });

  it('approves with edited arguments where the tool allows edits', async () => {
    const inbox = await shown(question());
    fireEvent.click(within(item()).getByLabelText('Edit the arguments'));
    fireEvent.change(within(item()).getByLabelText('Arguments (JSON)'), {
      target: { value: '{"amount": 25, "recipient": "Hanako", "currency": "USD"}' },
    });
    fireEvent.click(button('Approve'));
    await within(item()).findByText('Approved.');
    expect(inbox.posted.map((p) => p.body)).toEqual([
      { approved: true, editedArgs: { amount: 25, recipient: 'Hanako', currency: 'USD' } },
    ]);
  });

  it('offers no edit where the tool allows none', async () => {
    await shown(question({ editable: false }));
    expect(within(item()).queryByLabelText('Edit the arguments')).toBeNull();
  });

  it("shows the server's words when it refuses a decision, and lets the user try again", async () => {
    await shown(question(), {
      '/api/confirmations/adk-3': { status: 403, body: { error: 'only role:finance may approve this call' } },
    });
    fireEvent.click(button('Approve'));
    expect((await within(item()).findByRole('alert')).textContent).toBe('only role:finance may approve this call');
    expect((button('Approve') as HTMLButtonElement).disabled).toBe(false);
  });

  it('refuses a payload that is not JSON before sending anything', async () => {
    const inbox = await shown(question());
    fireEvent.change(within(item()).getByLabelText(/Payload/), { target: { value: '{oops' } });
    fireEvent.click(button('Approve'));
    expect(within(item()).getByRole('alert').textContent).toBe('the payload is not JSON');
    expect(inbox.posted).toEqual([]);
  });

  it("the asker's own question waits for the approvers: deny only", async () => {
    const inbox = await shown(question({ mayApprove: false }));
    expect(within(item()).getByRole('note').textContent).toBe('Waiting for approval by role:finance');
    expect(within(item()).queryByRole('button', { name: 'Approve' })).toBeNull();
    expect(within(item()).queryByLabelText(/Payload/)).toBeNull();
    fireEvent.click(button('Deny'));
    await within(item()).findByText('Denied.');
    expect(inbox.posted.map((p) => p.body)).toEqual([{ approved: false }]);
  });

  it('counts down, and refuses to approve once expired', async () => {
    vi.useFakeTimers({ toFake: ['Date', 'setInterval', 'clearInterval'] });
    await shown(question({ expiresInMs: 2_000 }));
    expect(within(item()).getByRole('timer').textContent).toBe('Decide within 0:02');
    act(() => {
      vi.advanceTimersByTime(2_000);
    });
    expect(within(item()).getByRole('timer').textContent).toMatch(/^Expired/);
    expect((button('Approve') as HTMLButtonElement).disabled).toBe(true);
  });
});

describe('decisionOf', () => {
  it('keeps only what was given, and edits and payloads only for an approval', () => {
    expect(decisionOf(true, '  ', undefined, '')).toEqual({ approved: true });
    expect(decisionOf(false, 'no', '{"a": 1}', '1')).toEqual({ approved: false, reason: 'no' });
    expect(decisionOf(true, '', '{"a": 1}', '"x"')).toEqual({ approved: true, editedArgs: { a: 1 }, payload: 'x' });
    expect(() => decisionOf(true, '', '[1]', '')).toThrow('the arguments must be a JSON object');
    expect(() => decisionOf(true, '', '{', '')).toThrow('the arguments are not JSON');
  });
});
