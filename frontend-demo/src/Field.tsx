import type { ChangeEvent } from 'react';

/** A labelled text box: one line, or `rows` lines. */
export function TextField({
  label,
  value,
  onChange,
  rows,
  autoFocus,
}: {
  label: string;
  value: string;
  onChange: (value: string) => void;
  rows?: number;
  autoFocus?: boolean;
}) {
  const change = (e: ChangeEvent<HTMLInputElement | HTMLTextAreaElement>) => {
    onChange(e.target.value);
  };
  return (
    <label>
      {label}
      {rows === undefined ? (
        <input value={value} onChange={change} autoFocus={autoFocus} />
      ) : (
        <textarea rows={rows} value={value} onChange={change} />
      )}
    </label>
  );
}

/** What went wrong, said to the user; nothing while `text` is empty. */
export function Alert({ text }: { text: string | undefined }) {
  return text ? (
    <p className="error" role="alert">
      {text}
    </p>
  ) : null;
}
