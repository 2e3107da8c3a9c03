//! The React demo (`frontend-demo/`): the shipped build is current and the
//! binary serves it. That it works in a real browser is `browser.rs`.

use crate::common;
use crate::common::Must;
use crate::common::assert_contains;

use std::path::{Path, PathBuf};

use common::Server;
use sha2::{Digest, Sha256};
use toolgate::Config;

fn demo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("frontend-demo")
}

/// Every file under `dir`, as a path relative to `root` with `/`.
fn files(root: &Path, dir: &str) -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.must().path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut tree = Vec::new();
    walk(&root.join(dir), &mut tree);
    tree.iter()
        .map(|p| {
            let relative = p.strip_prefix(root).must();
            relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/")
        })
        .collect()
}

/// SHA-256 over the files, each as "<path>\n<byte length>\n<bytes>", as
/// `frontend-demo/scripts/stamp.mjs` computes it.
fn digest(root: &Path, mut paths: Vec<String>) -> String {
    paths.sort();
    let mut hash = Sha256::new();
    for path in paths {
        let bytes = std::fs::read(root.join(&path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        hash.update(format!("{path}\n{}\n", bytes.len()));
        hash.update(&bytes);
    }
    hex::encode(hash.finalize())
}

#[test]
fn the_shipped_build_is_current() {
    let dir = demo_dir();
    let sources: Vec<String> = files(&dir, "src")
        .into_iter()
        .filter(|p| !p.ends_with(".test.tsx") && !p.ends_with(".test.ts"))
        .chain(
            [
                "index.html",
                "package.json",
                "package-lock.json",
                "tsconfig.json",
                "vite.config.ts",
            ]
            .map(String::from),
        )
        .collect();
    let expected = format!(
        "{}  sources\n{}  dist\n",
        digest(&dir, sources),
        digest(&dir, files(&dir, "dist"))
    );
    let recorded = std::fs::read_to_string(dir.join("dist-sources.sha256"))
        .unwrap_or_else(|e| panic!("frontend-demo/dist-sources.sha256: {e}"));
    assert_eq!(
        recorded, expected,
        "frontend-demo/dist does not match its sources: run `npm run build --prefix frontend-demo` and commit dist/"
    );
}

#[tokio::test]
async fn the_binary_serves_the_demo_at_the_root() -> anyhow::Result<()> {
    let server = Server::start().await;
    let page = server.get("/").await;
    assert_eq!(page.status, 200);
    assert_eq!(page.headers["content-type"], "text/html");
    assert_eq!(page.headers["cache-control"], "no-cache");
    assert!(page.body.contains(r#"<div id="root">"#), "{}", page.body);

    let assets: Vec<&str> = page
        .body
        .split('"')
        .filter(|s| s.starts_with("/assets/"))
        .collect();
    assert!(
        assets.iter().any(|a| a.ends_with(".js")) && assets.iter().any(|a| a.ends_with(".css")),
        "{assets:?}"
    );
    let client = reqwest::Client::new();
    for asset in assets {
        let file = server.get(asset).await;
        assert_eq!(file.status, 200, "{asset}");
        let kind = if asset.ends_with(".js") {
            "text/javascript"
        } else {
            "text/css"
        };
        assert_eq!(file.headers["content-type"], kind, "{asset}");
        assert!(
            file.headers["cache-control"]
                .to_str()
                .is_ok_and(|c| c.contains("immutable")),
            "{asset}"
        );
        let again = client
            .get(format!("{}{asset}", server.url))
            .header("if-none-match", &file.headers["etag"])
            .send()
            .await?;
        assert_eq!(again.status(), 304, "{asset}");
    }
    assert_eq!(server.get("/assets/nothing.js").await.status, 404);
    // Sent as written: an HTTP client would resolve the dots itself.
    for path in [
        "/assets/../Cargo.toml",
        "/assets/..%2f..%2fCargo.toml",
        "/assets/%2e%2e/index.html",
    ] {
        assert_eq!(raw_get(&server.url, path).await, 404, "{path}");
    }
    Ok(())
}

#[tokio::test]
async fn the_page_cannot_be_framed_and_loads_only_its_own_code() -> anyhow::Result<()> {
    let server = Server::start().await;
    let page = server.get("/").await;
    let csp = page.headers["content-security-policy"].to_str()?;
    for directive in [
        "default-src 'self'",
        "frame-ancestors 'none'",
        "script-src 'self'",
    ] {
        assert_contains(csp, directive);
    }
    assert_eq!(page.headers["x-frame-options"], "DENY");
    // A conditional request with the tag among others, or weak, is fresh too.
    let etag = page.headers["etag"].to_str()?;
    let client = reqwest::Client::new();
    for condition in [
        format!("\"other\", {etag}"),
        format!("W/{etag}"),
        "*".to_owned(),
    ] {
        let reply = client
            .get(format!("{}/", server.url))
            .header("if-none-match", &condition)
            .send()
            .await?;
        assert_eq!(reply.status(), 304, "{condition}");
    }
    Ok(())
}

/// The status of a GET of `path` exactly as given.
async fn raw_get(url: &str, path: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(host).await.must();
    let request = format!("GET {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.must();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).await.must();
    reply
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("{reply}"))
}

#[tokio::test]
async fn the_demo_can_be_switched_off() {
    let mut config = Config::default();
    config.demo.enabled = false;
    let server = Server::with_config(config).await;
    assert_eq!(server.get("/").await.status, 404);
    assert_eq!(server.get("/healthz").await.status, 200);
}
