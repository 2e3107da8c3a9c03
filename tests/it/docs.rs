//! Every relative link in the project's documents points at something that
//! exists: `README.md`, `ARCHITECTURE.md`, `BENCHMARKS.md` and every
//! Markdown file under `docs/`. A link into a Markdown file with a
//! `#fragment` must name one of its headings (GitHub's anchors). Links with
//! a scheme (`https:`, `mailto:`) are not followed; code (fenced blocks and
//! `inline spans`) holds no links. Std only, so it costs nothing.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::common::assert_none;

/// The documents whose links are checked, relative to the repository.
const DOCUMENTS: &[&str] = &["README.md", "ARCHITECTURE.md", "BENCHMARKS.md"];

#[test]
fn every_relative_link_in_the_documents_resolves() -> io::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut documents: Vec<PathBuf> = DOCUMENTS.iter().map(|d| root.join(d)).collect();
    markdown_under(&root.join("docs"), &mut documents)?;
    assert!(
        documents.len() > DOCUMENTS.len(),
        "docs/ holds no Markdown file"
    );
    let broken = broken_links(root, &documents)?;
    assert_none("links that point nowhere", &broken);
    Ok(())
}

/// The README stays a front door: short, with the index of `docs/` behind
/// it, the schema's modeline on the first line of its config, and the test
/// command CI runs (`.ci/run`).
#[test]
fn the_readme_is_a_front_door() -> io::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = fs::read_to_string(root.join("README.md"))?;
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines, more than 300");
    assert!(
        links(&readme).iter().any(|(_, t)| t == "docs/README.md"),
        "README.md does not link docs/README.md"
    );
    assert!(
        readme.contains("```yaml\n# yaml-language-server: $schema=./toolgate.schema.json\n"),
        "README.md shows no config opening with the schema's modeline"
    );
    let ci = fs::read_to_string(root.join(".ci/run"))?;
    let command = ci
        .lines()
        .find_map(|line| line.strip_prefix("exec "))
        .unwrap_or_default();
    assert_eq!(command, "./scripts/test", ".ci/run runs something else");
    assert!(
        readme.contains(&format!("```sh\n{command}\n```")),
        "README.md does not give CI's test command `{command}`"
    );
    Ok(())
}

/// Every page under `docs/` is reachable from its index.
#[test]
fn the_index_of_docs_links_every_page() -> io::Result<()> {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    let index = docs.join("README.md");
    let linked: BTreeSet<PathBuf> = links(&fs::read_to_string(&index)?)
        .into_iter()
        .filter(|(_, target)| !has_scheme(target))
        .map(|(_, target)| docs.join(target.split('#').next().unwrap_or_default()))
        .collect();
    let mut pages = Vec::new();
    markdown_under(&docs, &mut pages)?;
    let missing: Vec<String> = pages
        .iter()
        .filter(|page| **page != index && !linked.contains(*page))
        .map(|page| page.display().to_string())
        .collect();
    assert_none("pages docs/README.md does not link", &missing);
    Ok(())
}

/// The check itself finds what it should: a missing file, a missing
/// heading, a missing heading of the same page; and lets pass what it should.
#[test]
fn the_link_check_fails_on_broken_links() -> io::Result<()> {
    let dir = tempfile::tempdir()?;
    let root = dir.path();
    fs::create_dir_all(root.join("docs/guides"))?;
    fs::write(
        root.join("docs/guides/a.md"),
        "# A page\n\n## One WebSocket: `GET /live` (ai 7.0.135)\n\n## Twice\n\n## Twice\n",
    )?;
    let page = root.join("docs/b.md");
    fs::write(
        &page,
        "# B\n\n\
         [fine](guides/a.md) [fine](guides/a.md#one-websocket-get-live-ai-70135) \
         [fine](guides/a.md#twice-1) [fine](#b) [fine](https://example.com/x.md) \
         ![fine](guides/a.md \"title\") `[code](nowhere.md)`\n\n\
         ```text\n[code](nowhere.md)\n```\n\n\
         [gone](guides/gone.md)\n\
         [no heading](guides/a.md#nowhere)\n\
         [no heading here](#nowhere)\n\
         [gone by reference]\n\n\
         [gone by reference]: ../gone.md\n",
    )?;
    let broken = broken_links(root, &[page])?;
    let targets: Vec<&str> = broken
        .iter()
        .filter_map(|b| b.rsplit(": ").next())
        .collect();
    assert_eq!(
        targets,
        [
            "guides/gone.md",
            "guides/a.md#nowhere",
            "#nowhere",
            "../gone.md"
        ],
        "{broken:?}"
    );
    Ok(())
}

