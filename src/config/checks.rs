//! The checks of single sections that [`Settings::new`](super::Settings::new)
//! runs: each reads its keys into what the app uses, or names the bad key.

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroU32;
use std::time::Duration;

use crate::call::QualifiedName;
use crate::faces::{ApiKey, OidcSettings};
use crate::identity::Verified;
use crate::notify::MIN_KEY_BYTES;
use crate::policy::ToolRule;
use crate::protocol::{ClientVersion, ConfirmationProtocol};
use crate::store::Rates;
use crate::tools::Registry;
use crate::tools::client::ClientTool;

use super::{
    ApiKeyConfig, AuthConfig, Config, ConfigError, LimitsConfig, McpConfig, OidcConfig, ToolsConfig,
};

/// Each `approverIdentity` (a tool's, an escalation's) one some caller
/// can have with this `auth`: else nobody could ever approve the tool.
pub(super) fn approver_identity(
    tools: &BTreeMap<String, ToolRule>,
    auth: &AuthConfig,
) -> Result<(), ConfigError> {
    let oidc = auth.oidc.is_some();
    let keys = oidc || !auth.api_keys.is_empty();
    let header = keys || auth.principal_header.is_some();
    for (name, rule) in tools {
        let asked = std::iter::once((String::new(), rule.approver_identity)).chain(
            rule.escalate
                .iter()
                .enumerate()
                .map(|(i, e)| (format!(".escalate[{i}]"), e.approver_identity)),
        );
        for (place, least) in asked {
            let (reachable, needs) = match least {
                None => continue,
                Some(Verified::Oidc) => (oidc, "auth.oidc"),
                Some(Verified::Key) => (keys, "auth.apiKeys or auth.oidc"),
                Some(Verified::ProxyHeader) => {
                    (header, "auth.principalHeader, auth.apiKeys or auth.oidc")
                }
            };
            if !reachable {
                return Err(ConfigError::invalid(
                    format!("toolConfirmation.tools.{name}{place}.approverIdentity"),
                    format!("needs {needs}: without it nobody could approve this tool"),
                ));
            }
        }
    }
    Ok(())
}

/// `limits`, each a whole number from 1.
pub(super) fn rates(limits: &LimitsConfig) -> Result<Rates, ConfigError> {
    let positive = |value: i64, key: &str| {
        u32::try_from(value)
            .ok()
            .and_then(NonZeroU32::new)
            .ok_or_else(|| {
                ConfigError::value(
                    format!("limits.{key}"),
                    value,
                    format!(
                        "a whole number from 1 to {} (leave it out for no limit)",
                        u32::MAX
                    ),
                )
            })
    };
    let optional = |value: Option<i64>, key: &str| value.map(|v| positive(v, key)).transpose();
    let mut tools = BTreeMap::new();
    for (name, limit) in &limits.tools {
        let key = format!("tools.{name}.callsPerMinute");
        let n = positive(limit.calls_per_minute, &key)?;
        if tools
            .insert(QualifiedName::of(name), (name.clone(), n))
            .is_some()
        {
            return Err(ConfigError::invalid(
                "limits.tools",
                format!("`{name}` is named twice (by name and by qualified name)"),
            ));
        }
    }
    Ok(Rates {
        turns_per_minute: optional(limits.turns_per_minute, "turnsPerMinute")?,
        tool_calls_per_minute: optional(limits.tool_calls_per_minute, "toolCallsPerMinute")?,
        concurrent_streams: optional(limits.concurrent_streams, "concurrentStreams")?,
        tools,
    })
}

/// `protocol.clientVersion`, read (unset: the newest release known), and
/// able to speak `toolConfirmation.protocol`.
pub(super) fn client_version(config: &Config) -> Result<ClientVersion, ConfigError> {
    let client = match &config.protocol.client_version {
        Some(text) => text.parse().map_err(ConfigError::ClientVersion)?,
        None => ClientVersion::LATEST,
    };
    if config.tool_confirmation.protocol == ConfirmationProtocol::AiSdk && !client.has_approvals() {
        return Err(ConfigError::invalid(
            "toolConfirmation.protocol",
            format!("ai-sdk needs ai 6 or later, but protocol.clientVersion is {client}; use adk"),
        ));
    }
    Ok(client)
}

