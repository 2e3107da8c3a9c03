// How a question toolgate asked ended, in words: for a card whose question
// was decided elsewhere and for a later message's data-toolgate-outcome part.

/** What toolgate says of a question the chat moved on from (`data-toolgate-outcome`). */
export type Later = {
  toolName?: string;
  outcome?: { kind?: string; output?: unknown; message?: string; reason?: string | null; responded?: boolean };
};

/** How a question about `tool` ended, in words. */
export function saidOf(tool: string, outcome: NonNullable<Later['outcome']>): string {
  let said: string;
  switch (outcome.kind) {
    case 'output':
      said = outcome.responded ? `Answered later in place of ${tool}.` : `${tool} was approved later and ran.`;
      break;
    case 'error':
      said = `${tool} was approved later and failed: ${outcome.message ?? ''}`;
      break;
    case 'denied':
      said = `${tool} was denied later${outcome.reason ? `: ${outcome.reason}` : ''}.`;
      break;
    case 'expired':
      said = `The request to run ${tool} expired without an answer.`;
      break;
    case 'cancelled':
      said = `The request to run ${tool} was cancelled by your new message.`;
      break;
    default:
      said = `${tool} was decided later.`;
  }
  return said;
}
