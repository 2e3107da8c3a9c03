//! Where remembered approvals, window grants among them, stand in the
//! decision order, on a manual clock.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;

use super::super::{Gate, Remember, Scope};
use crate::call::ToolCall;
use crate::ids::{Clock, Ids};
use crate::policy::{Mode, Policy, ToolPolicies, ToolRule, Verdict};
use crate::store::{Remembered, Store};
use crate::tools::Registry;

const START: u64 = 1_000_000;
const HOUR: u64 = 60 * 60 * 1000;
const PAY: &str = "internal--process_payment";

/// What the chain should come to.
#[derive(Debug)]
enum Expect {
    /// Allowed, by a decider whose words contain this.
    Allow(&'static str),
    Deny,
    Ask,
}

fn gate(deny: &[&str], rules: &str) -> (Gate, Store, Clock) {
    let lists = ToolPolicies {
        always_allow: Vec::new(),
        always_deny: deny.iter().map(|s| (*s).to_owned()).collect(),
    };
    let rules: BTreeMap<String, ToolRule> = if rules.is_empty() {
        BTreeMap::new()
    } else {
        yaml_serde::from_str(rules).unwrap_or_else(|e| panic!("{e}"))
    };
    let policy = Policy::new(Mode::EventBased, &lists, rules).unwrap_or_else(|e| panic!("{e}"));
    let (store, clock) = (Store::memory(), Clock::manual(START));
    let gate = Gate::new(
        Registry::with_builtins(10_000.0),
        store.clone(),
        clock.clone(),
        Ids::sequential(),
        Duration::from_secs(60),
        Duration::from_secs(5),
    )
    .with_policy(policy);
    (gate, store, clock)
}

/// Alice's approval of payments: for `chat`, or every chat (`None`),
/// until `expires` if given.
fn grant(id: &str, chat: Option<&str>, expires: Option<u64>) -> Remembered {
    Remembered {
        id: id.into(),
        principal: "alice".into(),
        chat_id: chat.map(str::to_owned),
        tool: PAY.into(),
        created_at_ms: START,
        expires_at_ms: expires,
        definition: None,
    }
}

fn scope(chat: &str) -> Scope {
    Scope::alice(chat)
}

fn pay(amount: u64) -> ToolCall {
    ToolCall {
        id: "call-1".into(),
        name: "process_payment".into(),
        args: json!({"amount": amount, "recipient": "Bob", "currency": "USD"}),
    }
}

async fn decide(gate: &Gate, chat: &str, call: &ToolCall) -> Option<Verdict> {
    gate.decide(&scope(chat), call)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Alice approves `call` in chat "chat", remembered as `remember` says.
async fn approve(gate: &Gate, call: &ToolCall, remember: Option<Remember>) {
    gate.extend(&scope("chat"), &call.name, remember, None)
        .await;
}

/// What alice has remembered.
async fn remembered(gate: &Gate) -> Vec<Remembered> {
    gate.remembered("alice").await.unwrap_or_default()
}

fn matches(verdict: Option<&Verdict>, expect: &Expect) -> bool {
    match (verdict, expect) {
        (Some(Verdict::Allow { by }), Expect::Allow(words)) => by.contains(words),
        (Some(Verdict::Deny { .. }), Expect::Deny) => true,
        (Some(Verdict::Ask), Expect::Ask) => true,
        _ => false,
    }
}

/// A case: its name, the alwaysDeny list, the per-tool rules, what is
/// remembered, the chat of the call, how long after the grants it comes,
/// the amount paid, and the verdict.
type Case = (
    &'static str,
    &'static [&'static str],
    &'static str,
    Vec<Remembered>,
    &'static str,
    u64,
    u64,
    Expect,
);

#[tokio::test]
async fn remembered_approvals_in_the_decision_order() {
    let window = || grant("window", None, Some(START + HOUR));
    let deny_big = r#"
process_payment:
  deny: {when: "amount > 5000", reason: "too much"}
"#;
    let ask_big = r#"
process_payment:
  confirm: {when: "amount > 100"}
"#;
    let escalate = r#"
process_payment:
  escalate: [{when: "amount > 1000", approvers: [cfo]}]
"#;
    let escalate_any = r#"
process_payment:
  escalate: [{when: "memo > 1000", approvers: [cfo]}]
"#;
    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        ("nothing remembered: the tool asks",
            &[], "", vec![], "chat", 0, 50, Expect::Ask),
        ("a window grant covers another chat",
            &[], "", vec![window()], "other", 0, 50, Expect::Allow("every chat until")),
        ("up to its last millisecond",
            &[], "", vec![window()], "other", HOUR - 1, 50, Expect::Allow("every chat until")),
        ("and asks again once its window is over",
            &[], "", vec![window()], "other", HOUR, 50, Expect::Ask),
        ("alwaysDeny beats a window grant",
            &[PAY], "", vec![window()], "other", 0, 50, Expect::Deny),
        ("alwaysDeny beats an approval for this chat",
            &[PAY], "", vec![grant("chat", Some("chat"), None)], "chat", 0, 50, Expect::Deny),
        ("a deny condition on these arguments beats a window grant",
            &[], deny_big, vec![window()], "other", 0, 6_000, Expect::Deny),
        ("and lets other arguments through",
            &[], deny_big, vec![window()], "other", 0, 50, Expect::Allow("every chat until")),
        ("a per-tool deny rule beats a global approval",
            &[], "process_payment: {deny: {when: \"amount > 0\"}}", vec![grant("g", None, None)],
            "other", 0, 50, Expect::Deny),
        ("a confirm condition that holds leaves the call to the window grant",
            &[], ask_big, vec![window()], "other", 0, 500, Expect::Allow("every chat until")),
        ("one that does not hold allows it first",
            &[], ask_big, vec![window()], "other", 0, 50, Expect::Allow("is false")),
        ("this chat's approval is found before a window grant",
            &[], "", vec![window(), grant("chat", Some("chat"), None)], "chat", 0, 50,
            Expect::Allow("for this chat")),
        ("and still applies after the window",
            &[], "", vec![window(), grant("chat", Some("chat"), None)], "chat", HOUR, 50,
            Expect::Allow("for this chat")),
        ("the window covers the other chats",
            &[], "", vec![window(), grant("chat", Some("chat"), None)], "other", 0, 50,
            Expect::Allow("every chat until")),
        ("an approval for one chat reaches no other",
            &[], "", vec![grant("chat", Some("chat"), None)], "other", 0, 50, Expect::Ask),
        ("a global approval has no end",
            &[], "", vec![grant("g", None, None)], "other", 365 * 24 * HOUR, 50,
            Expect::Allow("for every chat")),
        ("a grant never decides a call that escalates to other approvers",
            &[], escalate, vec![grant("g", None, None)], "other", 0, 9_000, Expect::Ask),
        ("nor one whose amount it cannot read (the escalation holds)",
            &[], escalate_any, vec![grant("g", None, None)], "other", 0, 0, Expect::Ask),
        ("but decides the asker's own below the escalation",
            &[], escalate, vec![grant("g", None, None)], "other", 0, 50,
            Expect::Allow("for every chat")),
        ("nor a call others approve",
            &[], "process_payment: {approvers: [cfo]}", vec![grant("g", None, None)],
            "chat", 0, 50, Expect::Ask),
        ("nor one under four eyes",
            &[], "process_payment: {approvers: [alice], requireDistinctApprover: true}",
            vec![grant("chat", Some("chat"), None)], "chat", 0, 50, Expect::Ask),
    ];
    for (name, deny, rules, grants, chat, later, amount, expect) in cases {
        let (gate, store, clock) = gate(deny, rules);
        for approval in grants {
            store
                .remember(approval)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        clock.advance(Duration::from_millis(later));
        let verdict = decide(&gate, chat, &pay(amount)).await;
        assert!(
            matches(verdict.as_ref(), &expect),
            "{name}: {verdict:?}, expected {expect:?}"
        );
    }
}

/// An answer's `remember` as the gate records it: a window from the gate's
/// clock, for every chat; once, nothing.
#[tokio::test]
async fn an_approval_remembered_for_a_window() {
    let (gate, _store, clock) = gate(&[], "");
    let call = pay(50);
    approve(&gate, &call, None).await;
    let listed = remembered(&gate).await;
    assert!(listed.is_empty(), "once is never stored: {listed:?}");

    approve(&gate, &call, Some(Remember::Window { minutes: 60 })).await;
    let listed = remembered(&gate).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].chat_id, None, "every chat");
    assert_eq!(listed[0].expires_at_ms, Some(START + HOUR));
    let verdict = decide(&gate, "other", &call).await;
    assert!(
        matches!(verdict, Some(Verdict::Allow { .. })),
        "{verdict:?}"
    );

    clock.advance(Duration::from_millis(HOUR));
    assert_eq!(decide(&gate, "other", &call).await, Some(Verdict::Ask));
    let listed = remembered(&gate).await;
    assert!(listed.is_empty(), "no longer listed: {listed:?}");
}

