//! What each target is sent (pure): the webhook's JSON and its signature,
//! and the Slack message.

use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::call::QualifiedName;
use crate::store::Issued;

/// The most characters of a hint a Slack message shows (a section's text
/// holds 3,000).
const SLACK_HINT_CHARS: usize = 2_000;

/// The approve and deny links of one question, for one target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    pub approve: String,
    pub deny: String,
}

/// `{"type": "confirmation.requested", …}`, as documented in `docs/guides/notifications.md`;
/// with `"moreWaiting": n` when `more` questions of the same user were
/// coalesced into this one (a burst past its queue: see `fair.rs`).
pub(super) fn webhook(issued: &Issued, links: &Pair, more: usize) -> Vec<u8> {
    let mut body = json!({
        "type": "confirmation.requested",
        "id": issued.id,
        "chatId": issued.chat_id,
        "requester": issued.principal,
        "tool": QualifiedName::of(&issued.call.name).as_str(),
        "call": {"id": issued.call.id, "name": issued.call.name, "args": issued.call.args},
        "hint": issued.hint,
        "issuedAtMs": issued.issued_at_ms,
        "expiresAtMs": issued.expires_at_ms,
        "links": {"approve": links.approve, "deny": links.deny},
    });
    if more > 0 {
        body["moreWaiting"] = more.into();
    }
    body.to_string().into_bytes()
}

/// What a delivery that stands for `more` questions besides its own adds.
fn more_waiting(more: usize, principal: &str) -> Option<String> {
    let (questions, wait) = match more {
        1 => ("question", "waits"),
        _ => ("questions", "wait"),
    };
    (more > 0).then(|| {
        format!(
            "{more} more {questions} from {} {wait} in the inbox",
            one_line(principal)
        )
    })
}

