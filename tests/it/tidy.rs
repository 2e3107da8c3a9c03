//! The dependency rules of `ARCHITECTURE.md`, read from the sources: the
//! `crate::`/`super::` paths each file names. Imports only point down the
//! layers, and no module's children import each other in a circle (a
//! re-export through a parent's `pub use` counts as the child it names).
//! Comments and string literals are skipped; std only, so it costs nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::common::assert_none;
use crate::tidy_execute::rust_files;

/// The top-level modules from the bottom up. A module may import only
/// modules on lower rows; modules on one row do not import each other.
const LAYERS: &[&[&str]] = &[
    &["identity", "ids", "json", "metrics", "shares", "telemetry"],
    &["call"],
    &["protocol"],
    &["policy", "provider", "store"],
    &["tools"],
    &["notify"],
    &["confirm"],
    &["agent"],
    &["run"],
    &["faces"],
    &["config"],
    &["app"],
];

pub(crate) type ModPath = Vec<String>;

pub(crate) struct Source {
    pub(crate) module: ModPath,
    /// Whether the file is a module's root (`mod.rs`, `lib.rs`).
    pub(crate) root: bool,
    pub(crate) text: String,
}

#[test]
fn imports_point_down_the_layers() {
    let wrong = upward(&sources());
    assert_none("imports that point up or sideways", &wrong);
}

#[test]
fn no_module_has_an_import_circle() {
    let circles = circles(&sources());
    assert_none("import circles", &circles);
}

/// Redis's Lua scripts are `.lua` files (`src/store/redis/lua/`), loaded
/// with `include_str!`, not Lua inside Rust strings. The one exception is
/// the scan of those scripts (`store/lua_keys.rs`, a test), whose cases are
/// fragments of Lua.
#[test]
fn no_lua_inside_rust_sources() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(!files.is_empty(), "no sources under {}", src.display());
    let exempt = src.join("store").join("lua_keys.rs");
    let lua: Vec<String> = files
        .iter()
        .filter(|file| **file != exempt)
        .filter(|file| std::fs::read_to_string(file).is_ok_and(|text| text.contains("redis.call(")))
        .map(|file| file.display().to_string())
        .collect();
    assert_none("Lua inside Rust strings", &lua);
}

/// The checks themselves: each kind of path is read, and what is not a
/// path (a comment, a string) is not.
#[test]
fn the_checks_see_what_they_must() {
    let file = |module: &str, root: bool, text: &str| Source {
        module: module
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        root,
        text: strip(text),
    };
    let circle = [
        file(
            "protocol",
            true,
            "pub mod message; pub mod request;\npub use request::ChatRequest;",
        ),
        file(
            "protocol::message",
            false,
            "use super::request::{RequestError, check_id};",
        ),
        file("protocol::request", false, "use super::message::Part;"),
    ];
    assert_eq!(
        circles(&circle),
        ["in `protocol`: message → request → message"]
    );
    let through_reexport = [
        file(
            "protocol",
            true,
            "pub use request::{ChatRequest, RequestOptions};",
        ),
        file(
            "protocol::message",
            false,
            "fn f(r: crate::protocol::ChatRequest) {}",
        ),
        file(
            "protocol::request",
            false,
            "use crate::protocol::{message::{Part, Role}};",
        ),
    ];
    assert_eq!(
        circles(&through_reexport),
        ["in `protocol`: message → request → message"]
    );
    let not_paths = [
        file("protocol", true, ""),
        file(
            "protocol::message",
            false,
            "// use super::request::X;\n/* crate::protocol::request */",
        ),
        file(
            "protocol::request",
            false,
            "const A: &str = \"super::message\"; const B: &str = r#\"\"crate::protocol::message\"#; const C: char = '\"'; use super::message::Part;",
        ),
    ];
    assert!(circles(&not_paths).is_empty());
    let up = [
        file("provider", true, "use crate::confirm::denial_text;"),
        file("store::sqlite", false, "fn f(c: crate::call::ToolCall) {}"),
        file("call", false, "use crate::{ids::Ids, agent::{Agent}};"),
        file("confirm", true, ""),
        file("agent", true, ""),
        file("ids", false, ""),
    ];
    assert_eq!(
        upward(&up),
        [
            "call: `call` imports `agent`",
            "provider: `provider` imports `confirm`"
        ]
    );
}

