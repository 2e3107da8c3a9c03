//! The React demo (`frontend-demo/`): the shipped build is current, the
//! binary serves it, and it works in a real headless Chromium against the
//! real binary. Needs `npm ci --prefix frontend-demo` and Debian's
//! `chromium` (scripts/test installs both).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Binary, Server};
use sha2::{Digest, Sha256};
use toolgate::Config;

fn demo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("frontend-demo")
}

/// The files `dist/` is built from, as `scripts/stamp.mjs` lists them.
fn sources(dir: &Path) -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut tree = Vec::new();
    walk(&dir.join("src"), &mut tree);
    let mut files: Vec<String> = tree
        .iter()
        .map(|p| {
            let relative = p.strip_prefix(dir).unwrap_or_else(|e| panic!("{e}"));
            relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/")
        })
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
    files.sort();
    files
}

#[test]
fn the_shipped_build_is_current() {
    let dir = demo_dir();
    let mut hash = Sha256::new();
    for path in sources(&dir) {
        let bytes = std::fs::read(dir.join(&path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        hash.update(format!("{path}\n{}\n", bytes.len()));
        hash.update(&bytes);
    }
    let digest = hex::encode(hash.finalize());
    let recorded = std::fs::read_to_string(dir.join("dist-sources.sha256"))
        .unwrap_or_else(|e| panic!("frontend-demo/dist-sources.sha256: {e}"));
    assert_eq!(
        recorded.trim(),
        digest,
        "frontend-demo/dist is older than its sources: run `npm run build --prefix frontend-demo` and commit dist/"
    );
}

#[tokio::test]
async fn the_binary_serves_the_demo_at_the_root() {
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
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(again.status(), 304, "{asset}");
    }
    assert_eq!(server.get("/assets/nothing.js").await.status, 404);
    assert_eq!(server.get("/assets/../Cargo.toml").await.status, 404);
}

#[tokio::test]
async fn the_demo_can_be_switched_off() {
    let mut config = Config::default();
    config.demo.enabled = false;
    let server = Server::with_config(config).await;
    assert_eq!(server.get("/").await.status, 404);
    assert_eq!(server.get("/healthz").await.status, 200);
}

#[test]
fn the_demo_works_in_a_real_browser() {
    let dir = demo_dir();
    assert!(
        dir.join("node_modules/playwright-core").is_dir(),
        "the demo's packages are not installed: run `npm ci --prefix frontend-demo` (scripts/test does)"
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "no Chromium at {chromium}: install Debian's `chromium` (scripts/test does) or set CHROMIUM"
    );
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/browser/toolgate.yaml");
    let server = Binary::serve_with(&["--config", &config.display().to_string()]);
    let artifacts = Path::new(env!("CARGO_TARGET_TMPDIR")).join("frontend-demo");
    let output = Command::new("node")
        .args(["--test", "--test-reporter=spec", "e2e/"])
        .current_dir(&dir)
        .env("TOOLGATE_URL", &server.url)
        .env("TOOLGATE_E2E_ARTIFACTS", &artifacts)
        .env("CHROMIUM", &chromium)
        .output()
        .unwrap_or_else(|e| panic!("cannot run node: {e}"));
    let report = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "the browser tests failed:\n{report}"
    );
    assert!(report.contains("pass 9"), "{report}");
    println!("screenshots in {}", artifacts.display());
}