/// `v1=<hex HMAC-SHA256(secret, "<timestamp>.<raw body>")>`: what
/// `X-Toolgate-Signature` carries.
pub(super) fn signature(key: &Hmac<Sha256>, timestamp: u64, body: &[u8]) -> String {
    let mut mac = key.clone();
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// A Slack-compatible incoming webhook's message: a one-line `text` (what
/// a notification shows), a section with the hint, the tool and the
/// requester, and two link buttons.
pub(super) fn slack(issued: &Issued, links: &Pair, more: usize) -> Vec<u8> {
    let tool = QualifiedName::of(&issued.call.name);
    let hint = shorten(&issued.hint, SLACK_HINT_CHARS);
    let mut line = format!(
        "Approval needed: {} ({tool}, requested by {})",
        one_line(&hint),
        one_line(&issued.principal)
    );
    let mut section = format!("{hint}\nTool: {tool}\nRequested by: {}", issued.principal);
    if let Some(more) = more_waiting(more, &issued.principal) {
        line = format!("{line}; {more}");
        section = format!("{section}\n{more}");
    }
    let button = |text: &str, style: &str, action: &str, url: &str| {
        json!({
            "type": "button",
            "text": {"type": "plain_text", "text": text},
            "style": style,
            "action_id": action,
            "url": url,
        })
    };
    let body = json!({
        "text": mrkdwn_escape(&line),
        "blocks": [
            {
                "type": "section",
                // Plain text: nothing a hint says becomes a link or a mention.
                "text": {
                    "type": "plain_text",
                    "emoji": false,
                    "text": section,
                },
            },
            {
                "type": "actions",
                "elements": [
                    button("Approve", "primary", "approve", &links.approve),
                    button("Deny", "danger", "deny", &links.deny),
                ],
            },
        ],
    });
    Value::to_string(&body).into_bytes()
}

/// Slack reads `&`, `<` and `>` in `text` as markup (links, mentions).
fn mrkdwn_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn shorten(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::ToolCall;
    use crate::protocol::ConfirmationProtocol;

    fn issued(hint: &str) -> Issued {
        Issued {
            id: "adk-3".into(),
            chat_id: "chat-pay".into(),
            principal: "alice".into(),
            call: ToolCall {
                id: "call-2".into(),
                name: "process_payment".into(),
                args: json!({"amount": 50, "recipient": "Hanako"}),
            },
            hint: hint.into(),
            protocol: ConfirmationProtocol::Adk,
            issued_at_ms: 1_000,
            expires_at_ms: 2_000,
            kind: crate::store::RecordKind::Question,
            fingerprint: None,
        }
    }

    fn pair() -> Pair {
        Pair {
            approve: "https://t.example/confirmations/link/A".into(),
            deny: "https://t.example/confirmations/link/D".into(),
        }
    }

    fn parsed(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_webhook_body() {
        assert_eq!(
            parsed(&webhook(&issued("Send 50?"), &pair(), 0)),
            json!({
                "type": "confirmation.requested",
                "id": "adk-3",
                "chatId": "chat-pay",
                "requester": "alice",
                "tool": "internal--process_payment",
                "call": {"id": "call-2", "name": "process_payment", "args": {"amount": 50, "recipient": "Hanako"}},
                "hint": "Send 50?",
                "issuedAtMs": 1_000,
                "expiresAtMs": 2_000,
                "links": {"approve": "https://t.example/confirmations/link/A", "deny": "https://t.example/confirmations/link/D"},
            })
        );
    }

    /// A delivery that stands for coalesced questions says how many.
    #[test]
    fn a_coalesced_delivery_says_how_many_more_wait() {
        let webhook = parsed(&webhook(&issued("Send 50?"), &pair(), 3));
        assert_eq!(webhook["moreWaiting"], 3);
        assert_eq!(webhook["id"], "adk-3");
        let slack = parsed(&slack(&issued("Send 50?"), &pair(), 1));
        assert_eq!(
            slack["text"],
            "Approval needed: Send 50? (internal--process_payment, requested by alice); 1 more question from alice waits in the inbox"
        );
        assert!(
            slack["blocks"][0]["text"]["text"]
                .as_str()
                .unwrap_or_default()
                .ends_with("\n1 more question from alice waits in the inbox")
        );
    }

    #[test]
    fn signatures() {
        let key = |k: &str| {
            Hmac::<Sha256>::new_from_slice(k.as_bytes()).unwrap_or_else(|e| panic!("{e}"))
        };
        // RFC 4231 style check of the construction: HMAC over "<ts>.<body>".
        let mut expected = key("secret");
        expected.update(b"1700000000.{\"a\":1}");
        let expected = format!("v1={}", hex::encode(expected.finalize().into_bytes()));
        let cases = [
            ("secret", 1_700_000_000, &b"{\"a\":1}"[..], true),
            ("other", 1_700_000_000, &b"{\"a\":1}"[..], false),
            ("secret", 1_700_000_001, &b"{\"a\":1}"[..], false),
            ("secret", 1_700_000_000, &b"{\"a\":2}"[..], false),
        ];
        for (k, ts, body, same) in cases {
            assert_eq!(signature(&key(k), ts, body) == expected, same, "{k} {ts}");
        }
    }

    #[test]
    fn the_slack_body() {
        let body = parsed(&slack(&issued("Pay <@here> & co\nnow?"), &pair(), 0));
        assert_eq!(
            body["text"],
            "Approval needed: Pay &lt;@here&gt; &amp; co now? (internal--process_payment, requested by alice)"
        );
        assert_eq!(
            body["blocks"][0]["text"],
            json!({"type": "plain_text", "emoji": false, "text": "Pay <@here> & co\nnow?\nTool: internal--process_payment\nRequested by: alice"})
        );
        let buttons = &body["blocks"][1]["elements"];
        assert_eq!(body["blocks"][1]["type"], "actions");
        assert_eq!(buttons[0]["text"]["text"], "Approve");
        assert_eq!(buttons[0]["url"], pair().approve);
        assert_eq!(buttons[1]["text"]["text"], "Deny");
        assert_eq!(buttons[1]["url"], pair().deny);
        let long = parsed(&slack(&issued(&"x".repeat(5_000)), &pair(), 0));
        let shown = long["blocks"][0]["text"]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(shown.chars().count() < 2_100, "{}", shown.len());
    }
}
