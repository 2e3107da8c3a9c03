//! Tidy: one decision pipeline. The store's `claim`, `finish` and `audit`
//! (a question claimed, an outcome recorded, a decision audited) are
//! called in one file only, the pipeline's ledger
//! (`src/confirm/pipeline/ledger.rs`); `finish` also in
//! `src/confirm/execute.rs`, which records the end of a tool it started
//! for a claim the pipeline won (it runs on its own task, after the
//! pipeline returned, so the outcome cannot be recorded there). The
//! ledger's own steps (`.claim(` and `.close(` on the gate, with
//! arguments) are called only under `src/confirm/pipeline/`. A refused
//! decision is audited only through `Note::refused`, which takes who
//! tried: `AuditDecision::Refused` is named in `src/confirm/` only where
//! the event is made (`audit.rs`) and where nobody decided (the model's
//! call refused by its schema, a client's result refused).
//! Run with `cargo test --test it tidy_pipeline`.
//!
//! A cheap textual scan of `src/` outside `src/store/` (the store defines
//! them): a call is `.claim(`, `.finish(` or `.audit(` on a receiver that
//! ends in `store` (a chain broken over lines is joined first), and
//! anything in a file's unit tests (from a top-level `#[cfg(test)]` on)
//! is left out.

use std::fs;
use std::path::Path;

use crate::tidy_execute::rust_files;

const LEDGER: &str = "src/confirm/pipeline/ledger.rs";
const EXECUTE: &str = "src/confirm/execute.rs";
const PIPELINE: &str = "src/confirm/pipeline/";

#[test]
fn only_the_pipeline_claims_records_and_audits() {
    let mut found = Vec::new();
    for (name, text) in sources() {
        for (line, method) in store_calls(&text) {
            found.push((name.clone(), line, method));
        }
    }
    let elsewhere: Vec<_> = found
        .iter()
        .filter(|(file, _, method)| file != LEDGER && !(file == EXECUTE && *method == "finish"))
        .collect();
    assert!(
        elsewhere.is_empty(),
        "the store's claim, finish or audit is called outside {LEDGER}: {elsewhere:?}; \
         every decision goes through the decision pipeline (ARCHITECTURE.md)"
    );
    for method in ["claim", "finish", "audit"] {
        assert!(
            found.iter().any(|(f, _, m)| f == LEDGER && *m == method),
            "no call of the store's {method} found in {LEDGER}: has the scan gone stale?"
        );
    }
}

#[test]
fn only_the_pipeline_takes_its_own_steps() {
    let mut elsewhere = Vec::new();
    for (name, text) in sources() {
        if !name.starts_with("src/confirm/") || name.starts_with(PIPELINE) {
            continue;
        }
        for (i, line) in code_lines(&text).iter().enumerate() {
            // With arguments: a task tracker's `close()` is not a step.
            let step = [".claim(", ".close("].iter().any(|needle| {
                line.match_indices(needle)
                    .any(|(at, _)| !line[at + needle.len()..].starts_with(')'))
            });
            if step {
                elsewhere.push((name.clone(), i + 1));
            }
        }
    }
    assert!(
        elsewhere.is_empty(),
        "a question is claimed or closed outside {PIPELINE}: {elsewhere:?}"
    );
}

/// Where a refusal is audited that no person tried: the model's call
/// against its schema, a client's result for a tool it was handed.
const REFUSED_BY_NOBODY: [&str; 2] = ["src/confirm/decide.rs", "src/confirm/client_output.rs"];

#[test]
fn a_refused_decision_is_audited_naming_who_tried() {
    let mut elsewhere = Vec::new();
    let mut through_refused = 0;
    for (name, text) in sources() {
        if !name.starts_with("src/confirm/") || name == "src/confirm/audit.rs" {
            continue;
        }
        for (i, line) in code_lines(&text).iter().enumerate() {
            if line.contains("AuditDecision::Refused") && !REFUSED_BY_NOBODY.contains(&&*name) {
                elsewhere.push((name.clone(), i + 1));
            }
            if name.starts_with(PIPELINE) && line.contains("Note::refused(") {
                through_refused += 1;
            }
        }
    }
    assert!(
        elsewhere.is_empty(),
        "a refusal audited without who tried: {elsewhere:?}; use Note::refused"
    );
    assert!(
        through_refused >= 5,
        "{through_refused} calls of Note::refused under {PIPELINE}: has the scan gone stale?"
    );
}

#[test]
fn the_scan_finds_store_calls() {
    let text = r#"
fn run() {
    self.store.claim(id, now, &me).await?;
    self.store
        .finish(id, outcome)
        .await?;
    gate.store.audit(event).await;
    self.finish(FinishReason::Stop, out);
    f.debug_struct("x").finish()
    // self.store.claim(id) in a comment
}
#[cfg(test)]
mod tests {
    fn t() { store.finish(id, outcome); }
}
"#;
    let calls: Vec<_> = store_calls(text)
        .into_iter()
        .map(|(line, method)| (line, method.to_owned()))
        .collect();
    assert_eq!(
        calls,
        [
            (3, "claim".to_owned()),
            (5, "finish".to_owned()),
            (7, "audit".to_owned())
        ]
    );
}

/// Every source file outside the store's own, by its path from the root.
fn sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    assert!(!files.is_empty(), "no sources found under src/");
    let mut out = Vec::new();
    for file in files {
        let name = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .to_string_lossy()
            .replace('\\', "/");
        if name.starts_with("src/store/") {
            continue;
        }
        match fs::read_to_string(&file) {
            Ok(text) => out.push((name, text)),
            Err(e) => panic!("reading {}: {e}", file.display()),
        }
    }
    out
}

/// The lines before a file's unit tests, without comments.
fn code_lines(text: &str) -> Vec<&str> {
    text.lines()
        .take_while(|line| !line.starts_with("#[cfg(test)]"))
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect()
}

/// The 1-based lines of `text` that call the store's claim, finish or
/// audit, with the method.
fn store_calls(text: &str) -> Vec<(usize, &'static str)> {
    let lines = code_lines(text);
    let mut calls = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        for method in ["claim", "finish", "audit"] {
            let needle = format!(".{method}(");
            for (at, _) in code.match_indices(&needle) {
                // A chain broken over lines: the receiver ends the line before.
                let receiver = match &code[..at] {
                    "" => lines[..i]
                        .iter()
                        .rev()
                        .map(|l| l.trim_end())
                        .find(|l| !l.is_empty())
                        .unwrap_or_default(),
                    before => before,
                };
                if receiver.ends_with("store") {
                    calls.push((i + 1, method));
                }
            }
        }
    }
    calls
}
