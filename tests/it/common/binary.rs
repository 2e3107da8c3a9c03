//! The `toolgate` binary as a test runs it: served on a free port with its
//! state in a temporary folder, or a command line it must refuse.

use serde_json::Value;

use super::{Must, Reply, user_says, wait};

/// The binary run with `args`: it must fail; what it wrote to stderr.
pub fn refused(args: &[&str]) -> String {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .output()
        .must();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "it did not fail: {stderr}");
    stderr
}

/// `yaml` written to `toolgate.yaml` in `dir`: the file's path, for
/// `--config`.
pub fn config_file(dir: &std::path::Path, yaml: impl AsRef<str>) -> String {
    let path = dir.join("toolgate.yaml");
    std::fs::write(&path, yaml.as_ref()).must();
    path.display().to_string()
}

/// The `toolgate` binary, serving on a free port with its state in a
/// temporary SQLite file and signed confirmations; killed on drop.
pub struct Binary {
    pub url: String,
    child: std::process::Child,
    _state: Option<tempfile::TempDir>,
    /// Kept open: the server writes more lines after the first.
    pub stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl Binary {
    pub fn serve(extra: &[&str]) -> Self {
        Self::serve_yaml("", extra)
    }

    /// Like [`Binary::serve`], with more top-level config (not `store` or
    /// `toolConfirmation`).
    pub fn serve_yaml(yaml: &str, extra: &[&str]) -> Self {
        Self::serve_yaml_env(yaml, extra, &[])
    }

    /// Like [`Binary::serve_yaml`], with these environment variables set.
    pub fn serve_yaml_env(yaml: &str, extra: &[&str], env: &[(&str, &str)]) -> Self {
        let state = tempfile::tempdir().must();
        let config = state.path().join("toolgate.yaml");
        let db = state.path().join("toolgate.sqlite3");
        std::fs::write(
            &config,
            format!(
                "store:\n  path: {}\ntoolConfirmation:\n  signingKeys: [test-signing-key-of-at-least-32-bytes]\n{yaml}",
                db.display()
            ),
        )
        .must();
        let config = config.display().to_string();
        let mut binary = Self::serve_with_env(&[&["--config", &config], extra].concat(), env);
        binary._state = Some(state);
        binary
    }

    /// Serves with exactly these extra arguments (a config naming the store, say).
    pub fn serve_with(extra: &[&str]) -> Self {
        Self::serve_with_env(extra, &[])
    }

    /// Like [`Binary::serve_with`], with these environment variables set.
    pub fn serve_with_env(extra: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(["serve", "--bind", "127.0.0.1:0"])
            .args(extra)
            .env("RUST_LOG", "toolgate=warn")
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .must();
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let mut stdout = std::io::BufReader::new(stdout);
        let url = listening_on(&mut stdout);
        Self {
            url,
            child,
            _state: None,
            stdout,
        }
    }
}

/// The URL a starting binary names on its first line of stdout.
pub fn listening_on(stdout: &mut impl std::io::BufRead) -> String {
    let mut line = String::new();
    stdout.read_line(&mut line).must();
    line.trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("first line: {line:?}"))
        .to_owned()
}

/// A listener on a free loopback port, and its `http://` URL.
pub async fn loopback() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.must();
    let url = format!("http://{}", listener.local_addr().must());
    (listener, url)
}

impl Binary {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the server has exited (reaped), waiting up to `limit`.
    pub fn exited_within(&mut self, limit: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        false
    }
}

impl Binary {
    /// Sends the server `signal` (`TERM`, `INT`) with `kill`.
    pub fn signal(&self, signal: &str) {
        let sent = std::process::Command::new("kill")
            .args([format!("-{signal}"), self.pid().to_string()])
            .status()
            .unwrap_or_else(|e| panic!("kill: {e}"));
        assert!(sent.success(), "kill -{signal}: {sent}");
    }

    /// How the server exited, if it did within `limit` (polled without
    /// blocking the test's runtime).
    pub async fn exit_within(
        &mut self,
        limit: std::time::Duration,
    ) -> Option<std::process::ExitStatus> {
        let deadline = tokio::time::Instant::now() + limit;
        while tokio::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            tokio::time::sleep(wait::POLL).await;
        }
        None
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Binary {
    pub async fn chat(&self, body: &Value) -> Reply {
        self.chat_with(body, &[]).await
    }

    /// The user's `text` in `chat`, as [`Binary::chat`].
    pub async fn says(&self, chat: &str, text: &str) -> Reply {
        self.chat(&user_says(chat, text)).await
    }

    /// Like [`Binary::chat`], with these headers too; a body cut off reads
    /// as empty.
    pub async fn chat_with(&self, body: &Value, headers: &[(&str, &str)]) -> Reply {
        let mut request = reqwest::Client::new()
            .post(format!("{}/stream", self.url))
            .header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.body(body.to_string()).send().await.must();
        Reply {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            body: response.text().await.unwrap_or_default(),
        }
    }
}
