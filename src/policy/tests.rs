//! The decision order, over every combination that matters.

use super::*;
use serde_json::json;

fn policy(mode: Mode, allow: &[&str], deny: &[&str], rules: &str) -> Policy {
    let lists = ToolPolicies {
        always_allow: allow.iter().map(|s| (*s).to_owned()).collect(),
        always_deny: deny.iter().map(|s| (*s).to_owned()).collect(),
    };
    let rules: BTreeMap<String, ToolRule> = if rules.is_empty() {
        BTreeMap::new()
    } else {
        yaml_serde::from_str(rules).unwrap_or_else(|e| panic!("{e}"))
    };
    Policy::new(mode, &lists, rules).unwrap_or_else(|e| panic!("{e}"))
}

fn policy_from(rules: &str) -> Policy {
    policy(Mode::EventBased, &[], &[], rules)
}

/// The demo's `process_payment`, which asks.
fn payment() -> ToolInfo<'static> {
    ToolInfo {
        name: "process_payment",
        qualified: "internal--process_payment",
        tool_may_ask: true,
    }
}

fn decide(policy: &Policy, qualified: &str, tool_asks: bool, args: Value) -> Verdict {
    let name = qualified.rsplit("--").next().unwrap_or(qualified);
    let tool = ToolInfo {
        name,
        qualified,
        tool_may_ask: tool_asks,
    };
    policy.decide(&CallInfo {
        tool,
        args: &args,
        tool_asks,
        chat_id: "c",
        principal: "p",
    })
}

fn allow(by: &str) -> Verdict {
    Verdict::Allow { by: by.into() }
}

fn deny(reason: &str) -> Verdict {
    Verdict::Deny {
        reason: reason.into(),
    }
}

const PAYMENT_RULES: &str = r#"
process_payment:
  deny: {when: "amount > 5000", reason: "payments over 5000 are not allowed"}
  confirm: {when: ["amount > 100", "recipient not in [\"Hanako\"]"]}
"#;

