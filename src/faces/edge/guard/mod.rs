//! What a browser page may do through toolgate: nothing, unless it is
//! toolgate's own page or an origin the config names.
//!
//! Run on every request before routing and before the API key is looked at:
//! - **Host**: a request must name a host this server serves. A DNS
//!   rebinding page reaches `127.0.0.1` under its own name; refusing that
//!   name keeps it from reading anything.
//! - **Origin**: a state-changing request (POST, PUT, PATCH, DELETE) or a
//!   WebSocket upgrade that a browser sent from another origin, or marked
//!   `Sec-Fetch-Site: cross-site`, is refused. Clients that send no
//!   `Origin` (curl, servers, the `ai` client in Node) are not browsers
//!   acting for a page, and are not affected.
//! - **Content type**: a POST body must be `application/json`. A
//!   `text/plain` POST is a CORS "simple request" that a browser sends
//!   cross-site without asking first; requiring JSON makes every POST
//!   need a preflight, which no page gets past.
//!
//! [`Guard::check`] decides from plain values; [`protect`] is the I/O shell.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, Method, StatusCode, header, uri::Authority};

/// `server.allowedHosts` and `cors.allowedOrigins` entry that allows any.
pub const ANY: &str = "*";

/// Why a request was refused before routing. The texts are fixed: nothing
/// the client sent is repeated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    #[error("this server does not answer to that host name (see server.allowedHosts)")]
    Host,
    #[error("requests from another origin are refused (see cors.allowedOrigins)")]
    Origin,
    #[error("the request body must be JSON (content-type: application/json)")]
    NotJson,
}

impl GuardError {
    pub fn status(self) -> StatusCode {
        match self {
            GuardError::Host => StatusCode::BAD_REQUEST,
            GuardError::Origin => StatusCode::FORBIDDEN,
            GuardError::NotJson => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        }
    }
}

/// A config entry that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardConfigError {
    #[error(
        "server.allowedHosts: `{0}` is not a host name or IP address (no scheme, port or path)"
    )]
    Host(String),
    #[error("cors.allowedOrigins: `{0}` is not an origin like https://app.example.com")]
    Origin(String),
    #[error("`*` in {0} needs auth.apiKeys: without keys, any web page could act through toolgate")]
    AnyWithoutKeys(&'static str),
}

/// Which hosts and origins are served, from the config.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Guard {
    any_host: bool,
    /// Lowercase names, or IPs; `localhost` and loopback are always in.
    hosts: Vec<HostName>,
    any_origin: bool,
    origins: Vec<Origin>,
    /// The address toolgate listens on, when known.
    bind: Option<IpAddr>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostName {
    Name(String),
    Ip(IpAddr),
}

impl HostName {
    /// A host as it appears in a `Host` header without its port:
    /// `example.com`, `10.0.0.5`, `[::1]`.
    fn parse(host: &str) -> Option<Self> {
        if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            return v6.parse::<Ipv6Addr>().ok().map(|ip| Self::Ip(ip.into()));
        }
        if let Ok(ip) = host.parse::<Ipv4Addr>() {
            return Some(Self::Ip(ip.into()));
        }
        let valid = !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_');
        valid.then(|| Self::Name(host.to_ascii_lowercase()))
    }
}

/// `scheme://host[:port]`, lowercase, the scheme's default port left out.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    https: bool,
    host: String,
    port: u16,
}

impl Origin {
    /// An `Origin` header or config entry; `None` for `null` or anything
    /// that is not an http(s) origin.
    fn parse(text: &str) -> Option<Self> {
        let (https, rest) = if let Some(rest) = text.strip_prefix("https://") {
            (true, rest)
        } else {
            (false, text.strip_prefix("http://")?)
        };
        let (host, port) = split_authority(rest, if https { 443 } else { 80 })?;
        Some(Self { https, host, port })
    }
}

