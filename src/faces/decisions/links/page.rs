//! The HTML of a link's page: the question, what the link does, and its
//! button; every value escaped; a Content-Security-Policy that allows only
//! the page's own inline script and style (by hash).

use std::sync::LazyLock;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use sha2::{Digest, Sha256};

use super::MAX_REASON_CHARS;
use crate::call::QualifiedName;
use crate::notify::LinkDecision;
use crate::run::{LinkQuestion, Outcome, Standing};

/// The page's script: the button posts the (optional) reason to the page's
/// own address and says what happened. Static: the page's values reach it
/// through the DOM only, so its hash never changes.
const SCRIPT: &str = r#"
const button = document.getElementById("decide");
const said = document.getElementById("said");
const outcome = (answer) => {
  const kind = answer && answer.outcome ? answer.outcome.kind : "";
  if (kind === "output") return "Approved: the call ran.";
  if (kind === "handed-off") return "Approved: the call was handed on to run.";
  if (kind === "error") return "Decided: the call ended with an error: " + answer.outcome.message;
  if (kind === "denied") return "Denied.";
  return "Done.";
};
if (button) {
  button.addEventListener("click", async () => {
    button.disabled = true;
    const field = document.getElementById("reason");
    const reason = field ? field.value.trim() : "";
    said.textContent = "Sending…";
    try {
      const response = await fetch(window.location.pathname, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(reason ? { reason } : {}),
        credentials: "omit",
        cache: "no-store",
      });
      const answer = await response.json().catch(() => ({}));
      if (response.ok) {
        said.textContent = outcome(answer);
        button.remove();
        if (field) field.disabled = true;
      } else {
        said.textContent = answer.error || "Refused (" + response.status + ").";
        // Only what failed on toolgate's side may be tried again.
        button.disabled = response.status < 500;
      }
    } catch (e) {
      said.textContent = "toolgate could not be reached; try again.";
      button.disabled = false;
    }
  });
}
"#;