#[test]
fn anchors_are_githubs() {
    assert_eq!(
        anchor("The `adk-stream-protocol` dialect: `live.dialect: adk-stream-protocol`"),
        "the-adk-stream-protocol-dialect-livedialect-adk-stream-protocol"
    );
    assert_eq!(
        anchor("Policy: which calls run, ask, or never run"),
        "policy-which-calls-run-ask-or-never-run"
    );
    assert_eq!(
        anchor("Answering in the tool's place"),
        "answering-in-the-tools-place"
    );
}

/// `file: line: target` for each relative link of `documents` that points
/// at nothing.
fn broken_links(root: &Path, documents: &[PathBuf]) -> io::Result<Vec<String>> {
    let mut broken = Vec::new();
    for document in documents {
        let text = fs::read_to_string(document)?;
        let dir = document.parent().unwrap_or(root);
        for (line, target) in links(&text) {
            if has_scheme(&target) {
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((path, fragment)) => (path, Some(fragment)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                document.clone()
            } else {
                dir.join(path)
            };
            let fine = file.exists()
                && match fragment {
                    Some(fragment) if path.is_empty() || path.ends_with(".md") => {
                        anchors(&fs::read_to_string(&file)?).contains(fragment)
                    }
                    _ => true,
                };
            if !fine {
                let name = document.strip_prefix(root).unwrap_or(document);
                broken.push(format!("{}:{line}: {target}", name.display()));
            }
        }
    }
    Ok(broken)
}

fn markdown_under(dir: &Path, found: &mut Vec<PathBuf>) -> io::Result<()> {
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<io::Result<_>>()?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            markdown_under(&path, found)?;
        } else if path.extension().is_some_and(|e| e == "md") {
            found.push(path);
        }
    }
    Ok(())
}

fn has_scheme(target: &str) -> bool {
    target.split_once(':').is_some_and(|(scheme, _)| {
        !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
    })
}

/// The lines of `text` outside fenced code blocks, numbered from 1.
fn prose(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut fence: Option<&str> = None;
    text.lines().enumerate().filter_map(move |(i, line)| {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => {
                fence = Some(m);
                None
            }
            (Some(open), Some(m)) if m == open => {
                fence = None;
                None
            }
            (Some(_), _) => None,
            (None, None) => Some((i + 1, line)),
        }
    })
}

/// A line without its inline code spans.
fn without_code(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for (i, part) in line.split('`').enumerate() {
        if i > 0 {
            in_code = !in_code;
        }
        if !in_code {
            out.push_str(part);
        }
    }
    out
}

/// `(line, target)` for every inline link or image (`[text](target)`,
/// `![alt](target "title")`) and every reference definition (`[x]: target`).
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in prose(text) {
        let line = without_code(line);
        if let Some(rest) = line.trim_start().strip_prefix('[')
            && let Some((_, target)) = rest.split_once("]: ")
        {
            found.push((number, target.trim().to_string()));
            continue;
        }
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            let inside = after[..end].trim();
            let target = inside.split_once(' ').map_or(inside, |(t, _)| t);
            let target = target.trim_start_matches('<').trim_end_matches('>');
            found.push((number, target.to_string()));
            rest = &after[end..];
        }
    }
    found
}

/// The anchors of a Markdown file's headings, as GitHub makes them (a
/// repeated heading gets `-1`, `-2`, …).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for (_, line) in prose(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = anchor(line[hashes..].trim());
        let mut name = base.clone();
        let mut n = 0;
        while seen.contains(&name) {
            n += 1;
            name = format!("{base}-{n}");
        }
        seen.insert(name);
    }
    seen
}

fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// `docs/reference/routes.md` lists every route the server serves, each
/// method and path, and no other: the routes are read from the sources'
/// `.route(…)` and `.route_service(…)` calls (outside their tests), so a
/// route added to a router and not to the reference fails here. A
/// `route_service` (`/mcp`, rmcp's own service) takes the methods its
/// service does: the reference must list its path, with any methods.
#[test]
fn the_routes_reference_lists_every_route_served() -> io::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources = Vec::new();
    rust_under(&root.join("src"), &mut sources)?;
    let mut served = BTreeSet::new();
    for source in &sources {
        served.extend(routes_in_source(&fs::read_to_string(source)?));
    }
    for known in [("GET", "/stream/{}/stream"), ("*", "/mcp"), ("GET", "/")] {
        let known = (known.0.to_owned(), known.1.to_owned());
        assert!(served.contains(&known), "the source scan missed {known:?}");
    }
    let reference = fs::read_to_string(root.join("docs/reference/routes.md"))?;
    let services: BTreeSet<String> = served
        .iter()
        .filter(|(method, _)| method == "*")
        .map(|(_, path)| path.clone())
        .collect();
    let documented: BTreeSet<(String, String)> = routes_in_reference(&reference)
        .into_iter()
        .map(|(method, path)| match services.contains(&path) {
            true => ("*".to_owned(), path),
            false => (method, path),
        })
        .collect();
    let show = |(method, path): &(String, String)| format!("{method} {path}");
    let undocumented: Vec<String> = served.difference(&documented).map(show).collect();
    assert_none(
        "routes served but not in docs/reference/routes.md",
        &undocumented,
    );
    let unserved: Vec<String> = documented.difference(&served).map(show).collect();
    assert_none(
        "routes in docs/reference/routes.md the server does not serve",
        &unserved,
    );
    Ok(())
}

