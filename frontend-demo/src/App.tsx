import { useEffect, useState } from 'react';
import { Approvals } from './Approvals';
import { Chat } from './Chat';
import { loadChat, loadSettings, newChat, saveSettings, type Settings } from './settings';

/** The page's two views, chosen by the URL's fragment (`#approvals`), so a reload keeps it. */
type View = 'chat' | 'approvals';

function currentView(): View {
  return location.hash === '#approvals' ? 'approvals' : 'chat';
}

export function App() {
  const [settings, setSettings] = useState<Settings>(loadSettings);
  const [chat, setChat] = useState(loadChat);
  const [view, setView] = useState<View>(currentView);
  useEffect(() => {
    const follow = () => {
      setView(currentView());
    };
    window.addEventListener('hashchange', follow);
    return () => {
      window.removeEventListener('hashchange', follow);
    };
  }, []);

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
        <nav className="views" aria-label="Views">
          <a href="#chat" aria-current={view === 'chat' ? 'page' : undefined}>
            Chat
          </a>
          <a href="#approvals" aria-current={view === 'approvals' ? 'page' : undefined}>
            Approvals
          </a>
        </nav>
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
              <option value="workflow">Workflow (resumable, /api/chat)</option>
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
      {/* The chat stays mounted while hidden: a turn in flight goes on. */}
      <div hidden={view !== 'chat'}>
        <Chat
          key={`${chat.id} ${settings.transport} ${settings.protocol} ${settings.apiKey}`}
          chatId={chat.id}
          initialMessages={chat.messages}
          settings={settings}
        />
      </div>
      {view === 'approvals' && <Approvals apiKey={settings.apiKey} />}
    </>
  );
}
