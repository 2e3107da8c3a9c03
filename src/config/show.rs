//! The effective settings, one `key: value` a line, as `toolgate config
//! check` prints them. Secrets are never printed: an API key, a signing
//! key or a model's key shows as `[redacted]`, a Redis URL's password as
//! `***`.

use std::fmt::{self, Display, Formatter};
use std::time::Duration;

use super::{Settings, StoreBackend};

const REDACTED: &str = "[redacted]";

impl StoreBackend {
    /// What the store is, with a URL's credentials hidden.
    pub fn describe(&self) -> String {
        match self {
            Self::Memory => "memory (nothing survives a restart)".to_owned(),
            Self::Sqlite { path } => format!("sqlite at {}", path.display()),
            Self::Redis { url, key_prefix } => {
                let shown = match (url.find("://"), url.rfind('@')) {
                    (Some(scheme), Some(at)) if at > scheme => {
                        format!("{}***{}", &url[..scheme + 3], &url[at..])
                    }
                    _ => url.clone(),
                };
                format!("redis at {shown}, keys {key_prefix}*")
            }
        }
    }
}

impl Display for Settings {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let secs = |d: Duration| d.as_secs_f64();
        let mut line = |key: &str, value: &dyn Display| writeln!(f, "{key}: {value}");
        let bind = self
            .bind
            .map_or("127.0.0.1:8080".to_owned(), |b| b.to_string());
        line("bind", &bind)?;
        let m = &self.model;
        line(
            "model.provider",
            &format!("{:?}", m.provider).to_lowercase(),
        )?;
        if let Some((upstream, options)) = &m.upstream {
            line("model.model", &options.model)?;
            line("model.baseUrl", &upstream.url(""))?;
        }
        line("model.deltaDelayMs", &m.delta_delay.as_millis())?;
        let s = &self.stream;
        line("stream.keepAliveSecs", &secs(s.keep_alive))?;
        line("stream.maxBodyBytes", &s.max_body_bytes)?;
        line("stream.maxSteps", &s.max_steps)?;
        line("stream.maxTurnsPerUser", &s.max_turns_per_user)?;
        line("stream.maxTurns", &s.max_turns)?;
        line("stream.stalledReaderSecs", &secs(s.stalled_reader))?;
        line("stream.heldTurnSecs", &secs(s.held_turn))?;
        line("stream.liveIdleSecs", &secs(self.live.idle))?;
        line("stream.liveFramesPerSec", &self.live.frames_per_sec)?;
        line(
            "stream.maxInboxStreamsPerUser",
            &s.max_inbox_streams_per_user,
        )?;
        line("stream.maxInboxStreams", &s.max_inbox_streams)?;
        line("live.dialect", &format!("{:?}", self.live.dialect))?;
        line("live.keyDeadlineSecs", &secs(self.live.key_deadline))?;
        line("live.keylessFrameBytes", &self.live.keyless_frame_bytes)?;
        let tools: Vec<&str> = self.registry.iter().map(|t| t.name()).collect();
        line("tools", &tools.join(", "))?;
        line("tools.timeoutMs", &self.tool_timeout.as_millis())?;
        let servers: Vec<&str> = self.mcp_servers.iter().map(|s| s.name()).collect();
        line("mcpServers", &servers.join(", "))?;
        let c = &self.confirmation;
        line("toolConfirmation.protocol", &format!("{:?}", c.protocol))?;
        line("toolConfirmation.flow", &format!("{:?}", c.flow))?;
        line("toolConfirmation.deniedAs", &format!("{:?}", c.denied_as))?;
        line("toolConfirmation.mode", &format!("{:?}", c.mode))?;
        line("toolConfirmation.windowSecs", &secs(c.window))?;
        line(
            "toolConfirmation.allowedToolsStorage",
            &format!("{:?}", c.allowed_tools_storage),
        )?;
        let keys = vec![REDACTED; self.signing_keys.len()];
        line(
            "toolConfirmation.signingKeys",
            &format!("[{}]", keys.join(", ")),
        )?;
        line("toolConfirmation.notify", &self.notify.is_some())?;
        let a = &self.auth;
        line("auth.principalHeader", &format!("{:?}", a.principal_header))?;
        for key in &a.api_keys {
            let admin = if key.admin { " (admin)" } else { "" };
            line(
                "auth.apiKeys",
                &format!("{}{admin}: {REDACTED}", key.principal),
            )?;
        }
        let mut roles: Vec<_> = a.roles.iter().collect();
        roles.sort();
        for (principal, roles) in roles {
            line("auth.roles", &format!("{principal}: {}", roles.join(", ")))?;
        }
        if let Some(o) = &a.oidc {
            let jwks = o.jwks_uri.as_deref().unwrap_or("(discovered)");
            line(
                "auth.oidc",
                &format!(
                    "issuer {}, audience {}, keys {jwks}, principal from `{}`, groups from `{}`",
                    o.issuer, o.audience, o.principal_claim, o.groups_claim
                ),
            )?;
            for (role, groups) in &o.roles {
                line("auth.oidc.roles", &format!("{role}: {}", groups.join(", ")))?;
            }
        }
        line("server", &format!("{:?}", self.server))?;
        line("server.guard", &format!("{:?}", self.guard))?;
        line("store", &self.store.backend.describe())?;
        line(
            "store.auditRetentionDays",
            &(self.store.audit_retention.as_secs() / 86_400),
        )?;
        line("store.maxFollowedTurns", &self.store.followed.total)?;
        line(
            "store.maxFollowedTurnsPerUser",
            &self.store.followed.per_principal,
        )?;
        line(
            "audit.signingKey",
            &match &self.store.audit_key {
                Some(key) => format!("Ed25519 key {}", crate::store::chain::key_id(&key.public())),
                None => "unset: the audit chain is kept unsigned".to_owned(),
            },
        )?;
        line("metrics", &format!("{:?}", self.metrics))?;
        line("limits", &format!("{:?}", self.rates))?;
        line("telemetry", &format!("{:?}", self.telemetry))?;
        line("protocol.clientVersion", &self.client_version)?;
        line("demo.enabled", &self.demo)
    }
}
