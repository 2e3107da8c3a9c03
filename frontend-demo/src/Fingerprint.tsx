import { useEffect, useRef, useState } from 'react';
import type { Fingerprint } from './api';

/** How many hex characters of the call's digest a card shows. */
export const SHORT = 12;

/** A call digest as the server writes it: SHA-256, lowercase hex. */
function digest(value: unknown): string | undefined {
  return typeof value === 'string' && /^[0-9a-f]{64}$/.test(value) ? value : undefined;
}

/**
 * The call's fingerprint (`fingerprint.call` in the API): its first
 * characters as text, the whole digest in the title, to compare with the
 * audit log or one's own computation. Nothing for a question without one.
 */
export function FingerprintLine({ fingerprint }: { fingerprint?: Fingerprint | null }) {
  const call = digest(fingerprint?.call);
  if (!call) return null;
  return (
    <p className="fingerprint" data-testid="fingerprint" title={call}>
      Fingerprint <code>{call.slice(0, SHORT)}</code>
    </p>
  );
}

/**
 * The question's fingerprint, loaded once when the card appears (the chat
 * stream does not carry it). A failed load shows nothing: the card works
 * without it.
 */
export function useFingerprint(load?: () => Promise<Fingerprint | null | undefined>): Fingerprint | undefined {
  const [fingerprint, setFingerprint] = useState<Fingerprint>();
  // The first one given: a parent's new arrow on each render is the same question.
  const loader = useRef(load);
  useEffect(() => {
    const first = loader.current;
    if (!first) return;
    let current = true;
    first().then(
      (found) => {
        if (current && found && digest(found.call)) setFingerprint(found);
      },
      () => undefined,
    );
    return () => {
      current = false;
    };
  }, []);
  return fingerprint;
}