/// The scans read what they must: a chained, multi-line route; a closure's
/// own calls are not methods; a service; a test module's routes skipped;
/// the reference's rows with several methods.
#[test]
fn the_route_scans_read_routes_and_rows() {
    let source = r#"
        Router::new()
            .route("/a/{id}", get(one).post(two))
            .route(
                "/b/{*path}",
                get(|Path(p): Path<String>| async move { file(&format!("x{p})"), post(3)) }),
            )
            .route_service("/svc", service)
        #[cfg(test)]
        mod tests {
            fn t() { Router::new().route("/test-only", get(x)); }
        }
    "#;
    let found: Vec<String> = routes_in_source(source)
        .into_iter()
        .map(|(m, p)| format!("{m} {p}"))
        .collect();
    assert_eq!(found, ["* /svc", "GET /a/{}", "GET /b/{}", "POST /a/{}"]);
    let reference = "| method | path | what | who |\n| --- | --- | --- | --- |\n\
                     | `GET`, `POST` | `/a/{chatId}` | a `thing` | anyone |\n\
                     | `DELETE` | `/b` | one | a caller |\n\n| other | table |\n| `GET` | `/c` |\n";
    let rows: Vec<String> = routes_in_reference(reference)
        .into_iter()
        .map(|(m, p)| format!("{m} {p}"))
        .collect();
    assert_eq!(rows, ["DELETE /b", "GET /a/{}", "POST /a/{}"]);
}

fn rust_under(dir: &Path, found: &mut Vec<PathBuf>) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "tests") {
                rust_under(&path, found)?;
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            found.push(path);
        }
    }
    Ok(())
}

/// `{chat_id}`, `{*path}`, `{chatId}`: one parameter, whatever its name.
fn route_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut in_param = false;
    for c in path.chars() {
        match (c, in_param) {
            ('{', _) => {
                out.push_str("{}");
                in_param = true;
            }
            ('}', _) => in_param = false,
            (c, false) => out.push(c),
            (_, true) => {}
        }
    }
    out
}

/// The (method, path) pairs a source's `.route(…)` calls serve (`*` for a
/// `.route_service(…)`), its inline test module left out: the methods are
/// the calls named `get`, `post`… directly in the route's arguments, not
/// inside a handler's closure.
fn routes_in_source(text: &str) -> BTreeSet<(String, String)> {
    const METHODS: &[&str] = &["get", "post", "put", "patch", "delete", "head", "options"];
    let end = text
        .match_indices("#[cfg(test)]")
        .find(|(at, attr)| {
            text[at + attr.len()..]
                .trim_start()
                .starts_with("mod tests {")
        })
        .map_or(text.len(), |(at, _)| at);
    let text = &text[..end];
    let mut routes = BTreeSet::new();
    for (call, service) in [(".route(", false), (".route_service(", true)] {
        for (at, _) in text.match_indices(call) {
            let args = &text[at + call.len()..];
            let Some(path) = args.split('"').nth(1) else {
                continue;
            };
            let path = route_path(path);
            if service {
                routes.insert(("*".to_owned(), path));
                continue;
            }
            let (mut depth, mut quoted, mut word) = (1usize, false, String::new());
            for c in args.chars() {
                match c {
                    '"' => quoted = !quoted,
                    _ if quoted => {}
                    '(' => {
                        if depth == 1 && METHODS.contains(&word.as_str()) {
                            routes.insert((word.to_uppercase(), path.clone()));
                        }
                        depth += 1;
                    }
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                match c.is_alphanumeric() || c == '_' {
                    true => word.push(c),
                    false => word.clear(),
                }
            }
        }
    }
    routes
}

/// The (method, path) pairs of the reference's table of routes: the rows
/// under a `| method | path |` header, each method of the first cell with
/// the path of the second.
fn routes_in_reference(text: &str) -> BTreeSet<(String, String)> {
    let mut routes = BTreeSet::new();
    let mut in_table = false;
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if !line.starts_with('|') {
            in_table = false;
            continue;
        }
        if cells.get(1..3) == Some(&["method", "path"][..]) {
            in_table = true;
            continue;
        }
        if !in_table || cells.get(1).is_some_and(|c| c.starts_with("---")) {
            continue;
        }
        let (Some(methods), Some(path)) = (cells.get(1), cells.get(2)) else {
            continue;
        };
        let path = route_path(path.trim_matches('`'));
        for method in methods.split(',') {
            routes.insert((method.trim().trim_matches('`').to_owned(), path.clone()));
        }
    }
    routes
}