/// `host[:port]` → lowercase host and port (`default` when absent).
/// Refuses user info, paths and anything else an authority should not hold.
fn split_authority(text: &str, default: u16) -> Option<(String, u16)> {
    if text.contains(['@', '/', '?', '#']) {
        return None;
    }
    let authority: Authority = text.parse().ok()?;
    HostName::parse(authority.host())?;
    let port = authority.port_u16().unwrap_or(default);
    Some((authority.host().to_ascii_lowercase(), port))
}

impl Guard {
    /// The guard for these `server.allowedHosts` and `cors.allowedOrigins`;
    /// `keys` is whether API keys are configured (`*` needs them).
    pub fn new(hosts: &[String], origins: &[String], keys: bool) -> Result<Self, GuardConfigError> {
        let (any_host, hosts) = listed(
            hosts,
            "server.allowedHosts",
            keys,
            HostName::parse,
            GuardConfigError::Host,
        )?;
        let (any_origin, origins) = listed(
            origins,
            "cors.allowedOrigins",
            keys,
            Origin::parse,
            GuardConfigError::Origin,
        )?;
        Ok(Self {
            any_host,
            hosts,
            any_origin,
            origins,
            bind: None,
        })
    }

    /// Also serves the address toolgate listens on.
    pub fn with_bind(mut self, bind: IpAddr) -> Self {
        self.bind = Some(bind);
        self
    }

    /// Whether a page of `origin` (an `Origin` header's value) is one
    /// `cors.allowedOrigins` names (or any http(s) origin, with `*`).
    /// toolgate's own origin needs no CORS and is not counted.
    pub fn allows_origin(&self, origin: &str) -> bool {
        Origin::parse(&origin.to_ascii_lowercase())
            .is_some_and(|origin| self.any_origin || self.origins.contains(&origin))
    }

    /// Whether any origin besides toolgate's own is allowed.
    pub fn cross_origin(&self) -> bool {
        self.any_origin || !self.origins.is_empty()
    }

    /// Whether a request may go on, from what it says about itself.
    pub fn check(&self, request: &Facts<'_>) -> Result<(), GuardError> {
        let host = request
            .host
            .and_then(|host| split_authority(host, 0))
            .filter(|(host, _)| self.serves(host, request.local))
            .ok_or(GuardError::Host)?;
        let state_changing = matches!(
            *request.method,
            Method::POST | Method::PUT | Method::PATCH | Method::DELETE
        );
        if state_changing || request.upgrade {
            self.check_origin(request, &host)?;
        }
        if *request.method == Method::POST && !request.content_type.is_some_and(is_json) {
            return Err(GuardError::NotJson);
        }
        Ok(())
    }

    fn serves(&self, host: &str, local: Option<IpAddr>) -> bool {
        if self.any_host {
            return true;
        }
        let Some(name) = HostName::parse(host) else {
            return false;
        };
        match &name {
            HostName::Name(name) if name == "localhost" => return true,
            HostName::Ip(ip) if is_standard_loopback(*ip) => return true,
            HostName::Ip(ip) if Some(*ip) == self.bind => return true,
            // Bound to every interface: the address this connection came in on.
            HostName::Ip(ip) if self.bind.is_none_or(|b| b.is_unspecified()) => {
                if Some(*ip) == local {
                    return true;
                }
            }
            HostName::Name(_) | HostName::Ip(_) => {}
        }
        self.hosts.contains(&name)
    }

    /// Whether `host` is a name `server.allowedHosts` lists (or any, with
    /// `*`): one a proxy in front may serve over TLS.
    fn proxied(&self, host: &str) -> bool {
        self.any_host || HostName::parse(host).is_some_and(|name| self.hosts.contains(&name))
    }