/// The built-in tools, the HTTP tools and the client-side tools.
pub(super) fn registry(tools: &ToolsConfig) -> Result<Registry, ConfigError> {
    let mut registry =
        Registry::from_config(tools.payment_limit, &tools.http).map_err(ConfigError::HttpTool)?;
    for tool in &tools.client {
        registry.register(ClientTool::new(tool.clone()).map_err(ConfigError::ClientTool)?);
    }
    Ok(registry)
}

/// Each API key: its principal, SHA-256, and whether it is an operator's.
pub(super) fn api_keys(keys: &[ApiKeyConfig]) -> Result<Vec<ApiKey>, ConfigError> {
    use sha2::Digest;
    keys.iter()
        .map(|key| {
            let bad = |why: String| {
                ConfigError::invalid(format!("auth.apiKeys ({})", key.principal), why)
            };
            let hash: [u8; 32] = match (&key.sha256, &key.key_env) {
                (Some(hex_hash), None) => hex::decode(hex_hash)
                    .ok()
                    .and_then(|h| h.try_into().ok())
                    .ok_or_else(|| bad("sha256 must be 64 hex digits".into()))?,
                (None, Some(name)) => {
                    let key = std::env::var(name)
                        .map_err(|_| bad(format!("environment variable {name} is not set")))?;
                    if key.is_empty() {
                        return Err(bad(format!("environment variable {name} is empty")));
                    }
                    sha2::Sha256::digest(key.as_bytes()).into()
                }
                _ => return Err(bad("give exactly one of sha256 and keyEnv".into())),
            };
            if key.principal.is_empty() {
                return Err(bad("principal is empty".into()));
            }
            Ok(ApiKey {
                principal: key.principal.clone(),
                sha256: hash,
                admin: key.admin,
            })
        })
        .collect()
}

/// `auth.oidc`: its URLs fetchable, its claims named, its waits in bounds.
pub(super) fn oidc(oidc: Option<&OidcConfig>) -> Result<Option<OidcSettings>, ConfigError> {
    let Some(o) = oidc else {
        return Ok(None);
    };
    let url = |key: &str, url: &str| {
        crate::faces::checked_url(url).map_err(|why| ConfigError::value(key, url, why))
    };
    url("auth.oidc.issuer", &o.issuer)?;
    if let Some(uri) = &o.jwks_uri {
        url("auth.oidc.jwksUri", uri)?;
    }
    let named = |key: &str, value: &str| {
        if value.trim().is_empty() {
            Err(ConfigError::value(
                key,
                "\"\"",
                "a claim's or an audience's name",
            ))
        } else {
            Ok(())
        }
    };
    named("auth.oidc.audience", &o.audience)?;
    named("auth.oidc.principalClaim", &o.principal_claim)?;
    named("auth.oidc.groupsClaim", &o.groups_claim)?;
    for (role, groups) in &o.roles {
        if role.is_empty() || groups.iter().any(String::is_empty) {
            let why = "a role's name and its groups' names, none empty";
            return Err(ConfigError::invalid(format!("auth.oidc.roles.{role}"), why));
        }
    }
    if o.leeway_secs > 300 {
        let why = "at most 300 (a token's times are checked within minutes)";
        return Err(ConfigError::value(
            "auth.oidc.leewaySecs",
            o.leeway_secs,
            why,
        ));
    }
    if !(1..=3_600).contains(&o.jwks_refetch_secs) {
        let why = "a whole number from 1 to 3600";
        return Err(ConfigError::value(
            "auth.oidc.jwksRefetchSecs",
            o.jwks_refetch_secs,
            why,
        ));
    }
    Ok(Some(OidcSettings {
        issuer: o.issuer.clone(),
        audience: o.audience.clone(),
        jwks_uri: o.jwks_uri.clone(),
        principal_claim: o.principal_claim.clone(),
        groups_claim: o.groups_claim.clone(),
        roles: o.roles.clone(),
        leeway: Duration::from_secs(o.leeway_secs),
        refetch: Duration::from_secs(o.jwks_refetch_secs),
    }))
}

