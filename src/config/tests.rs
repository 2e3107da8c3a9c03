use std::num::NonZeroU32;
use std::time::Duration;

use super::*;
use crate::faces::LiveDialect;
use crate::protocol::{ClientVersion, DeniedAs};
use crate::store::Rates;

#[test]
fn every_field_is_optional() {
    assert_eq!(Config::from_yaml("").ok(), Some(Config::default()));
    assert_eq!(Config::from_yaml("{}").ok(), Some(Config::default()));
    let config =
        Config::from_yaml("stream:\n  keepAliveSecs: 3\ntoolConfirmation:\n  expirySecs: 60\n");
    let Ok(config) = config else {
        panic!("{config:?}")
    };
    assert_eq!(config.stream.keep_alive_secs, 3);
    assert_eq!(config.stream.max_steps, 8);
    assert_eq!(config.tool_confirmation.expiry_secs, 60);
}

#[test]
fn native_approvals_need_a_client_that_has_them() {
    let settings = Settings::from_yaml(
        "toolConfirmation: {protocol: ai-sdk}\nprotocol: {clientVersion: '6.0.0'}\n",
    );
    assert_eq!(
        settings.ok().map(|s| s.client_version),
        Some(ClientVersion::new(6, 0, 0))
    );
    let err = Settings::from_yaml(
        "toolConfirmation: {protocol: ai-sdk}\nprotocol: {clientVersion: '5.0.216'}\n",
    );
    assert_eq!(
        err.err().map(|e| e.to_string()),
        Some("invalid config: toolConfirmation.protocol: ai-sdk needs ai 6 or later, but protocol.clientVersion is 5.0.216; use adk".into())
    );
}

#[test]
fn client_versions_are_read_or_named() {
    let version = |yaml: &str| Settings::from_yaml(yaml).map(|s| s.client_version);
    assert_eq!(
        version("protocol: {clientVersion: '6.0.0-beta.148'}\n").ok(),
        Some(ClientVersion::new(6, 0, 0))
    );
    assert_eq!(
        version(
            "toolConfirmation: {protocol: ai-sdk}\nprotocol: {clientVersion: 6.0.0-beta.148}\n"
        )
        .ok(),
        Some(ClientVersion::new(6, 0, 0))
    );
    assert_eq!(version("").ok(), Some(ClientVersion::LATEST));
    for bad in ["6.0.0-beta.01", "6.0-beta.1", "six", "6.0.0+"] {
        let err = version(&format!("protocol: {{clientVersion: '{bad}'}}\n"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert_eq!(
            err,
            format!(
                "invalid config: protocol.clientVersion: `{bad}` is not an ai version (expected e.g. 7.0.173, 6.0, 7 or 6.0.0-beta.148)"
            )
        );
    }
}

#[test]
fn denials_end_as_configured() {
    let denied_as = |yaml: &str| Config::from_yaml(yaml).map(|c| c.tool_confirmation.denied_as);
    assert_eq!(denied_as("").ok(), Some(DeniedAs::OutputDenied));
    assert_eq!(
        denied_as("toolConfirmation: {deniedAs: output-error}\n").ok(),
        Some(DeniedAs::OutputError)
    );
    assert_eq!(
        denied_as("toolConfirmation: {deniedAs: output-denied}\n").ok(),
        Some(DeniedAs::OutputDenied)
    );
    let err = denied_as("toolConfirmation: {deniedAs: error}\n")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains("toolConfirmation.deniedAs") && err.contains("unknown variant `error`"),
        "{err}"
    );
}

/// The error the config `yaml` makes, if any.
fn error(yaml: &str) -> Option<String> {
    Settings::from_yaml(yaml).err().map(|e| e.to_string())
}

#[test]
fn a_model_needs_a_name_and_sane_timeouts() {
    assert_eq!(
        error("model: {provider: openai}"),
        Some("invalid config: model.model: provider openai needs a model name".into())
    );
    for (secs, read) in [
        ("0", "0.0"),
        ("-1", "-1.0"),
        ("1e300", "1e300"),
        (".nan", "NaN"),
    ] {
        let yaml = format!("model: {{provider: openai, model: m, readTimeoutSecs: {secs}}}");
        assert_eq!(
            error(&yaml),
            Some(format!(
                "invalid config: model.readTimeoutSecs must be a positive number of seconds, not {read}"
            )),
            "{secs}"
        );
    }
    let named = "model: {provider: anthropic, model: m, apiKeyEnv: TOOLGATE_SURELY_UNSET_KEY}";
    assert!(error(named).is_some_and(|e| e.contains("TOOLGATE_SURELY_UNSET_KEY")));
}

#[test]
fn any_host_or_origin_needs_api_keys() {
    assert_eq!(
        error("server: {allowedHosts: ['*']}"),
        Some("invalid config: `*` in server.allowedHosts needs auth.apiKeys: without keys, any web page could act through toolgate".into())
    );
    assert!(error("cors: {allowedOrigins: ['*']}").is_some());
    let keyed = "auth: {apiKeys: [{principal: a, sha256: '0000000000000000000000000000000000000000000000000000000000000000'}]}\n";
    assert_eq!(
        error(&format!("{keyed}server: {{allowedHosts: ['*']}}")),
        None
    );
    assert_eq!(
        error("server: {allowedHosts: ['https://x.example']}"),
        Some("invalid config: server.allowedHosts: `https://x.example` is not a host name or IP address (no scheme, port or path)".into())
    );
    let settings = Settings::from_yaml(
        "server: {allowedHosts: [toolgate.example.com], headerReadSecs: 2}\ncors: {allowedOrigins: ['https://app.example.com']}\n",
    );
    let Ok(settings) = settings else {
        panic!("{:?}", settings.err())
    };
    assert_eq!(settings.server.header_read, Duration::from_secs(2));
    assert_eq!(settings.server.body_read, Duration::from_secs(30));
    assert_eq!(settings.server.drain, Duration::from_secs(30));
    let drain = Settings::from_yaml("server: {drainSecs: 5}\n").map(|s| s.server.drain);
    assert_eq!(drain.ok(), Some(Duration::from_secs(5)));
}

#[test]
fn the_live_dialect_is_named() {
    let dialect = |yaml: &str| Config::from_yaml(yaml).map(|c| c.live.dialect).ok();
    assert_eq!(dialect(""), Some(LiveDialect::AiSdk));
    assert_eq!(
        dialect("live: {dialect: adk-stream-protocol}"),
        Some(LiveDialect::AdkStreamProtocol)
    );
    assert_eq!(dialect("live: {dialect: ai-sdk}"), Some(LiveDialect::AiSdk));
    assert_eq!(dialect("live: {dialect: bidi}"), None);
    let err = Config::from_yaml("live: {idleSecs: 3}")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("unknown field `idleSecs`"), "{err}");
}

