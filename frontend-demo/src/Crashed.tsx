import type { ReactNode } from 'react';
import { ErrorBoundary, getErrorMessage, type FallbackProps } from 'react-error-boundary';

/** The page's root: a render error shows what failed, never an empty page. */
export function Guarded({ children }: { children: ReactNode }) {
  return <ErrorBoundary FallbackComponent={Crashed}>{children}</ErrorBoundary>;
}

/**
 * What a failed page shows. The chat lives in this browser's storage, so
 * a reload goes on where it stopped.
 */
export function Crashed({ error }: FallbackProps) {
  const message = getErrorMessage(error);
  return (
    <main className="crashed" role="alert">
      <h1>The page stopped</h1>
      <p>
        Something in it failed{message ? `: ${message}` : ''}. Your chat is kept in this browser; reload to go
        on.
      </p>
      <button
        type="button"
        onClick={() => {
          window.location.reload();
        }}
      >
        Reload
      </button>
    </main>
  );
}