#[test]
fn the_decision_order() {
    use Mode::*;
    let pay = "internal--process_payment";
    let small = || json!({"amount": 50, "recipient": "Hanako"});
    #[rustfmt::skip]
    let cases: Vec<(&str, Policy, &str, bool, Value, Verdict)> = vec![
        ("no rule: the tool asks, the mode asks", policy(EventBased, &[], &[], ""), pay, true, small(), Verdict::Ask),
        ("no rule: a tool that does not ask runs", policy(EventBased, &[], &[], ""), "internal--get_weather", false, json!({}), allow("get_weather does not ask for these arguments")),
        ("alwaysDeny beats alwaysAllow", policy(EventBased, &["internal--*"], &[pay], ""), pay, true, small(), deny("alwaysDeny internal--process_payment")),
        ("alwaysDeny beats confirm never", policy(EventBased, &[], &["internal--*"], "process_payment: {confirm: never}"), pay, false, small(), deny("alwaysDeny internal--*")),
        ("alwaysDeny beats auto-approve", policy(AutoApprove, &[], &[pay], ""), pay, true, small(), deny("alwaysDeny internal--process_payment")),
        ("a per-tool deny beats alwaysAllow", policy(EventBased, &[pay], &[], PAYMENT_RULES), pay, true, json!({"amount": 9000}), deny("payments over 5000 are not allowed")),
        ("a per-tool deny that does not hold passes to alwaysAllow", policy(EventBased, &[pay], &[], PAYMENT_RULES), pay, true, json!({"amount": 900}), allow("alwaysAllow internal--process_payment")),
        ("alwaysAllow beats a tool that asks", policy(EventBased, &["internal--*"], &[], ""), pay, true, small(), allow("alwaysAllow internal--*")),
        ("globs match qualified names", policy(EventBased, &["mcp--filesystem--*"], &[], ""), "mcp--filesystem--read", true, json!({}), allow("alwaysAllow mcp--filesystem--*")),
        ("globs do not match other servers", policy(EventBased, &["mcp--filesystem--*"], &[], ""), "mcp--github--read", true, json!({}), Verdict::Ask),
        ("confirm never beats the tool", policy(EventBased, &[], &[], "process_payment: {confirm: never}"), pay, true, small(), allow("tools.process_payment.confirm: never")),
        ("a confirm condition that is false runs", policy(EventBased, &[], &[], PAYMENT_RULES), pay, true, small(), allow(r#"tools.process_payment.confirm: amount > 100 or recipient not in ["Hanako"] is false"#)),
        ("a confirm condition that holds asks", policy(EventBased, &[], &[], PAYMENT_RULES), pay, true, json!({"amount": 150, "recipient": "Hanako"}), Verdict::Ask),
        ("any condition of a list is enough", policy(EventBased, &[], &[], PAYMENT_RULES), pay, true, json!({"amount": 5, "recipient": "Bob"}), Verdict::Ask),
        ("confirm always asks a tool that would not", policy(EventBased, &[], &[], "get_weather: {confirm: always}"), "internal--get_weather", false, json!({}), Verdict::Ask),
        ("rules may name the qualified tool", policy(EventBased, &[], &[], "internal--process_payment: {confirm: never}"), pay, true, small(), allow("tools.process_payment.confirm: never")),
        ("auto-approve approves what would ask", policy(AutoApprove, &[], &[], ""), pay, true, small(), allow("mode auto-approve")),
        ("auto-deny denies what would ask", policy(AutoDeny, &[], &[], ""), pay, true, small(), deny("mode auto-deny")),
        ("auto-deny leaves a tool that never asks alone", policy(AutoDeny, &[], &[], ""), "internal--get_weather", false, json!({}), allow("get_weather does not ask for these arguments")),
    ];
    for (what, policy, tool, asks, args, expected) in cases {
        assert_eq!(decide(&policy, tool, asks, args), expected, "{what}");
    }
}

struct Fixed(i32, Verdict);

impl Decider for Fixed {
    fn priority(&self) -> i32 {
        self.0
    }
    fn decide(&self, _call: &CallInfo<'_>) -> Verdict {
        self.1.clone()
    }
}

#[test]
fn application_deciders_take_their_place_in_the_chain() {
    let pay = "internal--process_payment";
    let args = || json!({"amount": 50});
    let base = || policy(Mode::EventBased, &[pay], &[], "");
    let vetoed = base().with_decider(Fixed(85, deny("business hours only")));
    assert_eq!(
        decide(&vetoed, pay, true, args()),
        deny("business hours only")
    );
    let too_late = base().with_decider(Fixed(75, deny("business hours only")));
    assert_eq!(
        decide(&too_late, pay, true, args()),
        allow("alwaysAllow internal--process_payment")
    );
    let silent = policy(Mode::EventBased, &[], &[], "").with_decider(Fixed(50, Verdict::Pass));
    assert_eq!(decide(&silent, pay, true, args()), Verdict::Ask);
}

#[test]
fn may_ask_and_describe() {
    let pay = payment();
    let weather = ToolInfo {
        name: "get_weather",
        qualified: "internal--get_weather",
        tool_may_ask: false,
    };
    let plain = policy(Mode::EventBased, &[], &[], "");
    assert!(plain.may_ask(&pay));
    assert!(!plain.may_ask(&weather));
    assert_eq!(plain.describe(&weather), "runs (get_weather never asks)");
    assert_eq!(
        plain.describe(&pay),
        "process_payment decides from its arguments whether to ask; otherwise asks (mode event-based)"
    );
    let rules = policy(Mode::EventBased, &[], &[], PAYMENT_RULES);
    assert_eq!(
        rules.describe(&pay),
        r#"never runs when amount > 5000; otherwise runs unless amount > 100 or recipient not in ["Hanako"]; otherwise asks (mode event-based)"#
    );
    assert!(!policy(Mode::AutoApprove, &[], &[], "").may_ask(&pay));
    assert!(!policy(Mode::EventBased, &[], &["internal--*"], "").may_ask(&pay));
}

#[test]
fn hints_fill_in_arguments() {
    let rules = policy_from("process_payment: {hint: 'Pay {recipient} {amount} {currency}?'}");
    let pay = payment();
    let args = json!({"amount": 50, "recipient": "花子", "currency": "USD"});
    assert_eq!(rules.hint(&pay, &args).as_deref(), Some("Pay 花子 50 USD?"));
    assert_eq!(
        policy(Mode::EventBased, &[], &[], "").hint(&pay, &args),
        None
    );
}

#[test]
fn rules_that_would_be_ignored_are_errors() {
    let lists = |deny: &str| ToolPolicies {
        always_allow: vec![],
        always_deny: vec![deny.to_owned()],
    };
    let err = |r: Result<Policy, BadPattern>| r.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        err(Policy::new(
            Mode::EventBased,
            &lists("get_weather"),
            BTreeMap::new()
        ))
        .contains("qualified names")
    );
    assert!(
        Policy::new(Mode::EventBased, &lists("*"), BTreeMap::new()).is_ok(),
        "a bare glob is fine"
    );
    let twice: BTreeMap<String, ToolRule> = yaml_serde::from_str(
        "process_payment: {editable: true}\ninternal--process_payment: {hint: x}\n",
    )
    .unwrap_or_default();
    assert!(
        err(Policy::new(
            Mode::EventBased,
            &ToolPolicies::default(),
            twice
        ))
        .contains("names this tool twice")
    );
}

#[test]
fn who_may_approve() {
    let (alice, carol) = ("alice", "carol");
    let finance = ["finance".to_owned()];
    let listed = ["carol".to_owned(), "role:finance".to_owned()];
    let only_finance = ["role:finance".to_owned()];
    let anyone = Approvers::default();
    let named = Approvers::listed(&listed);
    let finance_four_eyes = Approvers::four_eyes(&only_finance);
    #[rustfmt::skip]
    let cases: &[(&Approvers<'_>, &str, &[String], bool)] = &[
        // No rule: the user who asked, nobody else.
        (&anyone, alice, &[], true),
        (&anyone, carol, &finance, false),
        // A list: its principals and roles; the asker only if listed.
        (&named, carol, &[], true),
        (&named, "dave", &finance, true),
        (&named, "dave", &[], false),
        (&named, alice, &[], false),
        (&named, alice, &finance, true),
        // Both: listed, and not the asker.
        (&finance_four_eyes, alice, &finance, false),
        (&finance_four_eyes, "dave", &finance, true),
        (&finance_four_eyes, carol, &[], false),
    ];
    for (approvers, principal, roles, expected) in cases {
        assert_eq!(
            approvers.may_approve(alice, principal, roles),
            *expected,
            "{approvers:?} {principal} {roles:?}"
        );
    }
    assert_eq!(named.describe(), "carol or role:finance");
    assert!(!anyone.others_decide() && named.others_decide());
}

#[test]
fn approvers_come_from_the_tool_rule() {
    let policy =
        policy_from("process_payment: {approvers: [role:finance], requireDistinctApprover: true}");
    let info = payment();
    let approvers = policy.approvers(&info, &json!({"amount": 5}));
    assert_eq!(approvers.listed, ["role:finance".to_owned()]);
    assert!(approvers.distinct);
    let other = ToolInfo {
        name: "get_weather",
        qualified: "internal--get_weather",
        tool_may_ask: true,
    };
    assert_eq!(policy.approvers(&other, &json!({})), Approvers::default());
    let escalating = policy_from(
        "process_payment: {approvers: [role:finance], escalate: [{when: 'amount > 1000', approvers: [role:cfo]}]}",
    );
    let listed = |args| escalating.approvers(&info, &args).listed.to_vec();
    assert_eq!(listed(json!({"amount": 1000})), ["role:finance"]);
    assert_eq!(listed(json!({"amount": 1001})), ["role:cfo"]);
    let bad = yaml_serde::from_str::<BTreeMap<String, ToolRule>>(
        "pay: {escalate: [{when: 'amount > 1', approvers: []}]}",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(Policy::new(Mode::EventBased, &ToolPolicies::default(), bad).is_err());
    let empty = yaml_serde::from_str::<BTreeMap<String, ToolRule>>("pay: {approvers: ['role:']}")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(Policy::new(Mode::EventBased, &ToolPolicies::default(), empty).is_err());
    let nobody =
        yaml_serde::from_str::<BTreeMap<String, ToolRule>>("pay: {requireDistinctApprover: true}")
            .unwrap_or_else(|e| panic!("{e}"));
    assert!(Policy::new(Mode::EventBased, &ToolPolicies::default(), nobody).is_err());
}
