use super::*;

fn n(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
}

fn rates() -> Rates {
    Rates {
        turns_per_minute: Some(n(2)),
        tool_calls_per_minute: Some(n(3)),
        concurrent_streams: None,
        tools: [(QualifiedName::of("pay"), ("pay".to_owned(), n(1)))].into(),
    }
}

fn limit_of(result: Result<(), LimitError>) -> Option<(Limit, u64)> {
    match result {
        Ok(()) => None,
        Err(LimitError::Limited(l)) => Some((l.limit.clone(), l.retry_after_secs())),
        Err(LimitError::Store(e)) => panic!("{e}"),
    }
}

#[tokio::test]
async fn a_burst_of_n_then_a_wait_per_principal() {
    let limiter = Limiter::local(rates());
    assert_eq!(limit_of(limiter.turn("a").await), None);
    assert_eq!(limit_of(limiter.turn("a").await), None);
    let refused = limit_of(limiter.turn("a").await);
    // One more every 30 s.
    assert!(
        matches!(refused, Some((Limit::TurnsPerMinute, 29..=30))),
        "{refused:?}"
    );
    assert_eq!(limit_of(limiter.turn("b").await), None, "b has its own");
}

#[tokio::test]
async fn a_tool_limit_is_the_tools_and_counts_after_the_principals() {
    let limiter = Limiter::local(rates());
    assert_eq!(limit_of(limiter.tool_call("a", "pay").await), None);
    let tool = limit_of(limiter.tool_call("b", "internal--pay").await);
    assert!(
        matches!(&tool, Some((Limit::Tool(name), 59..=60)) if name == "pay"),
        "{tool:?}"
    );
    // Other tools: only the principal's limit, which `pay` counted for.
    assert_eq!(limit_of(limiter.tool_call("a", "weather").await), None);
    assert_eq!(limit_of(limiter.tool_call("a", "weather").await), None);
    assert_eq!(
        limit_of(limiter.tool_call("a", "weather").await).map(|(l, _)| l),
        Some(Limit::ToolCallsPerMinute)
    );
    assert_eq!(limit_of(limiter.tool_call("b", "weather").await), None);
}

#[tokio::test]
async fn no_limits_admit_everything() {
    let limiter = Limiter::local(Rates::default());
    for _ in 0..100 {
        assert_eq!(limit_of(limiter.turn("a").await), None);
        assert_eq!(limit_of(limiter.tool_call("a", "pay").await), None);
    }
}

#[test]
fn retry_after_is_whole_seconds_at_least_one() {
    let after = |ms| Limited {
        limit: Limit::TurnsPerMinute,
        retry_after: Duration::from_millis(ms),
    };
    assert_eq!(after(0).retry_after_secs(), 1);
    assert_eq!(after(1).retry_after_secs(), 1);
    assert_eq!(after(1000).retry_after_secs(), 1);
    assert_eq!(after(1001).retry_after_secs(), 2);
    assert_eq!(after(29_500).retry_after_secs(), 30);
}
