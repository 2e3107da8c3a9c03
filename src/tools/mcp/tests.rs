//! The MCP client's pure parts: config checks, annotations, results, redaction, stderr.

use super::process::*;
use super::redact::*;
use super::tool::*;
use super::*;
use rmcp::model::{ContentBlock, ToolAnnotations};
use serde_json::json;

fn config(yaml: &str) -> Result<McpServer, McpConfigError> {
    let config: McpServerConfig = yaml_serde::from_str(yaml).unwrap_or_else(|e| panic!("{e}"));
    McpServer::new("fs", &config)
}

#[test]
fn names_that_cannot_be_qualified_are_refused() {
    for name in ["fs", "my_server-2", "A"] {
        assert!(valid_part(name), "{name}");
    }
    for name in ["", "a--b", "-a", "a-", "a b", "a.b", "ä", "a/b"] {
        assert!(!valid_part(name), "{name}");
    }
    let server: McpServerConfig =
        yaml_serde::from_str("command: x").unwrap_or_else(|e| panic!("{e}"));
    assert!(McpServer::new("a--b", &server).is_err());
    assert!(McpServer::new(&"a".repeat(33), &server).is_err());
}

#[test]
fn a_server_is_a_command_or_a_url() {
    assert!(config("command: x").is_ok());
    assert!(config("url: http://127.0.0.1:1/mcp").is_ok());
    let error = |yaml: &str| {
        config(yaml)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert_eq!(
        error("{command: x, url: 'http://h/'}"),
        "mcpServers `fs`: give exactly one of `command` and `url`"
    );
    assert_eq!(
        error("{}"),
        "mcpServers `fs`: give exactly one of `command` and `url`"
    );
    assert!(error("url: ftp://h/").contains("not an http(s) URL"));
    assert!(error("{url: 'http://h/', args: [a]}").contains("for a `command` server"));
    assert!(error("{command: x, headers: {a: b}}").contains("for a `url` server"));
    assert!(
        error("{command: x, env: {T: 'env:TOOLGATE_SURELY_UNSET'}}")
            .contains("TOOLGATE_SURELY_UNSET")
    );
    assert!(error("{command: x, timeoutMs: 0}").contains("timeoutMs must be positive"));
}

#[test]
fn only_a_read_only_tool_on_a_trusting_server_runs_unasked() {
    let ro = ToolAnnotations::new().read_only(true);
    let ro_destructive = ToolAnnotations::new().read_only(true).destructive(true);
    let destructive = ToolAnnotations::new().destructive(true);
    let cases = [
        (true, None, true),
        (true, Some(&ro), false),
        (false, Some(&ro), true),
        (true, Some(&ro_destructive), true),
        (true, Some(&destructive), true),
        (true, Some(&ToolAnnotations::new()), true),
    ];
    for (allow, annotations, expected) in cases {
        assert_eq!(
            asks(allow, annotations),
            expected,
            "{allow} {annotations:?}"
        );
    }
}

#[test]
fn the_secrets_of_a_url_are_hidden_in_any_text() {
    let raw = "https://me:hunter22@mcp.example.com/mcp?token=SUPERSECRET&v=2#frag-secret";
    let url = reqwest::Url::parse(raw).unwrap_or_else(|e| panic!("{e}"));
    let redactor = Redactor::for_url(raw, &url);
    let error = format!(
        "error sending request for url ({raw}): connection refused; token=SUPERSECRET; Basic me:hunter22"
    );
    let shown = redactor.apply(&error);
    for secret in ["SUPERSECRET", "hunter22", "frag-secret"] {
        assert!(!shown.contains(secret), "{shown}");
    }
    assert!(
        shown.starts_with("error sending request for url (https://mcp.example.com/mcp?[redacted]): connection refused"),
        "{shown}"
    );
    // A call's error gets the same, and is bounded.
    let failed = passed_on(
        &redactor,
        ToolError::Failed(format!("{error}{}", "x".repeat(10_000))),
    );
    assert!(
        matches!(&failed, ToolError::Failed(m) if !m.contains("SUPERSECRET") && m.len() < MAX_MESSAGE_BYTES + 32),
        "{failed:?}"
    );
    assert_eq!(
        passed_on(&redactor, ToolError::TimedOut(5)),
        ToolError::TimedOut(5)
    );
    // Nothing to hide: the text stays as it is.
    let plain = reqwest::Url::parse("http://127.0.0.1:1/mcp").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        Redactor::for_url("http://127.0.0.1:1/mcp", &plain).apply(&error),
        error
    );
}

#[test]
fn long_texts_are_cut_on_a_character_boundary() {
    assert_eq!(capped("short"), "short");
    let long = "é".repeat(MAX_MESSAGE_BYTES);
    let cut = capped(&long);
    let (kept, rest) = cut.split_once('…').unwrap_or_default();
    assert_eq!(kept.len(), MAX_MESSAGE_BYTES);
    assert_eq!(
        rest,
        format!(" ({} more bytes)", long.len() - MAX_MESSAGE_BYTES)
    );
}

#[test]
fn stderr_lines_are_escaped_and_rate_limited() {
    assert_eq!(
        printable(b"\x1b[31mred\x1b[0m\rover\ttab \xe2\x80\xae"),
        "\\u{1b}[31mred\\u{1b}[0m\\rover\ttab \\u{202e}"
    );
    let start = std::time::Instant::now();
    let mut limit = LineLimit::new(start);
    let admitted = (0..25).filter(|_| limit.admit(start).1).count();
    assert_eq!(admitted, STDERR_LINES_PER_SEC as usize);
    assert_eq!(
        limit.admit(start + Duration::from_millis(1000)),
        (Some(5), true)
    );
    assert_eq!(limit.flush(), None);
    limit.admit(start + Duration::from_millis(1001));
    assert_eq!(limit.flush(), None);
}

#[test]
fn results_map_to_outputs_and_errors() {
    let text = CallToolResult::success(vec![ContentBlock::text("a"), ContentBlock::text("b")]);
    assert_eq!(output(text), Ok(json!("a\nb")));
    let structured = CallToolResult::structured(json!({"n": 1}));
    assert_eq!(output(structured), Ok(json!({"n": 1})));
    let failed = CallToolResult::error(vec![ContentBlock::text("no disk")]);
    assert_eq!(output(failed), Err(ToolError::Failed("no disk".into())));
    let empty = CallToolResult::error(Vec::new());
    assert_eq!(
        output(empty),
        Err(ToolError::Failed("the MCP tool failed".into()))
    );
    let huge = CallToolResult::success(vec![ContentBlock::text("x".repeat(MAX_RESULT_BYTES + 1))]);
    assert!(matches!(output(huge), Err(ToolError::Failed(m)) if m.contains("larger than")));
}