const STYLE: &str = "
body { font: 16px/1.5 system-ui, sans-serif; margin: 0; background: #f6f6f4; color: #1d1d1b; }
main { max-width: 36rem; margin: 2rem auto; padding: 1.5rem; background: #fff; border-radius: 8px; }
h1 { font-size: 1.3rem; margin-top: 0; }
dt { font-weight: 600; margin-top: .5rem; }
dd { margin: 0; }
pre { background: #f0f0ee; padding: .5rem; overflow-x: auto; white-space: pre-wrap; }
textarea { width: 100%; min-height: 4rem; box-sizing: border-box; }
button { font-size: 1rem; padding: .5rem 1.5rem; margin-top: 1rem; cursor: pointer; }
.approve { background: #1d6b35; color: #fff; border: 0; border-radius: 4px; }
.deny { background: #a12020; color: #fff; border: 0; border-radius: 4px; }
";

/// `'sha256-…'` of an inline script or style, for the policy.
fn csp_hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// Nothing but the page's own script and style, and requests to its origin.
static POLICY: LazyLock<String> = LazyLock::new(|| {
    format!(
        "default-src 'none'; script-src {}; style-src {}; connect-src 'self'; \
         img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        csp_hash(SCRIPT),
        csp_hash(STYLE)
    )
});

pub(super) fn html(status: StatusCode, body: &str) -> Response {
    let mut response = (status, body.to_owned()).into_response();
    let headers = response.headers_mut();
    let fixed = [
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        // The token is in the address: no cache or referrer keeps it.
        (header::CACHE_CONTROL, "no-store"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ];
    for (name, value) in fixed {
        headers.insert(name, HeaderValue::from_static(value));
    }
    if let Ok(policy) = HeaderValue::from_str(&POLICY) {
        headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    response
}

/// The page for a question that a link may decide.
pub(super) fn question_page(
    question: &LinkQuestion,
    decision: LinkDecision,
    now_ms: u64,
) -> String {
    let issued = &question.issued;
    let tool = QualifiedName::of(&issued.call.name);
    let args = serde_json::to_string_pretty(&issued.call.args).unwrap_or_default();
    let (title, does) = match decision {
        LinkDecision::Approve => (
            "Approve this call?",
            "Approving lets this call run once, with exactly these arguments.",
        ),
        LinkDecision::Deny => (
            "Deny this call?",
            "Denying refuses this call; the agent is told, with your reason if you give one.",
        ),
    };
    let action = match (&question.standing, decision) {
        (Standing::Open, LinkDecision::Approve) => {
            r#"<button id="decide" type="button" class="approve">Approve</button>"#.to_owned()
        }
        (Standing::Open, LinkDecision::Deny) => format!(
            r#"<label for="reason">Reason (optional)</label>
<textarea id="reason" maxlength="{MAX_REASON_CHARS}"></textarea>
<button id="decide" type="button" class="deny">Deny</button>"#
        ),
        (standing, _) => format!("<p><strong>{}</strong></p>", escape(&stands(standing))),
    };
    let expires = match question.standing {
        Standing::Open => format!(
            "<dt>Expires</dt><dd>in {}</dd>",
            escape(&duration(issued.expires_at_ms.saturating_sub(now_ms)))
        ),
        _ => String::new(),
    };
    let body = format!(
        r#"<p>{hint}</p>
<dl>
<dt>Tool</dt><dd><code>{tool}</code></dd>
<dt>Requested by</dt><dd>{requester}</dd>
<dt>Arguments</dt><dd><pre>{args}</pre></dd>
{expires}
</dl>
<p>{does}</p>
{action}
<p id="said" role="status" aria-live="polite"></p>"#,
        hint = escape(&issued.hint),
        tool = escape(&tool),
        requester = escape(&issued.principal),
        args = escape(&args),
    );
    layout(title, &body)
}

/// What a question that can no longer be decided says.
fn stands(standing: &Standing) -> String {
    match standing {
        Standing::Open => "Open.".into(),
        Standing::Deciding => "This question is being decided right now.".into(),
        Standing::Expired => "This question expired unanswered.".into(),
        Standing::Decided(outcome) => match outcome {
            Outcome::Output {
                responded: true, ..
            } => "Already answered: someone gave the result in the tool's place.".into(),
            Outcome::Output { .. } => "Already approved: the call ran.".into(),
            Outcome::HandedOff { .. } => "Already approved: the call was handed on to run.".into(),
            Outcome::Error { .. } => "Already decided: the call ended with an error.".into(),
            Outcome::Denied { .. } => "Already denied.".into(),
            Outcome::Expired => "This question expired unanswered.".into(),
            Outcome::Cancelled => "This question was cancelled by a new message.".into(),
        },
    }
}

/// A page with a title and a sentence.
pub(super) fn notice(title: &str, text: &str) -> String {
    layout(title, &format!("<p>{}</p>", escape(text)))
}

/// `title` is escaped; `body` is HTML already.
fn layout(title: &str, body: &str) -> String {
    let title = escape(title);
    format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow">
<meta name="referrer" content="no-referrer">
<title>{title} · toolgate</title>
<style>{STYLE}</style>
</head>
<body>
<main>
<h1>{title}</h1>
{body}
</main>
<script>{SCRIPT}</script>
</body>
</html>
"#
    )
}

/// Text as HTML, in an element or a quoted attribute.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `2 h 5 min`, `3 min`, `less than a minute`.
fn duration(ms: u64) -> String {
    let minutes = ms / 60_000;
    match (minutes / 60, minutes % 60) {
        (0, 0) => "less than a minute".into(),
        (0, m) => format!("{m} min"),
        (h, 0) => format!("{h} h"),
        (h, m) => format!("{h} h {m} min"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        let cases = [
            ("plain", "plain"),
            ("<script>x</script>", "&lt;script&gt;x&lt;/script&gt;"),
            (r#"a "b" 'c' & d"#, "a &quot;b&quot; &#39;c&#39; &amp; d"),
            ("&amp;", "&amp;amp;"),
            ("", ""),
        ];
        for (text, html) in cases {
            assert_eq!(escape(text), html, "{text}");
        }
    }

    #[test]
    fn the_policy_allows_only_the_page_itself() {
        assert!(POLICY.starts_with("default-src 'none'; script-src 'sha256-"));
        assert!(!POLICY.contains("unsafe"));
        let page = notice("<t>", "<x>");
        assert!(page.contains(&format!("<script>{SCRIPT}</script>")));
        assert!(page.contains(&format!("<style>{STYLE}</style>")));
        assert!(!page.contains("<x>") && !page.contains("<t>"));
        assert_eq!(duration(59_999), "less than a minute");
        assert_eq!(duration(3_600_000 * 24), "24 h");
        assert_eq!(duration(3_660_000), "1 h 1 min");
    }
}
