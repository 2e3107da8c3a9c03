//! The rules about who answers: a seal over the scope and the call, the
//! refusals' words, numbers compared by value, who may decide, and where
//! a grant may reach.

use super::*;

#[test]
fn a_seal_covers_the_scope_and_the_call() {
    let signer = Signer::new(["k1".to_owned()]);
    let seal_for = |scope: &Scope, call: &ToolCall| -> Option<Seal> {
        let signer = signer.as_ref()?;
        Some(signer.seal(&signing::Subject {
            confirmation_id: "adk-1",
            chat_id: &scope.chat_id,
            principal: &scope.principal,
            call,
            expires_at_ms: EXPIRES,
        }))
    };
    let sealed_answer = Answer {
        seal: seal_for(&scope(), &issued().call),
        ..good()
    };
    let elsewhere = Scope {
        chat_id: "other".into(),
        ..scope()
    };
    let cases = [
        (None, good(), scope(), Ok(())),
        (signer.as_ref(), sealed_answer.clone(), scope(), Ok(())),
        (signer.as_ref(), good(), scope(), Err(Refusal::Unsigned)),
        (
            signer.as_ref(),
            sealed_answer.clone(),
            elsewhere,
            Err(Refusal::Unsigned),
        ),
        (
            signer.as_ref(),
            Answer {
                original: Some(call(json!({"amount": 5000, "to": "bob"}))),
                ..sealed_answer
            },
            scope(),
            Err(Refusal::Unsigned),
        ),
    ];
    for (i, (signer, answer, scope, expected)) in cases.into_iter().enumerate() {
        assert_eq!(sealed(signer, &answer, &scope), expected, "case {i}");
    }
}

#[test]
fn refusals_read_as_before() {
    let cases = [
        (
            Refusal::Unsigned,
            "confirmation signature is missing or does not match",
        ),
        (
            Refusal::NotIssued("adk-9".into()),
            "confirmation `adk-9` was not issued by this server",
        ),
        (Refusal::OtherChat, "confirmation belongs to another chat"),
        (Refusal::OtherUser, "confirmation belongs to another user"),
        (
            Refusal::OtherProtocol,
            "confirmation answered in another form than it was asked",
        ),
        (
            Refusal::OtherCall(Adk),
            "originalFunctionCall differs from the call this server issued",
        ),
        (
            Refusal::OtherCall(AiSdk),
            "the approved call differs from the call this server issued",
        ),
        (Refusal::Expired, "confirmation expired"),
        (Refusal::OutcomeUnknown, crate::confirm::OUTCOME_UNKNOWN),
        (Refusal::EditTooLarge(8), "edited arguments exceed 8 bytes"),
        (
            Refusal::NotEditable("pay".into()),
            "the arguments of pay may not be edited",
        ),
        (
            Refusal::NoResponse,
            "an upstream agent's call cannot be answered in its place; approve or deny it",
        ),
    ];
    for (refusal, text) in cases {
        assert_eq!(refusal.to_string(), text);
    }
}

#[test]
fn numbers_compare_by_value_exactly() {
    let cases = [
        (
            json!({"amount": 50.0, "to": "a"}),
            json!({"to": "a", "amount": 50}),
            true,
        ),
        (json!([1.5, {"x": -0.0}]), json!([1.5, {"x": 0}]), true),
        (json!({"amount": 50.5}), json!({"amount": 50}), false),
        (
            json!({"amount": 9_007_199_254_740_993_u64}),
            json!({"amount": 9_007_199_254_740_992_u64}),
            false,
        ),
        (
            json!({"amount": 9_007_199_254_740_993_u64}),
            json!({"amount": 9_007_199_254_740_992.0}),
            false,
        ),
        (json!({"amount": 1}), json!({"amount": "1"}), false),
        (json!({"a": 1}), json!({"a": 1, "b": null}), false),
        (json!([1, 2]), json!([2, 1]), false),
    ];
    for (a, b, same) in cases {
        assert_eq!(crate::json::same(&a, &b), same, "{a} vs {b}");
        assert_eq!(crate::json::same(&b, &a), same, "{b} vs {a}");
    }
}

