import { cleanup, fireEvent, render, screen } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Guarded } from './Crashed';

function Broken(): never {
  throw new TypeError('destroy is not a function');
}

afterEach(() => {
  cleanup();
  vi.restoreAllMocks();
});

describe('Guarded', () => {
  it('shows its children while they render', () => {
    render(
      <Guarded>
        <p>the chat</p>
      </Guarded>,
    );
    expect(screen.getByText('the chat')).toBeTruthy();
    expect(screen.queryByRole('alert')).toBeNull();
  });

  it('turns a render error into a message and a reload button, not an empty page', () => {
    // React reports the error it caught; that is expected here.
    const logged = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    const reload = vi.spyOn(window.location, 'reload').mockImplementation(() => undefined);
    render(
      <Guarded>
        <Broken />
      </Guarded>,
    );
    const alert = screen.getByRole('alert');
    expect(alert.querySelector('h1')?.textContent).toBe('The page stopped');
    expect(alert.textContent).toContain('destroy is not a function');
    expect(logged).toHaveBeenCalled();
    fireEvent.click(screen.getByRole('button', { name: 'Reload' }));
    expect(reload).toHaveBeenCalledOnce();
  });
});
