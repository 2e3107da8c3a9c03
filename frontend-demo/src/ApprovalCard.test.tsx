import { act, cleanup, fireEvent, render, renderHook, screen, waitFor } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ApprovalCard, formatDuration, useRemaining, type Decision } from './ApprovalCard';

const payment = { amount: 50, recipient: 'Hanako', currency: 'USD' };
const schema = {
  type: 'object',
  properties: {
    amount: { type: 'number' },
    recipient: { type: 'string' },
    currency: { type: 'string' },
  },
  required: ['amount', 'recipient'],
};

function card(props: Partial<Parameters<typeof ApprovalCard>[0]> = {}) {
  const decisions: Decision[] = [];
  render(
    <ApprovalCard
      toolName="process_payment"
      args={payment}
      hint="Send 50 USD to Hanako?"
      protocol="adk"
      onDecide={(d) => {
        decisions.push(d);
      }}
      {...props}
    />,
  );
  return decisions;
}

const button = (name: string) => screen.getByRole('button', { name });

afterEach(() => {
  cleanup();
  vi.useRealTimers();
});

describe('ApprovalCard', () => {
  it('shows the tool, a payment as amount and recipient, and the hint', () => {
    card();
    expect(screen.getByRole('heading').textContent).toBe('Approve process_payment?');
    expect(screen.getByText('Send 50 USD to Hanako?')).toBeTruthy();
    expect(screen.getByText('50 USD')).toBeTruthy();
    expect(screen.getByText('Hanako')).toBeTruthy();
    expect(screen.queryByRole('timer')).toBeNull();
    expect(screen.queryByRole('button', { name: 'Edit…' })).toBeNull();
  });

  it('shows other tools as formatted JSON', () => {
    card({ toolName: 'mcp--files--delete', args: { path: '/tmp/x', recursive: true } });
    expect(document.querySelector('pre')?.textContent).toBe('{\n  "path": "/tmp/x",\n  "recursive": true\n}');
  });

  it('approves once, then waits for the server', () => {
    const decisions = card();
    fireEvent.click(button('Approve'));
    expect(decisions).toEqual([{ approved: true }]);
    expect(screen.getByRole('status').textContent).toBe('Answer sent…');
    expect(screen.queryByRole('button', { name: 'Approve' })).toBeNull();
  });

  it('remembers for this chat or for all chats when asked to', () => {
    const decisions = card();
    fireEvent.change(screen.getByLabelText('Ask again'), { target: { value: 'global' } });
    fireEvent.click(button('Approve'));
    expect(decisions).toEqual([{ approved: true, remember: 'global' }]);
  });

  it('remembers for an hour in all chats when asked to', () => {
    const decisions = card();
    fireEvent.change(screen.getByLabelText('Ask again'), { target: { value: 'hour' } });
    fireEvent.click(button('Approve'));
    expect(decisions).toEqual([{ approved: true, remember: { scope: 'window', minutes: 60 } }]);
  });

  it('denies with the reason typed, or none', () => {
    const decisions = card();
    fireEvent.click(button('Deny…'));
    fireEvent.change(screen.getByLabelText(/Reason/), { target: { value: '  too much ' } });
    fireEvent.click(button('Deny'));
    expect(decisions).toEqual([{ approved: false, reason: 'too much' }]);

    cleanup();
    const plain = card();
    fireEvent.click(button('Deny…'));
    fireEvent.click(button('Deny'));
    expect(plain).toEqual([{ approved: false }]);
  });

  it('goes back from the reason to the choice', () => {
    const decisions = card();
    fireEvent.click(button('Deny…'));
    fireEvent.click(button('Back'));
    fireEvent.click(button('Approve'));
    expect(decisions).toEqual([{ approved: true }]);
  });

  it('edits the arguments through a form built from the schema, typed', () => {
    const decisions = card({ details: { editable: true, parameters: schema } });
    fireEvent.click(button('Edit…'));
    fireEvent.change(screen.getByLabelText('amount'), { target: { value: '25.5' } });
    fireEvent.change(screen.getByLabelText('recipient'), { target: { value: 'Taro' } });
    fireEvent.click(button('Approve with these arguments'));
    expect(decisions).toEqual([
      { approved: true, editedArgs: { amount: 25.5, recipient: 'Taro', currency: 'USD' } },
    ]);
  });

  it('refuses an edit that is not a number, and says why', () => {
    const decisions = card({ details: { editable: true, parameters: schema } });
    fireEvent.click(button('Edit…'));
    fireEvent.change(screen.getByLabelText('amount'), { target: { value: '' } });
    fireEvent.click(button('Approve with these arguments'));
    expect(decisions).toEqual([]);
    expect(screen.getByRole('alert').textContent).toBe('amount must be a number');
  });

  it('edits as JSON when the tool has no schema', () => {
    const decisions = card({ toolName: 'other', args: { a: 1 }, details: { editable: true } });
    fireEvent.click(button('Edit…'));
    fireEvent.change(screen.getByLabelText('Arguments (JSON)'), { target: { value: '{"a": 2}' } });
    fireEvent.click(button('Approve with these arguments'));
    expect(decisions).toEqual([{ approved: true, editedArgs: { a: 2 } }]);
  });

  it('counts a deadline that arrives after mount from when it arrives', () => {
    vi.useFakeTimers();
    const { result, rerender } = renderHook(({ deadline }: { deadline?: number }) => useRemaining(deadline), {
      initialProps: {},
    });
    expect(result.current).toBeUndefined();
    vi.advanceTimersByTime(5_000);
    rerender({ deadline: Date.now() + 300_000 });
    expect(result.current).toBe(300_000);
  });

  it('counts down to the deadline, then refuses to approve but still denies', () => {
    vi.useFakeTimers();
    const decisions = card({ details: { editable: true, deadline: Date.now() + 3_000 } });
    expect(screen.getByRole('timer').textContent).toBe('Answer within 0:03');
    act(() => {
      vi.advanceTimersByTime(1_000);
    });
    expect(screen.getByRole('timer').textContent).toBe('Answer within 0:02');
    act(() => {
      vi.advanceTimersByTime(2_000);
    });
    expect(screen.getByRole('timer').textContent).toMatch(/^Expired/);
    expect((button('Approve') as HTMLButtonElement).disabled).toBe(true);
    expect((button('Edit…') as HTMLButtonElement).disabled).toBe(true);
    fireEvent.click(button('Deny…'));
    fireEvent.click(button('Deny'));
    expect(decisions).toEqual([{ approved: false }]);
  });

  it('offers neither remember nor edits for a native AI SDK approval', () => {
    const decisions = card({ protocol: 'ai-sdk', details: { editable: true, hint: 'From the server?' } });
    expect(screen.queryByLabelText('Ask again')).toBeNull();
    expect(screen.queryByRole('button', { name: 'Edit…' })).toBeNull();
    fireEvent.click(button('Approve'));
    expect(decisions).toEqual([{ approved: true }]);
  });

  it('takes the hint from the server when the stream has none', () => {
    card({ hint: undefined, protocol: 'ai-sdk', details: { editable: false, hint: 'Pay Hanako 50 USD?' } });
    expect(screen.getByText('Pay Hanako 50 USD?')).toBeTruthy();
  });
});