#[test]
fn who_may_decide() {
    let listed = ["role:finance".to_owned()];
    let finance = ["finance".to_owned()];
    let four_eyes = Approvers::four_eyes(&listed);
    let finance_or_asker = Approvers::listed(&listed);
    let signed_in = Approvers {
        least: Some(Verified::Oidc),
        ..four_eyes
    };
    let asker_signed_in = Approvers {
        least: Some(Verified::Key),
        ..Approvers::default()
    };
    let waiting =
        "the user who asked may not approve this call themselves; waiting for role:finance";
    let by_oidc = "only role:finance (known by oidc or stronger) may decide this call; \
        this decision came with an identity from ";
    /// Who, with which roles, approving or not, and the verdict.
    type Case<'a> = (
        Approvers<'a>,
        &'a str,
        &'a [String],
        bool,
        Result<(), &'a str>,
    );
    #[rustfmt::skip]
    let cases: &[Case<'_>] = &[
        // No rule: the user who asked decides, and nobody else.
        (Approvers::default(), "clerk", &[], true, Ok(())),
        (Approvers::default(), "clerk", &[], false, Ok(())),
        (Approvers::default(), "lead", &finance, true, Err("only the user who asked may approve this call")),
        // Four eyes: the asker may deny, never approve; finance may do both.
        (four_eyes, "clerk", &[], false, Ok(())),
        (four_eyes, "clerk", &finance, true, Err(waiting)),
        (four_eyes, "lead", &finance, true, Ok(())),
        (four_eyes, "lead", &finance, false, Ok(())),
        (four_eyes, "other", &[], true, Err("only role:finance may approve this call")),
        (four_eyes, "other", &[], false, Err("only role:finance or the user who asked may deny this call")),
        // Listed without four eyes: an asker with the role may approve.
        (finance_or_asker, "clerk", &finance, true, Ok(())),
        (finance_or_asker, "clerk", &[], true, Err(waiting)),
    ];
    for (approvers, principal, roles, approve, expected) in cases {
        // With no least identity asked, every source decides alike.
        for source in [Source::Oidc, Source::Key, Source::Link, Source::Anonymous] {
            let who = Decider {
                principal,
                roles,
                source,
            };
            let got = decider(*approvers, "clerk", who, *approve).map_err(|e| e.to_string());
            let expected = expected.map_err(str::to_owned);
            assert_eq!(got, expected, "{principal} {approve} {source:?}");
        }
    }
    // `approverIdentity`: who may decide, and how they are known.
    let with = |source: Source| format!("{by_oidc}{}", source.word());
    #[rustfmt::skip]
    /// The approvers, who with which roles and source, approving or not, and the verdict.
    type Known<'a> = (Approvers<'a>, &'a str, &'a [String], Source, bool, Result<(), String>);
    let cases: Vec<Known<'_>> = vec![
        (signed_in, "lead", &finance, Source::Oidc, true, Ok(())),
        (signed_in, "lead", &finance, Source::Oidc, false, Ok(())),
        (
            signed_in,
            "lead",
            &finance,
            Source::Key,
            true,
            Err(with(Source::Key)),
        ),
        (
            signed_in,
            "lead",
            &finance,
            Source::Key,
            false,
            Err(with(Source::Key)),
        ),
        (
            signed_in,
            "lead",
            &finance,
            Source::ProxyHeader,
            true,
            Err(with(Source::ProxyHeader)),
        ),
        (
            signed_in,
            "lead",
            &finance,
            Source::Link,
            true,
            Err(with(Source::Link)),
        ),
        // The asker may always deny their own call, however known.
        (signed_in, "clerk", &[], Source::Anonymous, false, Ok(())),
        // Not an approver at all: told who is, whatever the source.
        (
            signed_in,
            "other",
            &[],
            Source::Oidc,
            true,
            Err("only role:finance (known by oidc or stronger) may approve this call".into()),
        ),
        // The asker alone, known by a key or stronger.
        (asker_signed_in, "clerk", &[], Source::Key, true, Ok(())),
        (asker_signed_in, "clerk", &[], Source::Oidc, true, Ok(())),
        (
            asker_signed_in,
            "clerk",
            &[],
            Source::ProxyHeader,
            true,
            Err(
                "only the user who asked (known by key or stronger) may decide this call; \
             this decision came with an identity from proxy-header"
                    .into(),
            ),
        ),
        (asker_signed_in, "clerk", &[], Source::Stdio, false, Ok(())),
    ];
    for (approvers, principal, roles, source, approve, expected) in cases {
        let who = Decider {
            principal,
            roles,
            source,
        };
        let got = decider(approvers, "clerk", who, approve).map_err(|e| e.to_string());
        assert_eq!(got, expected, "{principal} {approve} {source:?}");
    }
}

#[test]
fn a_grant_only_where_the_asker_decides_alone() {
    let finance = ["role:finance".to_owned()];
    let cfo = ["cfo".to_owned()];
    let alone = Approvers::default();
    let four_eyes = Approvers::four_eyes(&finance);
    let listed = Approvers::listed(&cfo);
    let signed_in = Approvers {
        least: Some(Verified::Oidc),
        ..alone
    };
    let approve = |remember: Option<Remember>, approve_next: Option<u32>| Decision::Approve {
        payload: None,
        remember,
        approve_next,
        edited: None,
        grant: None,
    };
    let plain = approve(None, None);
    let everywhere = approve(Some(Remember::Everywhere), None);
    let next = approve(None, Some(5));
    let no_next = approve(None, Some(0));
    let window = approve(Some(Remember::Window { minutes: 5 }), None);
    let deny = Decision::Deny { reason: None };
    let refused = |who: &str| {
        Err(format!(
            "`remember` and `approveNext` are only for calls the user who asked approves \
             alone; this call needs {who}: decide it without them"
        ))
    };
    #[rustfmt::skip]
    let cases: Vec<(&Decision, Vec<Approvers<'_>>, Result<(), String>)> = vec![
        (&everywhere, vec![alone], Ok(())),
        (&next, vec![alone, alone], Ok(())),
        (&plain, vec![four_eyes], Ok(())),
        (&no_next, vec![listed], Ok(())),
        (&deny, vec![listed], Ok(())),
        (&everywhere, vec![four_eyes], refused("role:finance, not the user who asked")),
        (&next, vec![listed], refused("cfo")),
        (&window, vec![listed], refused("cfo")),
        // An edit whose arguments escalate: judged as it would run.
        (&next, vec![alone, listed], refused("cfo")),
        // A least identity: a grant would decide later calls with nobody's
        // identity there to judge.
        (&everywhere, vec![signed_in], refused("the user who asked (known by oidc or stronger)")),
        (&next, vec![signed_in], refused("the user who asked (known by oidc or stronger)")),
        (&plain, vec![signed_in], Ok(())),
    ];
    for (decision, approvers, expected) in cases {
        let got = grant(decision, &approvers).map_err(|e| e.to_string());
        assert_eq!(got, expected, "{decision:?} {approvers:?}");
    }
}
