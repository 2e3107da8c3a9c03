/**
 * Client-side tools this page runs itself when the server hands them over
 * (`tools.client` in the server's config). Any other client-side tool gets
 * a box where the user gives the result.
 */
export const browserTools: Record<string, () => unknown> = {
  browser_time: () => ({
    now: new Date().toISOString(),
    timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
  }),
};
