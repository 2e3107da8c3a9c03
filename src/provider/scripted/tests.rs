use super::*;

const OFFERED: &[&str] = &["process_payment", "get_weather", "get_location"];

fn calls(text: &str) -> Vec<(String, Value)> {
    match plan_for_text(text, OFFERED) {
        Plan::Calls(calls) => calls,
        other => panic!("{text}: {other:?}"),
    }
}

#[test]
fn counting_deltas() {
    for (i, delta) in [(1, "1"), (2, " 2"), (10, " 10"), (100_000, " 100000")] {
        assert_eq!(count_delta(i), delta);
    }
}

#[test]
fn payments() {
    let pay = |amount: Value, recipient: &str, currency: &str| {
        (
            "process_payment".to_owned(),
            json!({"amount": amount, "recipient": recipient, "currency": currency}),
        )
    };
    assert_eq!(
        calls("Send 50 USD to Hanako"),
        vec![pay(json!(50), "Hanako", "USD")]
    );
    assert_eq!(
        calls("please pay $12.5 to Bob."),
        vec![pay(json!(12.5), "Bob", "USD")]
    );
    assert_eq!(
        calls("TRANSFER 7 eur to 花子"),
        vec![pay(json!(7), "花子", "EUR")]
    );
    assert_eq!(
        calls("Send 50 USD to Hanako and pay $20 to Bob"),
        vec![
            pay(json!(50), "Hanako", "USD"),
            pay(json!(20), "Bob", "USD")
        ]
    );
    assert_eq!(
        calls("What is the weather in New York? and send 5 to Al"),
        vec![
            ("get_weather".to_owned(), json!({"city": "New York"})),
            pay(json!(5), "Al", "USD")
        ]
    );
}

#[test]
fn lists_of_payments() {
    let pay = |amount: u64, recipient: &str, currency: &str| {
        (
            "process_payment".to_owned(),
            json!({"amount": amount, "recipient": recipient, "currency": currency}),
        )
    };
    let weather = |city: &str| ("get_weather".to_owned(), json!({"city": city}));
    let cases: &[(&str, Vec<(String, Value)>)] = &[
        (
            "Send 10 USD to Taro and 20 USD to Jiro",
            vec![pay(10, "Taro", "USD"), pay(20, "Jiro", "USD")],
        ),
        (
            "Send 10 USD to Taro, 20 USD to Jiro and 30 USD to Saburo",
            vec![
                pay(10, "Taro", "USD"),
                pay(20, "Jiro", "USD"),
                pay(30, "Saburo", "USD"),
            ],
        ),
        (
            "Pay 5 EUR to Ann, 6 to Ben, and $7 to Cy.",
            vec![
                pay(5, "Ann", "EUR"),
                pay(6, "Ben", "EUR"),
                pay(7, "Cy", "USD"),
            ],
        ),
        // A verb of its own starts afresh: USD unless it says.
        (
            "Send 10 EUR to Taro and pay 20 to Jiro",
            vec![pay(10, "Taro", "EUR"), pay(20, "Jiro", "USD")],
        ),
        // Pieces that start no call stay with the clause before them.
        (
            "Send 5 USD to Tom and Jerry, 6 USD to Bob",
            vec![pay(5, "Tom and Jerry", "USD"), pay(6, "Bob", "USD")],
        ),
        ("weather in Paris, France", vec![weather("Paris, France")]),
        (
            "weather in Rome, and send 3 USD to Al, please",
            vec![weather("Rome"), pay(3, "Al, please", "USD")],
        ),
        // Without a payment before it, `20 USD to Jiro` is no call.
        (
            "weather in Oslo and 20 USD to Jiro",
            vec![weather("Oslo and 20 USD to Jiro")],
        ),
    ];
    for (text, want) in cases {
        assert_eq!(&calls(text), want, "{text}");
    }
    assert_eq!(
        calls(r#"use get_location with {"a": 1, "b": [2, 3]} and weather in Oslo"#),
        vec![
            ("get_location".to_owned(), json!({"a": 1, "b": [2, 3]})),
            weather("Oslo")
        ]
    );
    // A long list is read, but not split past MAX_CLAUSES pieces.
    let long = format!("Send 1 USD to A{}", ", 1 USD to B".repeat(MAX_CLAUSES + 10));
    assert_eq!(calls(&long).len(), MAX_CLAUSES);
    // Nor is one too long to re-read: it is one clause.
    let huge = format!("Send 1 USD to A{}", ", 1 USD to B".repeat(MAX_SPLIT_BYTES));
    assert_eq!(calls(&huge).len(), 1);
}

#[test]
fn use_calls_an_offered_tool_by_name() {
    assert_eq!(
        calls("Use get_location"),
        vec![("get_location".to_owned(), json!({}))]
    );
    assert_eq!(
        calls(r#"use get_location with {"precision": "city"} and weather in Oslo"#),
        vec![
            ("get_location".to_owned(), json!({"precision": "city"})),
            ("get_weather".to_owned(), json!({"city": "Oslo"}))
        ]
    );
    // A tool that is not offered, or arguments that are not JSON, are just text.
    for text in ["use rm_rf", "use get_location with {oops}"] {
        let echo = Plan::Text(format!("You said: {text}"));
        assert_eq!(plan_for_text(text, OFFERED), echo, "{text}");
    }
}

#[test]
fn count_echo_and_limits() {
    let cases = [
        ("count to 3", Plan::Count(3)),
        ("Count to 100000", Plan::Count(100_000)),
        (
            "count to 100001",
            Plan::Text("I can count from 1 to 100000.".into()),
        ),
        ("hello there", Plan::Text("You said: hello there".into())),
    ];
    for (text, plan) in cases {
        assert_eq!(plan_for_text(text, OFFERED), plan, "{text}");
    }
}

#[test]
fn count_read_by_hand() {
    let cases = [
        ("count to 3", Some("3")),
        ("please COUNT  TO\t42 now", Some("42")),
        ("recount to 3", None),
        ("_count to 3", None),
        ("écount to 3", None),
        ("(count to 3)", Some("3")),
        ("count to", None),
        ("count to x", None),
        ("count to 12a", None),
        ("count to 12_", None),
        ("count to 7!", Some("7")),
        ("countto 3", None),
        ("count tox 3", None),
        ("count to3", None),
        ("count on me, count to 5", Some("5")),
        ("count to 1 and count to 2", Some("1")),
        ("count\u{a0}to 9", Some("9")),
        ("", None),
    ];
    for (text, n) in cases {
        assert_eq!(count_to(text), n, "{text:?}");
    }
}

#[test]
fn only_text_that_may_name_a_word_goes_to_the_patterns() {
    let cases = [
        ("send 5 to Bob", &["send", "pay"][..], true),
        ("SEND 5", &["send"][..], true),
        ("count to 100", &["send", "pay", "transfer"][..], false),
        ("count to 100", &[",", "and"][..], false),
        ("a, b", &[",", "and"][..], true),
        ("Sand", &["and"][..], true),
        // Not ASCII: Unicode's folding is the patterns' to judge.
        ("ſend 5 to Bob", &["send"][..], true),
        ("", &["use"][..], false),
    ];
    for (text, words, may) in cases {
        assert_eq!(may_name(text, words), may, "{text:?} {words:?}");
    }
    // Let through, it is the patterns' to read: they fold `ſ` to `s`.
    let sent = calls("ſend 5 to Bob");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].1["recipient"], "Bob");
}