#[test]
fn limits_are_positive_and_name_a_tool_once() {
    let rates = |yaml: &str| Settings::from_yaml(yaml).map(|s| s.rates);
    let error = |yaml: &str| rates(yaml).err().map(|e| e.to_string());
    let Ok(read) = rates(
        "limits: {turnsPerMinute: 2, concurrentStreams: 1, tools: {process_payment: {callsPerMinute: 3}, mcp--s--x: {callsPerMinute: 4}}}",
    ) else {
        panic!("limits did not read")
    };
    assert_eq!(read.turns_per_minute.map(NonZeroU32::get), Some(2));
    assert_eq!(read.concurrent_streams.map(NonZeroU32::get), Some(1));
    assert_eq!(read.tool_calls_per_minute, None);
    let tools: Vec<(&str, &str, u32)> = read
        .tools
        .iter()
        .map(|(q, (name, n))| (q.as_str(), name.as_str(), n.get()))
        .collect();
    assert_eq!(
        tools,
        [
            ("internal--process_payment", "process_payment", 3),
            ("mcp--s--x", "mcp--s--x", 4)
        ]
    );
    assert_eq!(rates("").ok(), Some(Rates::default()));
    for (yaml, key, value) in [
        ("limits: {turnsPerMinute: 0}", "turnsPerMinute", "0"),
        (
            "limits: {toolCallsPerMinute: -1}",
            "toolCallsPerMinute",
            "-1",
        ),
        (
            "limits: {concurrentStreams: 5000000000}",
            "concurrentStreams",
            "5000000000",
        ),
        (
            "limits: {tools: {pay: {callsPerMinute: 0}}}",
            "tools.pay.callsPerMinute",
            "0",
        ),
    ] {
        assert_eq!(
            error(yaml),
            Some(format!(
                "invalid config: limits.{key} must be a whole number from 1 to 4294967295 (leave it out for no limit), not {value}"
            )),
            "{yaml}"
        );
    }
    assert_eq!(
        error("limits: {tools: {pay: {callsPerMinute: 1}, internal--pay: {callsPerMinute: 2}}}"),
        Some(
            "invalid config: limits.tools: `pay` is named twice (by name and by qualified name)"
                .into()
        )
    );
    assert!(error("limits: {turnsPerMinute: 1.5}").is_some_and(|e| e.contains("turnsPerMinute")),);
    assert!(error("limits: {tools: {pay: {}}}").is_some_and(|e| e.contains("callsPerMinute")),);
}

#[test]
fn unknown_keys_are_named() {
    let err = Config::from_yaml("stream:\n  keepAlive: 3\n")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("unknown field `keepAlive`"), "{err}");
    let err = Config::from_yaml("modle: {}\n")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("unknown field `modle`"), "{err}");
}

#[test]
fn a_sensitive_pointer_is_checked_and_named() {
    assert_eq!(
        error("toolConfirmation: {tools: {pay: {sensitive: [/card/number, account]}}}"),
        Some(
            "invalid config: toolConfirmation: `tools.pay.sensitive`: `account` is not a JSON pointer to an argument: it must start with `/`"
                .into()
        )
    );
    assert!(error("toolConfirmation: {tools: {pay: {sensitive: ['']}}}").is_some());
    let fine = "toolConfirmation: {redaction: {defaults: false, keys: [iban]}, tools: {pay: {sensitive: [/a~1b/0]}}}";
    assert_eq!(error(fine), None);
}