    /// Browsers send `Origin` on every state-changing request and upgrade;
    /// only they send `Sec-Fetch-Site`.
    fn check_origin(&self, request: &Facts<'_>, host: &(String, u16)) -> Result<(), GuardError> {
        let origin = match request.origin {
            None => None,
            Some(origin) => {
                Some(Origin::parse(&origin.to_ascii_lowercase()).ok_or(GuardError::Origin)?)
            }
        };
        if let Some(origin) = &origin
            && (self.any_origin || self.origins.contains(origin))
        {
            return Ok(());
        }
        if request
            .fetch_site
            .is_some_and(|site| site.eq_ignore_ascii_case("cross-site"))
        {
            return Err(GuardError::Origin);
        }
        match origin {
            None => Ok(()),
            // toolgate itself speaks plain HTTP: `https` is its own scheme
            // only under a name a proxy forwards (which may add TLS).
            Some(origin) if origin.https && !self.proxied(&host.0) => Err(GuardError::Origin),
            // The request's own `Host`, with the origin's default port when it has none.
            Some(origin) => {
                let default = if origin.https { 443 } else { 80 };
                let port = if host.1 == 0 { default } else { host.1 };
                if origin.host == host.0 && origin.port == port {
                    Ok(())
                } else {
                    Err(GuardError::Origin)
                }
            }
        }
    }
}

/// `127.0.0.1` and `::1`, the loopback addresses a browser's `localhost` uses.
/// A config list that is `*` (anything, only with API keys) or entries
/// `parse` reads (lowercased), `bad` naming one it cannot: whether it is
/// `*`, and the entries.
fn listed<T>(
    items: &[String],
    key: &'static str,
    keys: bool,
    parse: fn(&str) -> Option<T>,
    bad: fn(String) -> GuardConfigError,
) -> Result<(bool, Vec<T>), GuardConfigError> {
    let mut any = false;
    let mut parsed = Vec::with_capacity(items.len());
    for item in items {
        if item == ANY {
            if !keys {
                return Err(GuardConfigError::AnyWithoutKeys(key));
            }
            any = true;
            continue;
        }
        parsed.push(parse(&item.to_ascii_lowercase()).ok_or_else(|| bad(item.clone()))?);
    }
    Ok((any, parsed))
}

fn is_standard_loopback(ip: IpAddr) -> bool {
    ip == IpAddr::V4(Ipv4Addr::LOCALHOST) || ip == IpAddr::V6(Ipv6Addr::LOCALHOST)
}

/// `application/json`, parameters allowed, any case.
fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("application/json")
}

/// What the guard looks at in a request.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    pub method: &'a Method,
    /// `Host`, or the URI's authority (an absolute-form request).
    pub host: Option<&'a str>,
    pub origin: Option<&'a str>,
    pub fetch_site: Option<&'a str>,
    pub content_type: Option<&'a str>,
    /// An `Upgrade` header: the `/live` WebSocket.
    pub upgrade: bool,
    /// The local address the connection came in on, when known.
    pub local: Option<IpAddr>,
}

impl<'a> Facts<'a> {
    pub(in crate::faces) fn of(request: &'a Request) -> Self {
        let headers: &HeaderMap = request.headers();
        // Two values of a header a client sets once: trust neither.
        let single = |name: HeaderName| match headers.get_all(&name).iter().count() {
            0 | 1 => headers.get(&name).and_then(|v| v.to_str().ok()),
            _ => Some(""),
        };
        Self {
            method: request.method(),
            host: single(header::HOST).or(request.uri().authority().map(Authority::as_str)),
            origin: single(header::ORIGIN),
            fetch_site: single(HeaderName::from_static("sec-fetch-site")),
            content_type: single(header::CONTENT_TYPE),
            upgrade: headers.contains_key(header::UPGRADE),
            local: request
                .extensions()
                .get::<LocalAddr>()
                .map(|local| local.0.ip()),
        }
    }
}

/// The local address of a request's connection, set by toolgate's accept loop.
#[derive(Debug, Clone, Copy)]
pub struct LocalAddr(pub SocketAddr);

#[cfg(test)]
mod tests;
