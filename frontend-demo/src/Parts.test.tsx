import { cleanup, render, screen, within } from '@testing-library/react';
import type { UIMessage } from 'ai';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Ended } from './api';
import { LaterOutcome, Message, type Answerers } from './Parts';

afterEach(() => {
  cleanup();
});

describe('LaterOutcome', () => {
  it.each([
    [{ kind: 'output', output: { status: 'completed' } }, 'process_payment was approved later and ran.'],
    [{ kind: 'output', output: 'ok', responded: true }, 'Answered later in place of process_payment.'],
    [{ kind: 'denied', reason: 'too much' }, 'process_payment was denied later: too much.'],
    [{ kind: 'expired' }, 'The request to run process_payment expired without an answer.'],
    [{ kind: 'cancelled' }, 'The request to run process_payment was cancelled by your new message.'],
  ])('says how %o ended', (outcome, said) => {
    render(<LaterOutcome data={{ toolName: 'process_payment', outcome }} />);
    expect(screen.getByTestId('later-outcome').textContent).toContain(said);
  });
});

describe('Message, an open question', () => {
  const payment = { amount: 50, recipient: 'Hanako', currency: 'USD' };
  const digest = (c: string) => c.repeat(64);

  it("reads each card's fingerprint by its question's id: an ADK call's id, a native approval's id", async () => {
    const message = {
      id: 'm1',
      role: 'assistant',
      parts: [
        { type: 'step-start' },
        {
          type: 'tool-adk_request_confirmation',
          toolCallId: 'adk-1',
          state: 'input-available',
          input: { originalFunctionCall: { id: 'call-1', name: 'process_payment', args: payment } },
        },
        {
          type: 'tool-process_payment',
          toolCallId: 'call-2',
          state: 'approval-requested',
          input: payment,
          approval: { id: 'approval-2' },
        },
      ],
    } as UIMessage;
    const lookup = vi.fn(
      (id: string): Promise<Ended> =>
        id === 'adk-1'
          ? Promise.resolve({ status: 'open', fingerprint: { definition: digest('d'), call: digest('a') } })
          : Promise.reject(new Error(`/api/confirmations/${id}: 404`)),
    );
    const answerers: Answerers = {
      pending: new Set(['adk-1', 'approval-2']),
      details: new Map(),
      detailsLoaded: false,
      answerAdk: () => undefined,
      answerNative: () => undefined,
      answerClient: () => undefined,
      lookup,
    };
    render(<Message message={message} answerers={answerers} />);
    await screen.findByTestId('fingerprint');
    expect(lookup.mock.calls.map(([id]) => id).sort()).toEqual(['adk-1', 'approval-2']);
    // The ADK card shows its own; the native one, whose read failed, none.
    const [adk, native] = screen.getAllByTestId('approval-card');
    expect(within(adk as HTMLElement).getByTestId('fingerprint').textContent).toBe(`Fingerprint ${'a'.repeat(12)}`);
    expect(within(native as HTMLElement).queryByTestId('fingerprint')).toBeNull();
    expect(screen.getAllByTestId('fingerprint')).toHaveLength(1);
  });
});
