/** A call's arguments, readable: a payment as amount and recipient, anything else as JSON. */
export function Args({ toolName, args }: { toolName: string; args: unknown }) {
  const payment = asPayment(toolName, args);
  if (payment) {
    return (
      <dl className="args payment">
        <dt>Amount</dt>
        <dd>
          {formatAmount(payment.amount)} {payment.currency}
        </dd>
        <dt>Recipient</dt>
        <dd>{payment.recipient}</dd>
      </dl>
    );
  }
  if (typeof args === 'object' && args !== null && Object.keys(args).length === 0) return null;
  return <pre className="args">{JSON.stringify(args, null, 2)}</pre>;
}

function asPayment(toolName: string, args: unknown) {
  if (!toolName.endsWith('process_payment') || typeof args !== 'object' || args === null) return undefined;
  const { amount, recipient, currency } = args as Record<string, unknown>;
  if (typeof amount !== 'number' || typeof recipient !== 'string') return undefined;
  return { amount, recipient, currency: typeof currency === 'string' ? currency : 'USD' };
}

function formatAmount(amount: number): string {
  return amount.toLocaleString('en', { maximumFractionDigits: 2 });
}
