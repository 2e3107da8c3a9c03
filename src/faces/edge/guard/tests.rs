use super::*;

fn guard(hosts: &[&str], origins: &[&str]) -> Guard {
    let owned = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    Guard::new(&owned(hosts), &owned(origins), true).unwrap_or_else(|e| panic!("{e}"))
}

const GET: &Method = &Method::GET;
const POST: &Method = &Method::POST;
const DELETE: &Method = &Method::DELETE;
const JSON: Option<&str> = Some("application/json");

fn facts<'a>(method: &'a Method, host: &'a str) -> Facts<'a> {
    Facts {
        method,
        host: Some(host),
        origin: None,
        fetch_site: None,
        content_type: (*method == Method::POST).then_some("application/json"),
        upgrade: false,
        local: None,
    }
}

#[test]
fn hosts() {
    let default = guard(&[], &[]).with_bind(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)));
    let proxied = guard(&["toolgate.example.com", "10.0.0.5", "[fd00::1]"], &[]);
    let on_lan = guard(&[], &[]).with_bind(IpAddr::V4(Ipv4Addr::new(192, 168, 1, 20)));
    let everywhere = guard(&[], &[]).with_bind(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let any = guard(&["*"], &[]);
    let lan_ip: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 168, 1, 20));
    type Hosts<'a> = &'a [&'a str];
    // guard, the address the request came in on, hosts served, hosts refused
    #[rustfmt::skip]
    let cases: &[(&Guard, Option<IpAddr>, Hosts<'_>, Hosts<'_>)] = &[
        (&default, None,
            &["localhost:8080", "LOCALHOST", "127.0.0.1:1", "[::1]:8080", "[0:0:0:0:0:0:0:1]"],
            &["evil.example:8080", "127.0.0.2:8080", "localhost.evil.example", "user@localhost", "localhost/x", ""]),
        (&default, Some(lan_ip), &[], &["192.168.1.20:8080"]),
        (&proxied, None,
            &["toolgate.example.com", "TOOLGATE.example.com:443", "10.0.0.5:9000", "[fd00:0::1]:9000"],
            &["other.example.com"]),
        (&on_lan, None, &["192.168.1.20:9000"], &["192.168.1.21:9000"]),
        (&everywhere, Some(lan_ip), &["192.168.1.20:9000"], &["192.168.1.21:9000", "lan-name:9000"]),
        (&any, None, &["anything.example:1"], &[]),
    ];
    for (guard, local, served, refused) in cases {
        let hosts = served.iter().map(|h| (h, true));
        for (host, served) in hosts.chain(refused.iter().map(|h| (h, false))) {
            let mut request = facts(GET, host);
            request.local = *local;
            assert_eq!(
                guard.check(&request).is_ok(),
                served,
                "{host} {local:?} {guard:?}"
            );
        }
    }
    let mut no_host = facts(GET, "");
    no_host.host = None;
    assert_eq!(guard(&[], &[]).check(&no_host), Err(GuardError::Host));
}

