//! Tidy: `Tool::execute` is called in exactly one file, the gate's
//! `src/confirm/execute.rs`, so no tool runs without the gate; and the gate
//! detaches no task.
//! Run with `cargo test --test tidy_execute`.
//!
//! A cheap textual scan of `src/`: a call is `.execute(` or `::execute(`.
//! Not a tool's: one whose first argument is a string literal (rusqlite's
//! `execute` takes its SQL first), one on a statement just prepared from
//! SQL (`prepare(sql)?.execute(`), and anything in a file's unit tests
//! (from a top-level `#[cfg(test)]` on), which may run the tool they test.

use std::fs;
use std::path::{Path, PathBuf};

const THE_ONE_FILE: &str = "src/confirm/execute.rs";

#[test]
fn tools_are_executed_only_by_the_gate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    assert!(!files.is_empty(), "no sources found under src/");
    let mut callers = Vec::new();
    for file in &files {
        let text = match fs::read_to_string(file) {
            Ok(text) => text,
            Err(e) => panic!("reading {}: {e}", file.display()),
        };
        let name = file
            .strip_prefix(root)
            .unwrap_or(file)
            .to_string_lossy()
            .replace('\\', "/");
        for line in tool_calls(&text) {
            callers.push((name.clone(), line));
        }
    }
    let elsewhere: Vec<_> = callers.iter().filter(|(f, _)| f != THE_ONE_FILE).collect();
    assert!(
        elsewhere.is_empty(),
        "Tool::execute is called outside {THE_ONE_FILE}: {elsewhere:?}; \
         every tool call goes through the gate (ARCHITECTURE.md, invariants)"
    );
    assert!(
        callers.iter().any(|(f, _)| f == THE_ONE_FILE),
        "no call found in {THE_ONE_FILE}: has the scan gone stale?"
    );
}

/// Every claimed call and gate step runs on the gate's `TaskTracker`, which
/// `Gate::shutdown` waits for: nothing under `src/confirm/` is detached.
#[test]
fn the_gate_spawns_only_tracked_tasks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src/confirm"), &mut files);
    for file in &files {
        let text = match fs::read_to_string(file) {
            Ok(text) => text,
            Err(e) => panic!("reading {}: {e}", file.display()),
        };
        let detached = text
            .lines()
            .position(|line| line.contains("tokio::spawn") || line.contains("task::spawn"));
        assert_eq!(
            detached,
            None,
            "{} spawns a task the gate does not track",
            file.display()
        );
    }
}

#[test]
fn the_scan_tells_tools_from_sql() {
    let text = r#"
fn run() {
    tool.execute(call.args, ctx);
    let x = conn.execute("DELETE FROM t", []);
    tx.execute(
        "UPDATE t SET a = 1",
        [],
    );
    Tool::execute(&*tool, args, ctx);
    registry
        .execute(args, ctx);
    self.prepare(sql)?.execute(params)
    prepare(args)?.execute(args, ctx);
    // tool.execute(args, ctx) in a comment
}
async fn execute(&self) {}
#[cfg(test)]
mod tests {
    fn t() { tool.execute(args, ctx); }
}
"#;
    assert_eq!(tool_calls(text), vec![3, 9, 11, 13]);
}

/// The 1-based lines of `text` that call a tool's `execute`.
fn tool_calls(text: &str) -> Vec<usize> {
    // Unit tests may run the tool they test directly.
    let end = text
        .lines()
        .position(|line| line.starts_with("#[cfg(test)]"))
        .unwrap_or(usize::MAX);
    let lines: Vec<&str> = text.lines().take(end).collect();
    let mut calls = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        for needle in [".execute(", "::execute("] {
            for (at, _) in code.match_indices(needle) {
                let rest = &code[at + needle.len()..];
                let on_a_statement = code[..at].ends_with("prepare(sql)?");
                if !on_a_statement && !first_argument_is_a_string(rest, &lines[i + 1..]) {
                    calls.push(i + 1);
                }
            }
        }
    }
    calls
}

/// Whether the argument list starting at `rest` (continuing on `next`
/// lines) opens with a string literal: SQL, not a tool's arguments.
fn first_argument_is_a_string(rest: &str, next: &[&str]) -> bool {
    let first = std::iter::once(rest)
        .chain(next.iter().copied())
        .map(str::trim_start)
        .find(|s| !s.is_empty())
        .unwrap_or_default();
    first.starts_with('"') || first.starts_with("r\"") || first.starts_with("r#")
}

/// Every `.rs` file under `dir`, into `out` (`tidy_pipeline` reads them too).
pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => panic!("reading {}: {e}", dir.display()),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
