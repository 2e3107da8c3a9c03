//! The `toolgate` binary as a user runs it.

use crate::common;
use crate::common::assert_contains;

use std::process::Command;

use common::{Binary, raw, user_says, wait};

#[tokio::test]
async fn serve_prints_the_real_address_and_answers() {
    let server = Binary::serve(&[]);
    assert!(
        server.url.starts_with("http://127.0.0.1:"),
        "{}",
        server.url
    );
    assert!(!server.url.ends_with(":0"));
    let client = reqwest::Client::new();
    let health = client
        .get(format!("{}/healthz", server.url))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(health.text().await.ok().as_deref(), Some("ok"));
    let body = client
        .post(format!("{}/stream", server.url))
        .header("content-type", "application/json")
        .body(user_says("c", "Send 50 USD to Hanako").to_string())
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .text()
        .await
        .unwrap_or_default();
    assert_contains(&body, r#""toolName":"adk_request_confirmation""#);
    assert_contains(&body, r#""hint":"Send 50 USD to Hanako?""#);
}

#[test]
fn an_unknown_config_key_is_an_error_naming_it() {
    let path = std::env::temp_dir().join(format!("toolgate-cli-{}.yaml", std::process::id()));
    std::fs::write(&path, "stream:\n  keepAliveSecs: 5\n  bufferSize: 3\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let output = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["serve", "--bind", "127.0.0.1:0", "--config"])
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_file(&path);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_contains(&stderr, "unknown field `bufferSize`");
}

/// A signing key shorter than 32 bytes stops the binary at start, with an
/// error naming the key (its place, its variable), never its value.
#[test]
fn a_short_signing_key_is_an_error_naming_it() {
    const SHORT: &str = "SHORTSECRET-31-bytes-0123456789";
    const LONG: &str = "LONGSECRET-32-bytes-012345678901";
    let webhook = "toolConfirmation:\n  publicUrl: https://toolgate.example\n  notify: [{webhook: 'https://h.example/x', secretEnv: TOOLGATE_TEST_KEY}]\n";
    #[rustfmt::skip]
    let cases: &[(&str, &str, Option<&str>)] = &[
        ("toolConfirmation:\n  signingKeys: [SHORTSECRET-31-bytes-0123456789]\n", LONG,
         Some("toolConfirmation.signingKeys[1] is too short: a signing key needs at least 32 bytes")),
        ("toolConfirmation:\n  signingKeys: [LONGSECRET-32-bytes-012345678901, 'env:TOOLGATE_TEST_KEY']\n", SHORT,
         Some("toolConfirmation.signingKeys[2] (environment variable TOOLGATE_TEST_KEY) is too short: a signing key needs at least 32 bytes")),
        (webhook, SHORT,
         Some("toolConfirmation.notify[1]: environment variable TOOLGATE_TEST_KEY (secretEnv) is too short: a signing key needs at least 32 bytes")),
        ("toolConfirmation:\n  signingKeys: ['env:TOOLGATE_TEST_KEY']\n", LONG, None),
        (webhook, LONG, None),
    ];
    for (i, (yaml, key, expected)) in cases.iter().enumerate() {
        let path =
            std::env::temp_dir().join(format!("toolgate-cli-key-{}-{i}.yaml", std::process::id()));
        std::fs::write(&path, yaml).unwrap_or_else(|e| panic!("{e}"));
        let output = Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(["serve", "--bind", "127.0.0.1:0", "--config"])
            .arg(&path)
            .env("TOOLGATE_TEST_KEY", key)
            // The cases that start serve open the default store: a file of
            // this test's own, not the user's.
            .env(
                "XDG_DATA_HOME",
                std::env::temp_dir().join(format!("toolgate-cli-data-{}", std::process::id())),
            )
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let output = ended_or_listening(output);
        let _ = std::fs::remove_file(&path);
        match expected {
            Some(error) => {
                let (ok, stderr) = output;
                assert!(!ok, "{yaml}");
                assert!(stderr.contains(error), "{yaml}: {stderr}");
                assert!(!stderr.contains("SECRET"), "a key's value in {stderr}");
            }
            None => assert!(output.0, "{yaml}: {}", output.1),
        }
    }
}

/// Waits for `child` to print that it listens (then stops it: `true`) or
/// to exit (`false`); with what it wrote to stderr.
fn ended_or_listening(mut child: std::process::Child) -> (bool, String) {
    use std::io::{BufRead, Read};
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let listening = std::io::BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .any(|line| line.starts_with("listening on "));
    if listening {
        let _ = child.kill();
    }
    let _ = child.wait();
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = pipe.read_to_string(&mut stderr);
    }
    (listening, stderr)
}

/// Whether `pid` is gone: no such process, or a zombie nobody has reaped yet.
fn gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the command name in parentheses.
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

#[cfg(target_os = "linux")]
#[test]
fn sigterm_stops_every_stdio_server_with_what_it_started() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let pidfile = |name: &str| dir.path().join(name).display().to_string();
    let fixture = env!("CARGO_BIN_EXE_toolgate-mcp-fixture");
    // `speaks` becomes the fixture server (it ends on end of input) and
    // leaves a `sleep` behind; `mute` never answers and waits for its `sleep`.
    let yaml = format!(
        "mcpServers:\n  speaks:\n    command: sh\n    args: [-c, 'sleep 1000 & echo $! > {}; echo $$ > {}; exec {fixture}']\n  mute:\n    command: sh\n    args: [-c, 'sleep 1000 & echo $! > {}; echo $$ > {}; wait']\n    connectTimeoutMs: 60000\n",
        pidfile("speaks-child"),
        pidfile("speaks"),
        pidfile("mute-child"),
        pidfile("mute"),
    );
    let mut server = Binary::serve_yaml(&yaml, &[]);
    let names = ["speaks", "speaks-child", "mute", "mute-child"];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let pids: Vec<String> = loop {
        let pids: Vec<String> = names
            .iter()
            .filter_map(|n| std::fs::read_to_string(pidfile(n)).ok())
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty())
            .collect();
        if pids.len() == names.len() {
            break pids;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never started: {pids:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // `speaks` finishes its handshake: it is then a connected server.
    wait::until_blocking("`speaks` to be available", || {
        let tools = raw::get_blocking(&server.url, "/api/tools");
        serde_json::from_str::<serde_json::Value>(&tools.body)
            .ok()
            .and_then(|tools| {
                tools["mcpServers"]
                    .as_array()?
                    .iter()
                    .find(|s| s["name"] == "speaks")
                    .map(|s| s["state"] == "available")
            })
            .unwrap_or(false)
    });
    for pid in &pids {
        assert!(!gone(pid), "{pid} is not running");
    }
    let status = Command::new("kill")
        .args(["-TERM", &server.pid().to_string()])
        .status()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success());
    assert!(
        server.exited_within(std::time::Duration::from_secs(15)),
        "toolgate did not stop on SIGTERM"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !pids.iter().all(|p| gone(p)) {
        assert!(
            std::time::Instant::now() < deadline,
            "left running: {:?}",
            names
                .iter()
                .zip(&pids)
                .filter(|(_, p)| !gone(p))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Runs `toolgate config ARGS…`: whether it succeeded, its stdout and stderr.
fn config_command(args: &[&str], envs: &[(&str, &str)]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("config")
        .args(args)
        .envs(envs.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `toolgate.schema.json` is what the types say today.
#[test]
fn the_committed_schema_is_fresh() {
    let (ok, schema, stderr) = config_command(&["schema"], &[]);
    assert!(ok, "{stderr}");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/toolgate.schema.json");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == schema,
        "toolgate.schema.json is stale; regenerate it with\n    cargo run --bin toolgate -- config schema > toolgate.schema.json"
    );
    let schema: serde_json::Value = serde_json::from_str(&schema).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(schema["title"], "toolgate.yaml");
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(
        schema["$defs"]["StreamConfig"]["properties"]["keepAliveSecs"]["default"],
        15
    );
}

/// `config check` prints the effective settings, defaults filled in and
/// secrets redacted; or one error naming the key and the value, and fails.
#[test]
fn config_check_prints_the_settings_or_names_the_bad_key() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = |name: &str, yaml: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, yaml).unwrap_or_else(|e| panic!("{e}"));
        path.display().to_string()
    };
    let good = file(
        "good.yaml",
        "stream: {maxSteps: 3}\nauth:\n  apiKeys:\n    - {principal: ops, keyEnv: TOOLGATE_TEST_API_KEY, admin: true}\ntoolConfirmation:\n  signingKeys: [SIGNINGSECRET-0123456789abcdef-0123456789]\nstore: {kind: redis, url: 'redis://user:REDISSECRET@127.0.0.1:6379/0'}\n",
    );
    let (ok, stdout, stderr) = config_command(
        &["check", &good],
        &[("TOOLGATE_TEST_API_KEY", "APIKEYSECRET")],
    );
    assert!(ok, "{stderr}");
    for line in [
        "model.provider: scripted\n",
        "stream.maxSteps: 3\n",
        "stream.keepAliveSecs: 15\n",
        "toolConfirmation.signingKeys: [[redacted]]\n",
        "auth.apiKeys: ops (admin): [redacted]\n",
        "store: redis at redis://***@127.0.0.1:6379/0, keys toolgate:*\n",
    ] {
        assert!(stdout.contains(line), "{line:?} in {stdout}");
    }
    assert!(!stdout.contains("SECRET"), "a secret in {stdout}");

    let unknown = file("key.yaml", "stream:\n  keepAliveSecs: 5\n  bufferSize: 3\n");
    let (ok, stdout, stderr) = config_command(&["check", &unknown], &[]);
    assert!(!ok && stdout.is_empty(), "{stdout}");
    assert!(
        stderr.starts_with("error: invalid config: stream: unknown field `bufferSize`"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("bufferSize").count(), 1, "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    let value = file("value.yaml", "limits: {turnsPerMinute: 0}\n");
    let (ok, _, stderr) = config_command(&["check", &value], &[]);
    assert!(!ok);
    assert_eq!(
        stderr,
        "error: invalid config: limits.turnsPerMinute must be a whole number from 1 to 4294967295 (leave it out for no limit), not 0\n"
    );

    let missing = dir.path().join("missing.yaml").display().to_string();
    let (ok, _, stderr) = config_command(&["check", &missing], &[]);
    assert!(!ok);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!("error: cannot read {missing}: ")),
        "{stderr}"
    );
}

/// Every config the repository ships loads.
#[test]
fn the_shipped_configs_load() {
    let root = env!("CARGO_MANIFEST_DIR");
    for name in [
        "tests/fixtures/config/dexto-schema.yaml",
        "tests/fixtures/config/editable.yaml",
        "tests/fixtures/config/payments.yaml",
        "tests/fixtures/browser/toolgate.yaml",
    ] {
        let (ok, _, stderr) = config_command(&["check", &format!("{root}/{name}")], &[]);
        assert!(ok, "{name}: {stderr}");
    }
}

/// `toolgate audit export` and `public-key` read the store and the audit
/// signing key, nothing else: an operator exporting the log needs no
/// secret of the server's API keys (their `keyEnv` unset here), which a
/// whole config's check would demand.
#[test]
fn audit_commands_need_only_the_store_and_the_audit_key() {
    let state = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = state.path();
    let key_file = dir.join("audit.key");
    std::fs::write(&key_file, "KioqKioqKioqKioqKioqKioqKioqKioqKioqKioqKio=")
        .unwrap_or_else(|e| panic!("{e}"));
    let config = crate::common::config_file(
        dir,
        format!(
            "auth:\n  apiKeys:\n    - {{principal: ops, keyEnv: TOOLGATE_TEST_UNSET_AUDIT_KEY}}\nstore:\n  kind: sqlite\n  path: {}\naudit:\n  signingKey: {}\n",
            dir.join("db.sqlite3").display(),
            key_file.display()
        ),
    );
    for args in [
        ["audit", "export", "--config", &config],
        ["audit", "public-key", "--config", &config],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(args)
            .env_remove("TOOLGATE_TEST_UNSET_AUDIT_KEY")
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(output.status.success(), "{args:?}: {said}");
    }
}
