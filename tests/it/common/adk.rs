//! A real `adk api_server` for the tests in front of an ADK agent: the
//! agents of `tests/fixtures/adk/agents/` on their deterministic model,
//! google-adk at `TOOLGATE_TEST_ADK` (scripts/test installs it).

use super::Must;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// One `adk api_server` on a free port, its sessions in a temporary
/// SQLite file; killed on drop.
pub struct Adk {
    pub url: String,
    child: Child,
    _state: tempfile::TempDir,
}

impl Adk {
    pub fn start() -> Self {
        let state = tempfile::tempdir().must();
        Self::start_in(state, 0)
    }

    /// An ADK server whose sessions live in `state`, on `port` (0: any).
    fn start_in(state: tempfile::TempDir, port: u16) -> Self {
        let adk = std::env::var("TOOLGATE_TEST_ADK")
            .ok()
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| {
                panic!("no ADK: set TOOLGATE_TEST_ADK to the `adk` command (scripts/test installs google-adk), or leave the `adk` feature off")
            });
        let agents = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/adk/agents");
        let sessions = format!("sqlite:///{}", state.path().join("sessions.db").display());
        let mut child = Command::new(&adk)
            .args([
                "api_server",
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .args(["--session_service_uri", &sessions])
            .arg(&agents)
            .env("PYTHONPATH", &agents)
            .env("TOOLGATE_ADK_MARKS", state.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {adk}: {e}"));
        let stderr = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
        let mut lines = BufReader::new(stderr).lines();
        let url = loop {
            let line = match lines.next() {
                Some(Ok(line)) => line,
                _ => panic!("adk api_server ended before it listened"),
            };
            if let Some(at) = line.find("Uvicorn running on ") {
                let rest = &line[at + "Uvicorn running on ".len()..];
                break rest
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_owned();
            }
        };
        // Its log goes on; nobody reads it, so it must not fill the pipe.
        std::thread::spawn(move || for _ in lines {});
        Self {
            url,
            child,
            _state: state,
        }
    }

    /// How the model's slow answer ended (`finished`, `cancelled`), once it did.
    pub fn slow_answer(&self) -> Option<String> {
        std::fs::read_to_string(self._state.path().join("slowly")).ok()
    }

    /// The events of `user`'s session for chat `chat`.
    pub async fn session_events(&self, user: &str, chat: &str) -> Vec<Value> {
        let url = format!("{}/apps/payments/users/{user}/sessions/{chat}", self.url);
        let body = reqwest::get(url).await.must().text().await.must();
        let session: Value = super::from_json(&body);
        session["events"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Adk {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Adk {
    /// Stops this server and starts another on the same port and sessions.
    pub fn restart(mut self) -> Self {
        let port: u16 = self
            .url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {}", self.url));
        let _ = self.child.kill();
        let _ = self.child.wait();
        let state = std::mem::replace(&mut self._state, tempfile::tempdir().must());
        Self::start_in(state, port)
    }
}
