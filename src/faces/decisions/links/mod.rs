//! The page a signed approve or deny link leads to (`notify`).
//!
//! `GET /confirmations/link/{token}` shows the question (tool, hint,
//! requester, arguments), what the link will do, and one button; **GET
//! never decides**: link previews, mail scanners and chat unfurlers fetch
//! every link they see. The button's `POST /confirmations/link/{token}`
//! (`{}`, or `{"reason"}` to deny) decides, through the door's
//! `Questions` (the decision pipeline) exactly as
//! `POST /api/confirmations/{id}` does. No API key: the token is the
//! authority, verified before anything is looked up. The guard still holds
//! as for any POST (a JSON body, from the same origin), which the page's
//! own `fetch` satisfies.
//!
//! The page is self-contained: no external asset, every value escaped, and
//! a Content-Security-Policy that allows only its own inline script and
//! style (by hash) and requests to its own origin.

mod page;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use crate::faces::{ApiError, Caller, HttpState};
use crate::notify::{Link, LinkDecision, LinkError};
use crate::protocol::RequestError;
use crate::run::Decision;

use page::{html, notice, question_page};

/// The longest reason a denial through a link may give.
const MAX_REASON_CHARS: usize = 1_000;
/// The largest body of a link's POST: a reason at its longest, each
/// character escaped as JSON at its widest, and room to spare.
const MAX_BODY_BYTES: usize = 16 << 10;

/// `GET /confirmations/link/{token}`: the question and a button. Decides nothing.
pub(in crate::faces) async fn page(
    State(state): State<HttpState>,
    Path(token): Path<String>,
) -> Response {
    let link = match verify(&state, &token) {
        Ok(link) => link,
        Err(refused) => {
            let status = ApiError::from(refused).status();
            return html(
                status,
                &notice("This link cannot be used", &refused.to_string()),
            );
        }
    };
    let questions = &state.questions;
    match questions.for_link(&link.confirmation_id).await {
        Ok(Some(question)) => html(
            StatusCode::OK,
            &question_page(&question, link.decision, questions.now_ms()),
        ),
        Ok(None) => html(
            StatusCode::NOT_FOUND,
            &notice(
                "This question is gone",
                "toolgate no longer knows this question: it was answered or expired a while ago.",
            ),
        ),
        Err(e) => {
            let error = ApiError::from(e);
            let status = error.status();
            html(status, &notice("Try again later", &error.public()))
        }
    }
}

/// The body of the button's request.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkBody {
    #[serde(default)]
    reason: Option<String>,
}

/// `POST /confirmations/link/{token}`: decides as the link says, once.
pub(in crate::faces) async fn decide(
    State(state): State<HttpState>,
    Path(token): Path<String>,
    headers: axum::http::HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    // No key here: the token is checked before a byte of the body is read,
    // and then only a small body is.
    let link = verify(&state, &token)?;
    // Who follows the link, when the request says (a proxy's principal
    // header, a key): a question with approvers needs to know.
    let caller = Caller::from_headers(&state, &headers)
        .await
        .ok()
        .map(Caller::into_identity);
    let body = small_body(&headers, body).await?;
    let decision = decision(&body, link.decision)?;
    let id = link.confirmation_id;
    let decided = state
        .questions
        .decide_by_link(&id, decision, link.target, caller);
    let outcome = decided
        .await?
        .decided()
        .map_err(|refused| ApiError::refused(refused, &id))?;
    Ok(axum::Json(serde_json::json!({
        "id": id,
        "decision": link.decision.word(),
        "outcome": outcome,
    }))
    .into_response())
}

/// A body of at most [`MAX_BODY_BYTES`]: one that says it is larger is
/// refused unread, one that turns out larger as soon as it does.
async fn small_body(headers: &axum::http::HeaderMap, body: Body) -> Result<Bytes, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_BODY_BYTES as u64) {
        return Err(ApiError::TooLarge(MAX_BODY_BYTES));
    }
    let mut read = Vec::new();
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(ApiError::from_body_error)?;
        if read.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(ApiError::TooLarge(MAX_BODY_BYTES));
        }
        read.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(read))
}

/// The token's link, before anything is looked up; without a notifier no
/// token is valid.
fn verify(state: &HttpState, token: &str) -> Result<Link, LinkError> {
    let links = state.links.as_ref().ok_or(LinkError::Invalid)?;
    links.verify(token, state.questions.now_ms())
}

/// The decision a link's POST makes: the link's, with the body's reason
/// (`{}` or `{"reason": …}`; an empty body is `{}`).
fn decision(body: &[u8], link: LinkDecision) -> Result<Decision, RequestError> {
    let body: LinkBody = if body.iter().all(u8::is_ascii_whitespace) {
        LinkBody { reason: None }
    } else {
        serde_json::from_slice(body).map_err(|e| RequestError::Json(e.to_string()))?
    };
    let reason = body
        .reason
        .map(|r| r.trim().to_owned())
        .filter(|r| !r.is_empty());
    if reason
        .as_ref()
        .is_some_and(|r| r.chars().count() > MAX_REASON_CHARS)
    {
        return Err(RequestError::Invalid(format!(
            "a reason is at most {MAX_REASON_CHARS} characters"
        )));
    }
    match link {
        LinkDecision::Approve if reason.is_some() => {
            Err(RequestError::Invalid("an approval takes no reason".into()))
        }
        LinkDecision::Approve => Ok(Decision::Approve {
            payload: None,
            remember: None,
            approve_next: None,
            edited: None,
            grant: None,
        }),
        LinkDecision::Deny => Ok(Decision::Deny { reason }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_post_body() {
        let approve = Decision::Approve {
            payload: None,
            remember: None,
            approve_next: None,
            edited: None,
            grant: None,
        };
        let deny = |r: Option<&str>| Decision::Deny {
            reason: r.map(str::to_owned),
        };
        let long = format!(r#"{{"reason": "{}"}}"#, "x".repeat(MAX_REASON_CHARS + 1));
        #[rustfmt::skip]
        let cases: &[(&str, LinkDecision, Result<Decision, &str>)] = &[
            ("{}", LinkDecision::Approve, Ok(approve.clone())),
            ("", LinkDecision::Approve, Ok(approve.clone())),
            (r#"{"reason": "  "}"#, LinkDecision::Approve, Ok(approve.clone())),
            (r#"{"reason": "why"}"#, LinkDecision::Approve, Err("an approval takes no reason")),
            ("{}", LinkDecision::Deny, Ok(deny(None))),
            (r#"{"reason": " not today "}"#, LinkDecision::Deny, Ok(deny(Some("not today")))),
            (&long, LinkDecision::Deny, Err("a reason is at most 1000 characters")),
            (r#"{"approved": true}"#, LinkDecision::Deny, Err("json")),
            ("[", LinkDecision::Deny, Err("json")),
        ];
        for (body, link, expected) in cases {
            let got = decision(body.as_bytes(), *link).map_err(|e| match e {
                RequestError::Invalid(why) => why,
                RequestError::Json(_) => "json".to_owned(),
            });
            assert_eq!(got, expected.clone().map_err(str::to_owned), "{body}");
        }
    }
}
