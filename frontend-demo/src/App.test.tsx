import { act, cleanup, render, screen } from '@testing-library/react';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { App } from './App';

beforeEach(() => {
  localStorage.clear();
  location.hash = '';
  // The inbox's stream: open, and silent.
  const silent = () => new Response(new ReadableStream(), { headers: { 'content-type': 'text/event-stream' } });
  vi.stubGlobal('fetch', vi.fn(() => Promise.resolve(silent())));
});

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  location.hash = '';
});

/** Follows a header link as the browser does: the fragment changes. */
async function follow(name: string) {
  const link = screen.getByRole('link', { name });
  await act(async () => {
    location.hash = new URL((link as HTMLAnchorElement).href).hash;
    window.dispatchEvent(new HashChangeEvent('hashchange'));
    await Promise.resolve();
  });
}

describe('App', () => {
  it('switches between the chat and the approvals by the header links, keeping the chat', async () => {
    render(<App />);
    expect(screen.getByRole('link', { name: 'Chat' }).getAttribute('aria-current')).toBe('page');
    expect(screen.queryByRole('heading', { name: 'Approvals' })).toBeNull();

    await follow('Approvals');
    expect(screen.getByRole('heading', { name: 'Approvals' })).toBeTruthy();
    expect(screen.getByRole('link', { name: 'Approvals' }).getAttribute('aria-current')).toBe('page');
    expect(screen.getByLabelText('Message', { selector: 'input' }).closest('[hidden]')).not.toBeNull();

    await follow('Chat');
    expect(screen.queryByRole('heading', { name: 'Approvals' })).toBeNull();
    expect(screen.getByLabelText('Message', { selector: 'input' }).closest('[hidden]')).toBeNull();
  });

  it('opens on the approvals when the address says so', () => {
    location.hash = '#approvals';
    render(<App />);
    expect(screen.getByRole('heading', { name: 'Approvals' })).toBeTruthy();
  });
});
