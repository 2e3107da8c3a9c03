//! How a person's decision reached the pipeline, and how the audit log
//! names who made it.

use super::super::{Answer, Gate, Remember, Scope};
use crate::identity::{Identity, Source};
use crate::store::Issued;

/// How a person's decision on a question arrived.
#[derive(Debug, Clone, Copy)]
pub(in crate::confirm) enum Form<'a> {
    /// An answer in the chat, by the chat's own user, as the chat's
    /// request named them (an OIDC token's roles count).
    Chat {
        scope: &'a Scope,
        answer: &'a Answer,
        who: &'a Identity,
    },
    /// Out of band: the API, a socket's `confirm` frame, a signed link.
    OutOfBand(Who<'a>),
}

impl<'a> Form<'a> {
    pub(super) fn in_chat(self) -> bool {
        matches!(self, Form::Chat { .. })
    }

    /// Whether the decision may see `issued` at all: another user's
    /// question is not there for an API caller unless its tool names
    /// approvers (then they may or may not decide); a link was minted for
    /// its question; an answer in the chat is checked against it later.
    pub(super) fn sees(self, gate: &Gate, issued: &Issued) -> bool {
        match self {
            Form::Chat { .. } | Form::OutOfBand(Who::Link { .. }) => true,
            Form::OutOfBand(Who::Caller(who)) => {
                issued.principal == who.principal || gate.approvers(&issued.call).others_decide()
            }
        }
    }

    /// Who decides: the chat's user; an API caller; whoever follows a link
    /// when the server knows them, else for a question only its asker
    /// decides, the asker (empty: someone the server does not know).
    pub(super) fn decider(self, gate: &Gate, issued: &'a Issued) -> &'a str {
        match self {
            Form::Chat { scope, .. } => &scope.principal,
            Form::OutOfBand(who) => match who.principal() {
                Some(principal) => principal,
                None if !gate.approvers(&issued.call).others_decide() => &issued.principal,
                None => "",
            },
        }
    }

    /// The identity the decision came with; `None`: a link's bearer whom
    /// the request does not name.
    pub(super) fn identity(self) -> Option<&'a Identity> {
        match self {
            Form::Chat { who, .. } => Some(who),
            Form::OutOfBand(who) => who.identity(),
        }
    }

    /// How toolgate knows the decider (`approverIdentity` is judged on it).
    pub(super) fn source(self) -> Source {
        self.identity().map_or(Source::Link, |who| who.source)
    }

    /// The roles the decider's identity brings, besides `auth.roles`'.
    pub(super) fn roles(self) -> &'a [String] {
        self.identity().map_or(&[], |who| &who.roles)
    }
}

/// Who decides a question out of band.
#[derive(Debug, Clone, Copy)]
pub(in crate::confirm) enum Who<'a> {
    /// An authenticated caller (the API, a socket's `confirm` frame, the
    /// MCP face), with the roles its identity brings.
    Caller(&'a Identity),
    /// Whoever follows a signed link sent to `target`: the caller when the
    /// request names one (a proxy's principal header, a key, a token),
    /// deciding as they would through the API; else the link's bearer,
    /// nobody the server knows, who may decide only a question its asker
    /// decides and meets no `approverIdentity`.
    Link {
        target: &'a str,
        caller: Option<&'a Identity>,
    },
}

impl<'a> Who<'a> {
    pub(in crate::confirm) fn principal(self) -> Option<&'a str> {
        self.identity().map(|who| who.principal.as_str())
    }

    /// The decider's identity, if the server knows one.
    pub(in crate::confirm) fn identity(self) -> Option<&'a Identity> {
        match self {
            Who::Caller(who) => Some(who),
            Who::Link { caller, .. } => caller,
        }
    }

    /// How the decision came, for the audit log.
    pub(in crate::confirm) fn via(self) -> String {
        match self {
            Who::Caller(_) => " through the API".to_owned(),
            Who::Link { target, .. } => format!(" through a signed link ({target})"),
        }
    }
}

/// Who approved (`user`: the user who asked), and how far the approval reaches.
pub(in crate::confirm) fn approver(
    who: &str,
    remember: Option<Remember>,
    approve_next: Option<u32>,
) -> String {
    match (remember, approve_next) {
        (Some(Remember::Chat), _) => format!("{who}, remembered for this chat"),
        (Some(Remember::Everywhere), _) => format!("{who}, remembered for every chat"),
        (Some(Remember::Window { minutes: 1 }), _) => format!("{who}, remembered for 1 minute"),
        (Some(Remember::Window { minutes }), _) => {
            format!("{who}, remembered for {minutes} minutes")
        }
        (None, Some(n)) if n > 0 => format!("{who}, and the next {n} calls"),
        _ => who.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_approver_says_how_far_it_reaches() {
        let cases = [
            (None, None, "user"),
            (None, Some(3), "user, and the next 3 calls"),
            (Some(Remember::Chat), None, "user, remembered for this chat"),
            (
                Some(Remember::Everywhere),
                None,
                "user, remembered for every chat",
            ),
            (
                Some(Remember::Window { minutes: 60 }),
                None,
                "user, remembered for 60 minutes",
            ),
            (
                Some(Remember::Window { minutes: 1 }),
                Some(2),
                "user, remembered for 1 minute",
            ),
        ];
        for (remember, next, by) in cases {
            assert_eq!(approver("user", remember, next), by);
        }
    }
}