describe('ApprovalCard, when someone else must approve', () => {
  it('says who it waits for instead of an Approve button; the user may still deny', () => {
    const decisions = card({ details: { editable: true, waitingFor: 'role:finance' } });
    expect(screen.getByRole('note').textContent).toBe('Waiting for approval by role:finance');
    expect(screen.queryByRole('button', { name: 'Approve' })).toBeNull();
    expect(screen.queryByRole('button', { name: 'Edit…' })).toBeNull();
    expect(screen.queryByLabelText('Ask again')).toBeNull();
    fireEvent.click(button('Deny…'));
    fireEvent.change(screen.getByLabelText(/Reason/), { target: { value: 'typo' } });
    fireEvent.click(button('Deny'));
    expect(decisions).toEqual([{ approved: false, reason: 'typo' }]);
  });
});

describe('ApprovalCard, when the server no longer has the question', () => {
  it('says so and refuses to approve, but a denial can still be sent', () => {
    const decisions = card({ details: { editable: true, closed: true } });
    expect(screen.getByText(/No longer open on the server/)).toBeTruthy();
    expect(screen.queryByRole('timer')).toBeNull();
    expect((button('Approve') as HTMLButtonElement).disabled).toBe(true);
    fireEvent.click(button('Deny…'));
    fireEvent.click(button('Deny'));
    expect(decisions).toEqual([{ approved: false }]);
  });

  it('says when the details could not be read, and still works', () => {
    const decisions = card({ details: { editable: false, problem: '/api/confirmations: 503' } });
    expect(screen.getByText('Cannot read the deadline: /api/confirmations: 503')).toBeTruthy();
    fireEvent.click(button('Approve'));
    expect(decisions).toEqual([{ approved: true }]);
  });
});