#[test]
fn origins() {
    let plain = guard(&[], &[]);
    let listed = guard(
        &["app.example.com"],
        &["https://app.example.com", "http://localhost:5173"],
    );
    let any = guard(&[], &["*"]);
    let proxied = guard(&["toolgate.example.com"], &[]);
    let any_host = guard(&["*"], &[]);
    type Case<'a> = (
        &'a Guard,
        &'a Method,
        &'a str,
        Option<&'a str>,
        Option<&'a str>,
        bool,
        Result<(), GuardError>,
    );
    let refused = Err(GuardError::Origin);
    #[rustfmt::skip]
    let cases: &[Case<'_>] = &[
        // guard, method, Host, Origin, Sec-Fetch-Site, upgrade, verdict
        (&plain, POST, "127.0.0.1:8080", None, None, false, Ok(())),
        (&plain, POST, "127.0.0.1:8080", Some("http://127.0.0.1:8080"), Some("same-origin"), false, Ok(())),
        (&plain, POST, "localhost:8080", Some("HTTP://LocalHost:8080"), None, false, Ok(())),
        (&plain, POST, "localhost", Some("http://localhost:80"), None, false, Ok(())),
        (&plain, POST, "localhost:80", Some("http://localhost"), None, false, Ok(())),
        // Another scheme is another origin: toolgate's own is plain HTTP.
        (&plain, POST, "localhost:8080", Some("https://localhost:8080"), None, false, refused),
        (&plain, POST, "127.0.0.1:8080", Some("https://127.0.0.1:8080"), None, false, refused),
        (&plain, GET, "127.0.0.1:8080", Some("https://127.0.0.1:8080"), None, true, refused),
        (&plain, POST, "localhost:443", Some("https://localhost"), None, false, refused),
        // A name a proxy forwards may be served over TLS.
        (&proxied, POST, "toolgate.example.com", Some("https://toolgate.example.com"), None, false, Ok(())),
        (&proxied, POST, "toolgate.example.com", Some("http://toolgate.example.com"), None, false, Ok(())),
        (&proxied, POST, "127.0.0.1:8080", Some("https://127.0.0.1:8080"), None, false, refused),
        (&any_host, POST, "127.0.0.1:8080", Some("https://127.0.0.1:8080"), None, false, Ok(())),
        (&plain, POST, "127.0.0.1:8080", Some("http://127.0.0.1:8081"), None, false, refused),
        (&plain, POST, "127.0.0.1:8080", Some("http://localhost:8080"), None, false, refused),
        (&plain, POST, "127.0.0.1:8080", Some("https://evil.example"), Some("cross-site"), false, refused),
        (&plain, POST, "127.0.0.1:8080", Some("null"), None, false, refused),
        (&plain, POST, "127.0.0.1:8080", Some("ftp://127.0.0.1:8080"), None, false, refused),
        (&plain, POST, "127.0.0.1:8080", Some("http://127.0.0.1:8080/path"), None, false, refused),
        (&plain, POST, "127.0.0.1:8080", None, Some("cross-site"), false, refused),
        (&plain, POST, "127.0.0.1:8080", Some("http://127.0.0.1:8080"), Some("Cross-Site"), false, refused),
        (&plain, POST, "127.0.0.1:8080", None, Some("none"), false, Ok(())),
        (&plain, DELETE, "127.0.0.1:8080", Some("https://evil.example"), None, false, refused),
        // Reading is left to the Host check: a page cannot read another origin's answer.
        (&plain, GET, "127.0.0.1:8080", Some("https://evil.example"), Some("cross-site"), false, Ok(())),
        (&plain, GET, "127.0.0.1:8080", Some("https://evil.example"), None, true, refused),
        (&plain, GET, "127.0.0.1:8080", Some("null"), None, true, refused),
        (&plain, GET, "127.0.0.1:8080", Some("http://127.0.0.1:8080"), None, true, Ok(())),
        (&plain, GET, "127.0.0.1:8080", None, None, true, Ok(())),
        (&listed, POST, "127.0.0.1:8080", Some("https://app.example.com"), Some("cross-site"), false, Ok(())),
        (&listed, POST, "127.0.0.1:8080", Some("https://APP.example.com:443"), None, false, Ok(())),
        (&listed, POST, "127.0.0.1:8080", Some("http://app.example.com"), None, false, refused),
        (&listed, GET, "127.0.0.1:8080", Some("http://localhost:5173"), None, true, Ok(())),
        (&listed, POST, "app.example.com", Some("https://app.example.com"), None, false, Ok(())),
        (&any, POST, "127.0.0.1:8080", Some("https://evil.example"), Some("cross-site"), false, Ok(())),
        (&any, POST, "127.0.0.1:8080", Some("null"), None, false, refused),
    ];
    for (guard, method, host, origin, site, upgrade, verdict) in cases {
        let mut request = facts(method, host);
        request.origin = *origin;
        request.fetch_site = *site;
        request.upgrade = *upgrade;
        assert_eq!(
            &guard.check(&request),
            verdict,
            "{method} {host} {origin:?} {site:?} {upgrade}"
        );
    }
}