/// Each plan's events, in order, with the usage the finish reports.
#[tokio::test]
async fn streams_each_plan() {
    let events = |text: &str| {
        // A fresh model a request, so every plan's first call is `call-1`.
        let model = ScriptedModel::new(Ids::sequential());
        let request = ModelRequest {
            messages: vec![ModelMessage::User(vec![UserContent::Text(text.into())])],
            tools: std::sync::Arc::from([crate::call::ToolSpec {
                name: "get_weather".into(),
                description: String::new(),
                parameters: json!({}),
            }]),
        };
        model.stream(request).map(Result::ok).collect::<Vec<_>>()
    };
    let finish = |reason, output_tokens| ProviderEvent::Finish {
        reason,
        usage: Usage {
            input_tokens: 1,
            output_tokens,
        },
    };
    let text = |t: &str| Some(ProviderEvent::TextDelta(t.into()));
    assert_eq!(
        events("count to 3").await,
        [
            text("1"),
            text(" 2"),
            text(" 3"),
            Some(finish(StopReason::Stop, 3))
        ]
    );
    // A slow model pauses before each delta and streams the same events.
    let slow = ScriptedModel::new(Ids::sequential()).with_delta_delay(Duration::from_millis(1));
    let request = ModelRequest {
        messages: vec![ModelMessage::User(vec![UserContent::Text(
            "count to 2".into(),
        )])],
        tools: std::sync::Arc::from([]),
    };
    assert_eq!(
        slow.stream(request)
            .map(Result::ok)
            .collect::<Vec<_>>()
            .await,
        [text("1"), text(" 2"), Some(finish(StopReason::Stop, 2))]
    );
    assert_eq!(
        events("hi  there").await,
        [
            text("You"),
            text(" said:"),
            text(" hi"),
            text("  there"),
            Some(finish(StopReason::Stop, 4))
        ]
    );
    let id = || "call-1".to_owned();
    let delta = |d: &str| {
        Some(ProviderEvent::ToolCallDelta {
            id: id(),
            delta: d.into(),
        })
    };
    assert_eq!(
        events("weather in Paris").await,
        [
            Some(ProviderEvent::ToolCallStart {
                id: id(),
                name: "get_weather".into(),
                metadata: None,
            }),
            delta("{\"city"),
            delta("\":\"Par"),
            delta("is\"}"),
            Some(ProviderEvent::ToolCallEnd { id: id() }),
            Some(finish(StopReason::ToolCalls, 3)),
        ]
    );
}

#[test]
fn words_and_fragments() {
    for (rest, first) in [
        ("You said:  hi", "You"),
        ("  hi there", "  hi"),
        (" \t", " \t"),
        ("", ""),
    ] {
        assert_eq!(word(rest), first, "{rest:?}");
    }
    assert_eq!(
        fragments("{\"a\":\"花子\"}", 3).concat(),
        "{\"a\":\"花子\"}"
    );
    assert_eq!(fragments("ab", 3), ["a", "b"]);
}

#[test]
fn sentences_per_outcome() {
    let result = |outcome| ToolResult {
        call_id: "c".into(),
        tool_name: "process_payment".into(),
        outcome,
    };
    assert_eq!(
        sentence(&result(ResultContent::Output(
            json!({"transactionId":"tx-1","amount":50,"recipient":"Hanako","currency":"USD"})
        ))),
        "Sent 50 USD to Hanako (transaction tx-1)."
    );
    assert_eq!(
        sentence(&result(ResultContent::Denied {
            reason: Some("too much".into())
        })),
        "The process_payment call was denied: too much."
    );
    assert_eq!(
        sentence(&result(ResultContent::Error("amount must be > 0".into()))),
        "The process_payment call failed: amount must be > 0."
    );
}