/// Each principal's roles, from `auth.roles` and the keys' `roles`.
pub(super) fn roles(auth: &AuthConfig) -> HashMap<String, Vec<String>> {
    let mut roles: HashMap<String, Vec<String>> = HashMap::new();
    let by_role = auth
        .roles
        .iter()
        .flat_map(|(role, principals)| principals.iter().map(move |p| (p.clone(), role.clone())));
    let by_key = auth.api_keys.iter().flat_map(|key| {
        key.roles
            .iter()
            .map(|role| (key.principal.clone(), role.clone()))
    });
    for (principal, role) in by_role.chain(by_key) {
        let held = roles.entry(principal).or_default();
        if !held.contains(&role) {
            held.push(role);
        }
    }
    roles
}

/// The signing keys, with `env:NAME` entries read from the environment;
/// each of at least [`MIN_KEY_BYTES`] bytes. An error names the key by
/// its place (and variable), never its value.
pub(super) fn signing_keys(keys: &[String]) -> Result<Vec<String>, ConfigError> {
    keys.iter()
        .enumerate()
        .map(|(i, key)| {
            let place = format!("toolConfirmation.signingKeys[{}]", i + 1);
            let (key, named) = match key.strip_prefix("env:") {
                Some(name) => {
                    let key = std::env::var(name).map_err(|_| {
                        ConfigError::invalid(
                            &place,
                            format!("environment variable {name} is not set"),
                        )
                    })?;
                    (key, format!("{place} (environment variable {name})"))
                }
                None => (key.clone(), place),
            };
            if key.len() < MIN_KEY_BYTES {
                return Err(ConfigError::ShortKey {
                    key: named,
                    min: MIN_KEY_BYTES,
                });
            }
            Ok(key)
        })
        .collect()
}

/// `audit.signingKey`: the key read from its file or environment
/// variable. An error names where it was looked for, never its value.
pub(super) fn audit_key(
    audit: &super::AuditConfig,
) -> Result<Option<crate::store::chain::AuditKey>, ConfigError> {
    const KEY: &str = "audit.signingKey";
    let Some(place) = &audit.signing_key else {
        return Ok(None);
    };
    let (text, from) = match place.strip_prefix("env:") {
        Some(name) => (
            std::env::var(name).map_err(|_| {
                ConfigError::invalid(KEY, format!("environment variable {name} is not set"))
            })?,
            format!("environment variable {name}"),
        ),
        None => (
            std::fs::read_to_string(place).map_err(|e| {
                ConfigError::invalid(KEY, format!("cannot read the file {place}: {e}"))
            })?,
            format!("the file {place}"),
        ),
    };
    crate::store::chain::AuditKey::parse(&text)
        .map(Some)
        .map_err(|e| ConfigError::invalid(KEY, format!("{from}: {e}")))
}

/// `store.auditRetentionDays` (default 90).
pub(super) fn retention(days: Option<u64>) -> Duration {
    Duration::from_secs(days.unwrap_or(90).saturating_mul(24 * 60 * 60))
}

/// `mcp`: its waits within their bounds; stdio's principal, from `env`
/// (`TOOLGATE_MCP_PRINCIPAL`) before the file, never empty.
pub(super) fn mcp(mcp: &McpConfig, env: Option<String>) -> Result<Option<String>, ConfigError> {
    if mcp.retry_wait_ms > 60_000 {
        let why = "at most 60000 (a retry is answered within a minute)";
        return Err(ConfigError::value(
            "mcp.retryWaitMs",
            mcp.retry_wait_ms,
            why,
        ));
    }
    if !(1..=3_600).contains(&mcp.hold_seconds) {
        let why = "a whole number from 1 to 3600";
        return Err(ConfigError::value("mcp.holdSeconds", mcp.hold_seconds, why));
    }
    if mcp.max_sessions_per_user == 0 || mcp.max_sessions < mcp.max_sessions_per_user {
        let why = "at least 1, and at most `mcp.maxSessions`";
        return Err(ConfigError::value(
            "mcp.maxSessionsPerUser",
            mcp.max_sessions_per_user,
            why,
        ));
    }
    let principal = env
        .filter(|p| !p.is_empty())
        .or_else(|| mcp.principal.clone());
    if principal.as_deref().is_some_and(|p| p.trim().is_empty()) {
        let why = "a principal's name (leave it out for `anonymous`)";
        return Err(ConfigError::value("mcp.principal", "\"\"", why));
    }
    Ok(principal)
}
