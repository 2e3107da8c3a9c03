//! The words every layer shares about a tool call: the call as the model
//! made it, a tool as offered to the model, their size limits, the name
//! policies use for a tool, the text of a denied call, and a call's
//! fingerprint (`fingerprint.rs`). Below everything: it imports nothing of
//! toolgate's.

pub mod fingerprint;
pub mod redact;

use std::fmt;

pub use fingerprint::Fingerprint;
pub use redact::Redaction;

use serde_json::Value;

/// A call as the model made it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub args: Value,
}

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// The largest tool-call argument text accepted from a model.
pub const MAX_ARGS_BYTES: usize = 1 << 20;

/// The most tool calls one model step may make; models make a handful.
pub const MAX_CALLS_PER_STEP: usize = 128;

/// The name policies use for a tool: `mcp--<server>--<tool>` as given,
/// `internal--<tool>` for a tool of this server. Made once per call and
/// passed along, so every rule sees the same string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QualifiedName(String);

impl QualifiedName {
    pub fn of(name: &str) -> Self {
        // An already qualified name stays as it is.
        if name.starts_with("mcp--") || name.starts_with("internal--") {
            QualifiedName(name.to_owned())
        } else {
            QualifiedName(format!("internal--{name}"))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for QualifiedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::ops::Deref for QualifiedName {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

/// The error text of a denied call, as the client shows it.
pub const DENIED: &str = "User denied execution";

pub fn denial_text(reason: Option<&str>) -> String {
    match reason {
        Some(reason) => format!("{DENIED}: {reason}"),
        None => DENIED.to_owned(),
    }
}

/// What the model and the user read of a question nobody answered in time:
/// not a denial, since nobody decided.
pub fn expired_text(tool: &str) -> String {
    format!("The request to run {tool} expired without an answer; nobody approved or denied it.")
}

/// What the model and the user read of a question closed by a new message.
pub fn cancelled_text(tool: &str) -> String {
    format!(
        "The request to run {tool} was cancelled when the user wrote a new message; nobody approved or denied it."
    )
}

/// The reason inside a [`denial_text`], if `text` is one.
pub fn parse_denial(text: &str) -> Option<Option<String>> {
    let rest = text.strip_prefix(DENIED)?;
    match rest.strip_prefix(": ") {
        Some(reason) => Some(Some(reason.to_owned())),
        None if rest.is_empty() => Some(None),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        for (name, qualified) in [
            ("get_weather", "internal--get_weather"),
            ("internal--get_weather", "internal--get_weather"),
            ("mcp--files--read", "mcp--files--read"),
            ("mcp-files", "internal--mcp-files"),
            ("", "internal--"),
        ] {
            assert_eq!(QualifiedName::of(name).as_str(), qualified, "{name}");
        }
    }

    #[test]
    fn a_denial_reads_back() {
        for reason in [None, Some("too much"), Some(""), Some("a: b")] {
            let text = denial_text(reason);
            assert_eq!(
                parse_denial(&text),
                Some(reason.map(str::to_owned)),
                "{text}"
            );
        }
        for other in ["User denied", "User denied executions", "error", ""] {
            assert_eq!(parse_denial(other), None, "{other}");
        }
    }
}