#[test]
fn allowed_origins_for_cors() {
    let plain = guard(&[], &[]);
    assert!(!plain.cross_origin());
    assert!(
        !plain.allows_origin("http://localhost:8080"),
        "its own origin needs no CORS"
    );
    let listed = guard(&[], &["https://app.example.com", "http://localhost:3000"]);
    assert!(listed.cross_origin());
    for (origin, allowed) in [
        ("https://app.example.com", true),
        ("https://APP.example.com:443", true),
        ("http://localhost:3000", true),
        ("http://app.example.com", false),
        ("https://app.example.com:8443", false),
        ("http://localhost:3001", false),
        ("http://127.0.0.1:3000", false),
        ("null", false),
        ("", false),
        ("https://app.example.com/", false),
    ] {
        assert_eq!(listed.allows_origin(origin), allowed, "{origin}");
    }
    let any = guard(&[], &["*"]);
    assert!(any.cross_origin());
    assert!(any.allows_origin("https://evil.example"));
    assert!(
        !any.allows_origin("null"),
        "`*` is any http(s) origin, not an opaque one"
    );
}

#[test]
fn post_bodies_are_json() {
    let guard = guard(&[], &[]);
    #[rustfmt::skip]
    let cases: &[(&Method, Option<&str>, Result<(), GuardError>)] = &[
        (POST, JSON, Ok(())),
        (POST, Some("application/json; charset=utf-8"), Ok(())),
        (POST, Some("Application/JSON;charset=UTF-8"), Ok(())),
        (POST, Some(" application/json "), Ok(())),
        (POST, Some("text/plain"), Err(GuardError::NotJson)),
        (POST, Some("text/plain; application/json"), Err(GuardError::NotJson)),
        (POST, Some("application/x-www-form-urlencoded"), Err(GuardError::NotJson)),
        (POST, Some("multipart/form-data; boundary=x"), Err(GuardError::NotJson)),
        (POST, Some("application/jsonx"), Err(GuardError::NotJson)),
        (POST, Some(""), Err(GuardError::NotJson)),
        (POST, None, Err(GuardError::NotJson)),
        (DELETE, None, Ok(())),
        (GET, Some("text/plain"), Ok(())),
    ];
    for (method, content_type, verdict) in cases {
        let mut request = facts(method, "localhost:8080");
        request.content_type = *content_type;
        assert_eq!(&guard.check(&request), verdict, "{method} {content_type:?}");
    }
}

#[test]
fn config_entries() {
    let new = |hosts: &[&str], origins: &[&str], keys: bool| {
        let owned = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        Guard::new(&owned(hosts), &owned(origins), keys).map(|_| ())
    };
    assert_eq!(
        new(&["*"], &[], false),
        Err(GuardConfigError::AnyWithoutKeys("server.allowedHosts"))
    );
    assert_eq!(
        new(&[], &["*"], false),
        Err(GuardConfigError::AnyWithoutKeys("cors.allowedOrigins"))
    );
    assert_eq!(new(&["*"], &["*"], true), Ok(()));
    assert_eq!(
        new(
            &["a.example", "10.0.0.1", "[::2]"],
            &["http://a.example:8080"],
            false
        ),
        Ok(())
    );
    for bad in [
        "",
        "a.example:8080",
        "https://a.example",
        "a.example/x",
        "a b",
    ] {
        assert_eq!(
            new(&[bad], &[], true),
            Err(GuardConfigError::Host(bad.into())),
            "{bad}"
        );
    }
    for bad in [
        "",
        "a.example",
        "null",
        "https://a.example/",
        "ftp://a.example",
    ] {
        assert_eq!(
            new(&[], &[bad], true),
            Err(GuardConfigError::Origin(bad.into())),
            "{bad}"
        );
    }
}