/// A grant for every chat without a window replaces a window grant for
/// the same tool, and the reverse: the newest answer says how far it reaches.
#[tokio::test]
async fn the_newest_grant_for_every_chat_wins() {
    let (gate, _store, clock) = gate(&[], "");
    let call = pay(50);
    let reach = |listed: Vec<Remembered>| -> Vec<Option<u64>> {
        listed.into_iter().map(|r| r.expires_at_ms).collect()
    };
    approve(&gate, &call, Some(Remember::Everywhere)).await;
    approve(&gate, &call, Some(Remember::Window { minutes: 1 })).await;
    assert_eq!(reach(remembered(&gate).await), [Some(START + 60_000)]);
    approve(&gate, &call, Some(Remember::Everywhere)).await;
    clock.advance(Duration::from_millis(HOUR));
    assert_eq!(reach(remembered(&gate).await), [None]);
}

/// A lapsed window settles no open question; a live one does.
#[tokio::test]
async fn a_lapsed_window_settles_nothing() {
    let (gate, store, clock) = gate(&[], "");
    let issued = match gate
        .check_new(
            &scope("chat"),
            pay(50),
            crate::protocol::ConfirmationProtocol::Adk,
        )
        .await
    {
        Ok(super::super::NewCall::Ask(issued)) => issued,
        other => panic!("the payment should ask: {other:?}"),
    };
    store
        .remember(grant("window", None, Some(START + 10)))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    clock.advance(Duration::from_millis(10));
    let settled = gate
        .settle(&scope("chat"), &issued.id)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(settled.is_none(), "a lapsed window settled it");
    store
        .remember(grant("window", None, Some(START + HOUR)))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let settled = gate
        .settle(&scope("chat"), &issued.id)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(settled.is_some(), "a live window settles it");
}