/// Top-level imports that do not point down `LAYERS`.
fn upward(sources: &[Source]) -> Vec<String> {
    let rank = |module: &str| LAYERS.iter().position(|row| row.contains(&module));
    let mut wrong = Vec::new();
    for (from, to, file) in top_level_edges(sources) {
        match (rank(&from), rank(&to)) {
            (Some(a), Some(b)) if b < a => {}
            (Some(_), Some(_)) => wrong.push(format!("{file}: `{from}` imports `{to}`")),
            _ => wrong.push(format!(
                "{file}: `{from}` → `{to}`: put both in LAYERS (tests/it/tidy.rs) and ARCHITECTURE.md"
            )),
        }
    }
    wrong.sort();
    wrong.dedup();
    wrong
}

/// Per module, a circle among its children, if any.
fn circles(sources: &[Source]) -> Vec<String> {
    let modules: BTreeSet<ModPath> = sources.iter().map(|s| s.module.clone()).collect();
    let reexports = reexports(sources);
    // Per parent module: edges between its children.
    let mut graphs: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for source in sources {
        for path in paths(source) {
            if let Some((parent, from, to)) = sibling_edge(source, &path, &modules, &reexports) {
                graphs
                    .entry(parent)
                    .or_default()
                    .entry(from)
                    .or_default()
                    .insert(to);
            }
        }
    }
    let mut circles = Vec::new();
    for (parent, graph) in &graphs {
        if let Some(circle) = find_circle(graph) {
            let name = if parent.is_empty() {
                "crate".to_owned()
            } else {
                parent.join("::")
            };
            circles.push(format!("in `{name}`: {}", circle.join(" → ")));
        }
    }
    circles
}

/// Every top-level module edge, with a file that makes it.
fn top_level_edges(sources: &[Source]) -> Vec<(String, String, String)> {
    let modules: BTreeSet<ModPath> = sources.iter().map(|s| s.module.clone()).collect();
    let reexports = reexports(sources);
    let mut edges = Vec::new();
    for source in sources {
        for path in paths(source) {
            if let Some((parent, from, to)) = sibling_edge(source, &path, &modules, &reexports)
                && parent.is_empty()
            {
                edges.push((from, to, source.module.join("::")));
            }
        }
    }
    edges
}

/// The edge `path` makes between two children of one module: the nearest
/// module both the file and the named item sit in, and the child of it on
/// each side. `None` for a path inside the file's own child, or to an item
/// of the common module itself (its shared ground).
fn sibling_edge(
    source: &Source,
    path: &[String],
    modules: &BTreeSet<ModPath>,
    reexports: &BTreeMap<(ModPath, String), String>,
) -> Option<(ModPath, String, String)> {
    let common = source
        .module
        .iter()
        .zip(path)
        .take_while(|(a, b)| a == b)
        .count();
    let from = source.module.get(common)?;
    let parent: ModPath = source.module[..common].to_vec();
    let next = path.get(common)?;
    let mut child = parent.clone();
    child.push(next.clone());
    let to = if modules.contains(&child) {
        next.clone()
    } else {
        reexports.get(&(parent.clone(), next.clone()))?.clone()
    };
    (to != *from).then(|| (parent, from.clone(), to))
}

/// `pub use child::Name` (or `pub use child::{A, B}`) in a module root: the
/// child that `parent::Name` really names.
fn reexports(sources: &[Source]) -> BTreeMap<(ModPath, String), String> {
    let mut map = BTreeMap::new();
    for source in sources.iter().filter(|s| s.root) {
        let mut rest = source.text.as_str();
        while let Some(at) = rest.find("pub use ") {
            rest = &rest[at + "pub use ".len()..];
            let end = rest.find(';').unwrap_or(rest.len());
            let mut expanded = Vec::new();
            expand(&rest[..end], &mut Vec::new(), &mut expanded);
            for path in expanded {
                if let [child, .., name] = path.as_slice()
                    && child != "crate"
                    && child != "super"
                {
                    map.insert((source.module.clone(), name.clone()), child.clone());
                }
            }
        }
    }
    map
}

/// Every path the file names, from the crate root: `crate::a::b`, and
/// `super::…` resolved against the file's module.
pub(crate) fn paths(source: &Source) -> Vec<ModPath> {
    let mut out = Vec::new();
    for (keyword, base) in [
        ("crate::", Vec::new()),
        ("super::", {
            // `super` of `a/b.rs` and of `a/b/mod.rs` is `a`.
            let mut parent = source.module.clone();
            parent.pop();
            parent
        }),
    ] {
        let text = source.text.as_str();
        let mut from = 0;
        while let Some(at) = text[from..].find(keyword) {
            let start = from + at;
            from = start + keyword.len();
            let before = text[..start].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut expanded = Vec::new();
            expand(path_text(&text[from..]), &mut base.clone(), &mut expanded);
            out.extend(expanded);
        }
    }
    out
}