describe('ApprovalCard, its fingerprint', () => {
  const call = 'a3f1c09b7e524d6f8a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5';
  const fingerprint = { definition: 'd'.repeat(64), call };

  it('shows the call digest, short, with the whole in the title, loaded once', async () => {
    const load = vi.fn(() => Promise.resolve(fingerprint));
    const decisions: Decision[] = [];
    const props = {
      toolName: 'process_payment',
      args: payment,
      protocol: 'adk' as const,
      onDecide: (d: Decision) => {
        decisions.push(d);
      },
    };
    const { rerender } = render(<ApprovalCard {...props} onFingerprint={load} />);
    expect(screen.queryByTestId('fingerprint')).toBeNull();
    const shown = await screen.findByTestId('fingerprint');
    expect(shown.textContent).toBe('Fingerprint a3f1c09b7e52');
    expect(shown.title).toBe(call);
    // A parent's new arrow on a new render is the same question: no second fetch.
    const details = { editable: false, deadline: Date.now() + 60_000 };
    rerender(<ApprovalCard {...props} details={details} onFingerprint={() => load()} />);
    fireEvent.click(button('Approve'));
    expect(decisions).toEqual([{ approved: true }]);
    expect(load).toHaveBeenCalledOnce();
    expect(screen.getByTestId('fingerprint').textContent).toBe('Fingerprint a3f1c09b7e52');
  });

  it('shows nothing when the fetch fails, and the card works as before', async () => {
    const load = vi.fn(() => Promise.reject(new Error('/api/confirmations/adk-1: 503')));
    const decisions = card({ onFingerprint: load });
    await waitFor(() => {
      expect(load).toHaveBeenCalledOnce();
    });
    await act(async () => {
      await Promise.resolve();
    });
    expect(screen.queryByTestId('fingerprint')).toBeNull();
    expect(screen.queryByRole('alert')).toBeNull();
    fireEvent.click(button('Approve'));
    expect(decisions).toEqual([{ approved: true }]);
  });

  it('shows nothing for a question without one, or a value that is not a digest', async () => {
    for (const answer of [null, undefined, { definition: 'x', call: '<b>not hex</b>' }]) {
      const load = vi.fn(() => Promise.resolve(answer));
      card({ onFingerprint: load });
      await waitFor(() => {
        expect(load).toHaveBeenCalledOnce();
      });
      await act(async () => {
        await Promise.resolve();
      });
      expect(screen.queryByTestId('fingerprint')).toBeNull();
      cleanup();
    }
  });
});

describe('formatDuration', () => {
  it('shows minutes and seconds, or hours', () => {
    expect(formatDuration(59_001)).toBe('1:00');
    expect(formatDuration(125_000)).toBe('2:05');
    expect(formatDuration(86_400_000)).toBe('24 h 0 min');
  });
});
