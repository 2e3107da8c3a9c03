import { useState } from 'react';
import { Chat } from './Chat';
import { loadChat, loadSettings, newChat, saveSettings, type Settings } from './settings';

export function App() {
  const [settings, setSettings] = useState<Settings>(loadSettings);
  const [chat, setChat] = useState(loadChat);

  const change = (next: Partial<Settings>) => {
    const merged = { ...settings, ...next };
    saveSettings(merged);
    setSettings(merged);
    // The chat goes on over the new transport, from what it holds so far.
    setChat(loadChat());
  };

  return (
    <>
      <header className="top">
        <h1>toolgate</h1>
        <form
          className="settings"
          onSubmit={(e) => {
            e.preventDefault();
          }}
          aria-label="Connection"
        >
          <label>
            Transport
            <select
              value={settings.transport}
              onChange={(e) => {
                change({ transport: e.target.value as Settings['transport'] });
              }}
            >
              <option value="sse">SSE (/stream)</option>
              <option value="ws">WebSocket (/live)</option>
            </select>
          </label>
          <label>
            Confirmation
            <select
              value={settings.protocol}
              onChange={(e) => {
                change({ protocol: e.target.value as Settings['protocol'] });
              }}
            >
              <option value="adk">ADK (adk_request_confirmation)</option>
              <option value="ai-sdk">AI SDK approvals</option>
            </select>
          </label>
          <label>
            API key
            <input
              type="password"
              autoComplete="off"
              placeholder="only if the server has keys"
              defaultValue={settings.apiKey}
              onBlur={(e) => {
                if (e.target.value !== settings.apiKey) change({ apiKey: e.target.value });
              }}
            />
          </label>
          <button
            type="button"
            onClick={() => {
              setChat(newChat());
            }}
          >
            New chat
          </button>
        </form>
      </header>
      <Chat
        key={`${chat.id} ${settings.transport} ${settings.protocol} ${settings.apiKey}`}
        chatId={chat.id}
        initialMessages={chat.messages}
        settings={settings}
      />
    </>
  );
}