/// The text of one path after its `crate::`: segments and brace groups, up
/// to the first character that cannot be part of it.
fn path_text(text: &str) -> &str {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return &text[..i],
            '}' => depth -= 1,
            c if c.is_alphanumeric() || c == '_' || c == ':' || c == '*' => {}
            ',' | ' ' | '\n' | '\t' if depth > 0 => {}
            _ if depth == 0 => return &text[..i],
            _ => {}
        }
    }
    text
}

/// Expands a use tree (`a::{b, c::{d}}`) into its paths, each prefixed.
fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<ModPath>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head = &tree[..open];
        let inner = tree[open + 1..]
            .strip_suffix('}')
            .unwrap_or(&tree[open + 1..]);
        let depth = prefix.len();
        prefix.extend(segments(head));
        for item in split_top(inner) {
            expand(item, prefix, out);
        }
        prefix.truncate(depth);
    } else {
        let mut path = prefix.clone();
        path.extend(segments(tree.split(" as ").next().unwrap_or(tree)));
        if path.len() > prefix.len() || !prefix.is_empty() {
            out.push(path);
        }
    }
}

fn segments(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty() && *s != "self")
        .map(str::to_owned)
}

/// Splits a brace group's inside at its top-level commas.
fn split_top(inner: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// A circle in `graph`, as the nodes along it, if there is one.
fn find_circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut circle = stack[at..].to_vec();
            circle.push(node.to_owned());
            return Some(circle);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(circle) = visit(next, graph, stack, done) {
                return Some(circle);
            }
        }
        stack.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

/// The library's sources (`main.rs` is the binary, above everything).
pub(crate) fn sources() -> Vec<Source> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .into_iter()
        .filter(|file| !file.ends_with("main.rs") && !file.starts_with(src.join("bin")))
        .map(|file| {
            let relative = file.strip_prefix(&src).unwrap_or(&file);
            let mut module: ModPath = relative
                .with_extension("")
                .iter()
                .map(|part| part.to_string_lossy().into_owned())
                .collect();
            let root = matches!(module.last().map(String::as_str), Some("mod" | "lib"));
            if root {
                module.pop();
            }
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            Source {
                module,
                root,
                text: strip(&text),
            }
        })
        .collect()
}

/// The source without comments and string or char literals (a path in a
/// doc or a message is not an import).
pub(crate) fn strip(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut last = ' ';
    while let Some(c) = chars.next() {
        let after_ident = last.is_alphanumeric() || last == '_';
        last = c;
        match c {
            // A raw string: `r"…"`, `r#"…"#`, `br#"…"#`.
            'r' if (!after_ident || out.ends_with('b'))
                && matches!(chars.peek(), Some('#' | '"')) =>
            {
                let mut hashes = 0;
                while chars.next_if_eq(&'#').is_some() {
                    hashes += 1;
                }
                if chars.next_if_eq(&'"').is_none() {
                    out.push('r');
                    continue;
                }
                let mut closing = None;
                for c in chars.by_ref() {
                    match (c, closing) {
                        ('"', _) if hashes == 0 => break,
                        ('"', _) => closing = Some(0),
                        ('#', Some(n)) if n + 1 == hashes => break,
                        ('#', Some(n)) => closing = Some(n + 1),
                        _ => closing = None,
                    }
                }
                out.push_str("\"\"");
            }
            // A char literal (`'"'`, `'\''`), not a lifetime.
            '\'' => {
                let mut ahead = chars.clone();
                let literal = match ahead.next() {
                    Some('\\') => true,
                    Some(_) => ahead.next() == Some('\''),
                    None => false,
                };
                if literal {
                    skip_quoted(&mut chars, '\'');
                    out.push_str("' '");
                } else {
                    out.push(c);
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            '"' => {
                skip_quoted(&mut chars, '"');
                out.push_str("\"\"");
            }
            _ => out.push(c),
        }
    }
    out
}

/// Skips a quoted literal's rest, up to its closing `quote` (one not
/// escaped by a backslash).
fn skip_quoted(chars: &mut impl Iterator<Item = char>, quote: char) {
    let mut escaped = false;
    for c in chars {
        match c {
            '\\' if !escaped => escaped = true,
            c if c == quote && !escaped => break,
            _ => escaped = false,
        }
    }
}
