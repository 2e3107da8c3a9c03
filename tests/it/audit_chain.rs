//! The audit log proves itself: a server's real log exported by `toolgate
//! audit export`, verified offline by `toolgate audit verify` with the
//! public key `toolgate audit public-key` prints, and every tampering
//! (one event deleted, one byte changed, two events swapped, a field
//! added beside the signed event, the wrong key) named by the line it
//! breaks at.

use crate::common;
use crate::common::{Must, assert_contains};

use std::path::Path;
use std::process::{Command, Output};

use base64::Engine;
use common::{Binary, approval};

fn toolgate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .env("RUST_LOG", "toolgate=warn")
        .output()
        .must()
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `verify` of `lines` written to `dir/name`: whether it passed, and what it said.
fn verify(dir: &Path, name: &str, lines: &[String], key: &str) -> (bool, String) {
    let file = dir.join(name);
    std::fs::write(&file, lines.join("\n") + "\n").must();
    let out = toolgate(&[
        "audit",
        "verify",
        &file.display().to_string(),
        "--public-key",
        key,
    ]);
    (out.status.success(), text(&out))
}

#[tokio::test]
async fn a_servers_log_exports_verifies_and_names_each_tampering() {
    let state = tempfile::tempdir().must();
    let dir = state.path();
    let seed = base64::engine::general_purpose::STANDARD.encode([42u8; 32]);
    let key_file = dir.join("audit.key");
    std::fs::write(&key_file, seed).must();
    let config = common::config_file(
        dir,
        format!(
            "store:\n  kind: sqlite\n  path: {}\naudit:\n  signingKey: {}\n",
            dir.join("db.sqlite3").display(),
            key_file.display()
        ),
    );
    let server = Binary::serve_with(&["--config", &config]);
    for chat in ["chat-a", "chat-b"] {
        let first = server.says(chat, "Send 50 USD to Hanako").await;
        server.chat(&approval(chat, &first)).await;
    }

    let public = dir.join("audit.pub");
    let out = toolgate(&["audit", "public-key", "--config", &config]);
    assert!(out.status.success(), "{}", text(&out));
    assert_contains(&String::from_utf8_lossy(&out.stdout), "BEGIN PUBLIC KEY");
    std::fs::write(&public, &out.stdout).must();
    let public = public.display().to_string();

    // Exported while the server runs.
    let export = dir.join("audit.jsonl");
    let out = toolgate(&[
        "audit",
        "export",
        "--config",
        &config,
        "--output",
        &export.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert_contains(&text(&out), "all signed");
    let lines: Vec<String> = std::fs::read_to_string(&export)
        .must()
        .lines()
        .map(str::to_owned)
        .collect();
    assert!(lines.len() >= 4, "asked and approved, twice: {lines:?}");
    assert_contains(&lines[0], r#""seq":1,"#);

    let (ok, said) = verify(dir, "intact.jsonl", &lines, &public);
    assert!(ok, "{said}");
    assert_contains(&said, &format!("intact: {} events", lines.len()));

    let mut deleted = lines.clone();
    deleted.remove(1);
    let (ok, said) = verify(dir, "deleted.jsonl", &deleted, &public);
    assert!(!ok);
    assert_contains(&said, "broken at line 2 (seq 3): seq 2 is missing");

    let mut altered = lines.clone();
    altered[2] = altered[2].replacen("\"anonymous\"", "\"anonymouz\"", 1);
    assert_ne!(altered[2], lines[2], "one byte changed");
    let (ok, said) = verify(dir, "altered.jsonl", &altered, &public);
    assert!(!ok);
    assert_contains(&said, "broken at line 3 (seq 3): its hash does not match");

    // Who decided is in the export, and covered: one approved as
    // someone else is named.
    let approved = lines
        .iter()
        .position(|l| l.contains(r#""decision":"approved""#));
    let approved = approved.unwrap_or_else(|| panic!("no approval in {lines:?}"));
    let by = r#""approver":{"source":"anonymous","principal":"anonymous"}"#;
    assert_contains(&lines[approved], by);
    let mut forged = lines.clone();
    forged[approved] =
        forged[approved].replacen(r#""source":"anonymous""#, r#""source":"oidc""#, 1);
    let (ok, said) = verify(dir, "forged.jsonl", &forged, &public);
    assert!(!ok);
    assert_contains(&said, &format!("broken at line {}", approved + 1));

    // A field beside the signed event says more than was signed: refused,
    // named by its line and its name, not its value.
    let line = format!("broken at line {} (seq {})", approved + 1, approved + 1);
    let mut added = lines.clone();
    added[approved] = added[approved].replacen('{', r#"{"approvedBy":"cfo","#, 1);
    let (ok, said) = verify(dir, "added.jsonl", &added, &public);
    assert!(!ok, "{said}");
    assert_contains(&said, &line);
    assert_contains(&said, r#"field "approvedBy" is not part of the chain"#);
    assert!(!said.contains("cfo"), "{said}");
    // Inside the event, the event's hash covers it.
    let mut inside = lines.clone();
    inside[approved] =
        inside[approved].replacen(r#""event":{"#, r#""event":{"approvedBy":"cfo","#, 1);
    assert_ne!(inside[approved], lines[approved]);
    let (ok, said) = verify(dir, "inside.jsonl", &inside, &public);
    assert!(!ok, "{said}");
    assert_contains(&said, &format!("{line}: its hash does not match"));

    let mut swapped = lines.clone();
    swapped.swap(1, 2);
    let (ok, said) = verify(dir, "swapped.jsonl", &swapped, &public);
    assert!(!ok);
    assert_contains(&said, "broken at line 2 (seq 3)");

    let other = base64::engine::general_purpose::STANDARD.encode(ed25519_public([7u8; 32]));
    let (ok, said) = verify(dir, "intact.jsonl", &lines, &other);
    assert!(!ok);
    assert_contains(&said, "not among the public keys given");

    // From a time on: nothing yet in the future; a time it cannot read.
    let since = |when: &str| toolgate(&["audit", "export", "--config", &config, "--since", when]);
    let out = since("2999-01-01");
    assert!(out.status.success(), "{}", text(&out));
    assert_contains(&text(&out), "0 events");
    let out = since("yesterday");
    assert!(!out.status.success());
    assert_contains(&text(&out), "--since yesterday: expected RFC 3339");
}

/// The public key of a seed, as `--public-key` takes it in base64.
fn ed25519_public(seed: [u8; 32]) -> [u8; 32] {
    toolgate::store::chain::AuditKey::from_seed(seed)
        .public()
        .to_bytes()
}

#[test]
fn without_a_key_the_chain_is_kept_unsigned_and_says_so() {
    let state = tempfile::tempdir().must();
    let config = common::config_file(
        state.path(),
        format!(
            "store:\n  kind: sqlite\n  path: {}\n",
            state.path().join("db.sqlite3").display()
        ),
    );
    let out = toolgate(&["audit", "public-key", "--config", &config]);
    assert!(!out.status.success());
    assert_contains(&text(&out), "the chain is unsigned");
    let check = toolgate(&["config", "check", &config]);
    assert_contains(&text(&check), "unset: the audit chain is kept unsigned");
    let out = toolgate(&["audit", "verify", "nothing.jsonl"]);
    assert!(!out.status.success(), "a key or --unsigned is required");
}

#[test]
fn a_key_that_cannot_be_read_is_an_error_naming_where() {
    let state = tempfile::tempdir().must();
    let config = common::config_file(
        state.path(),
        "audit:\n  signingKey: env:TOOLGATE_TEST_NO_SUCH_AUDIT_KEY\n",
    );
    let out = toolgate(&["config", "check", &config]);
    assert!(!out.status.success());
    assert_contains(
        &text(&out),
        "audit.signingKey: environment variable TOOLGATE_TEST_NO_SUCH_AUDIT_KEY is not set",
    );
    let bad = state.path().join("bad.key");
    std::fs::write(&bad, "not a key").must();
    let config = common::config_file(
        state.path(),
        format!("audit:\n  signingKey: {}\n", bad.display()),
    );
    let out = toolgate(&["config", "check", &config]);
    assert!(!out.status.success());
    assert_contains(&text(&out), "not an Ed25519 key");
    assert!(!text(&out).contains("not a key\n"), "{}", text(&out));
}
