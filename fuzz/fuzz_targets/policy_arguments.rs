//! A hostile model's arguments against a payment tool's schema and rules:
//! whatever the input, a call whose `amount` is not a number the rules can
//! read is either refused by the schema or denied, asked and escalated by
//! the rules (they fail closed); only a number at most 5,000 is not denied,
//! and only one at most 100 runs unasked.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use toolgate::policy::{CallInfo, Mode, Policy, ToolInfo, ToolPolicies, ToolRule, Verdict};
use toolgate::tools::InputSchema;

fn rules() -> BTreeMap<String, ToolRule> {
    let rule = json!({
        "deny": {"when": "amount > 5000"},
        "confirm": {"when": ["amount > 100", "currency != \"USD\""]},
        "approvers": ["clerk"],
        "escalate": [{"when": "amount > 1000", "approvers": ["cfo"]}]
    });
    let rule = serde_json::from_value(rule).unwrap_or_else(|e| panic!("{e}"));
    BTreeMap::from([("pay".to_owned(), rule)])
}

fuzz_target!(|body: &[u8]| {
    let Ok(args) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    let policy = Policy::new(Mode::EventBased, &ToolPolicies::default(), rules())
        .unwrap_or_else(|e| panic!("{e}"));
    let tool = ToolInfo {
        name: "pay",
        qualified: "internal--pay",
        tool_may_ask: true,
    };
    let call = CallInfo {
        tool,
        args: &args,
        tool_asks: false,
        chat_id: "chat",
        principal: "alice",
    };
    let amount = args.get("amount").and_then(Value::as_f64);
    let verdict = policy.decide(&call);
    match amount {
        Some(a) if a <= 5000.0 => assert!(!matches!(verdict, Verdict::Deny { .. }), "{args}"),
        _ => assert!(
            matches!(verdict, Verdict::Deny { .. }),
            "{args}: {verdict:?}"
        ),
    }
    let usd = args.get("currency").is_some_and(|c| c == "USD");
    if matches!(verdict, Verdict::Allow { .. }) {
        assert!(amount.is_some_and(|a| a <= 100.0) && usd, "{args}");
    }
    let approvers = policy.approvers(&tool, &args);
    if !amount.is_some_and(|a| a <= 1000.0) {
        assert_eq!(approvers.listed, ["cfo".to_owned()], "{args}");
    }
    // The schema lets through only a number for `amount`.
    let schema = InputSchema::compile(&json!({
        "type": "object",
        "properties": {"amount": {"type": "number"}, "currency": {"type": "string"}},
        "required": ["amount"]
    }));
    if schema.check(&args).is_ok() {
        assert!(amount.is_some(), "{args}");
    }
});
