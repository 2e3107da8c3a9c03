import { cleanup, render, screen } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import { LaterOutcome } from './Parts';

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
