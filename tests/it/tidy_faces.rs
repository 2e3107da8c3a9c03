//! The faces' rules, read from the sources (comments and string literals
//! skipped): a face reaches the core only through the door, and speaks
//! only its own wire.

use std::collections::BTreeSet;
use std::path::Path;

use crate::common::assert_none;
use crate::tidy::{Source, paths, sources, strip};

/// Every face (`src/faces/`) reaches the core only through the door
/// (`run/`): none names a `Gate` or an `Agent`, reads an `.agent`, or
/// names a path into `confirm`, `store`, `agent`, `tools`, `policy` or
/// `provider`; the core's words it speaks are the ones `run` re-exports. So
/// every check of who may see, decide or open what stays behind the door,
/// once, and a new face cannot do otherwise.
#[test]
fn faces_reach_the_core_only_through_the_door() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let faces: Vec<Source> = sources()
        .into_iter()
        .filter(|s| s.module.first().map(String::as_str) == Some("faces"))
        .collect();
    assert!(faces.len() > 20, "the faces were not found under {src:?}");
    let mut wrong = Vec::new();
    for face in &faces {
        let file = face.module.join("/");
        wrong.extend(core_named(face).into_iter().map(|n| format!("{file}: {n}")));
    }
    assert_none("faces that reach past the door", &wrong);
}

/// What of the core a face's source names past the door.
fn core_named(source: &Source) -> Vec<String> {
    let text = source.text.as_str();
    let mut named = BTreeSet::new();
    let idents = text.split(|c: char| !(c.is_alphanumeric() || c == '_'));
    for core in ["Gate", "Agent"] {
        if idents.clone().any(|ident| ident == core) {
            named.insert(format!("`{core}`"));
        }
    }
    let fields = text
        .match_indices(".agent")
        .map(|(at, m)| &text[at + m.len()..]);
    if fields
        .into_iter()
        .any(|rest| !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
    {
        named.insert("`.agent`".to_owned());
    }
    for path in paths(source) {
        let top = path.first().map(String::as_str);
        if let Some(top @ ("confirm" | "store" | "agent" | "tools" | "policy" | "provider")) = top {
            named.insert(format!("`crate::{top}`"));
        }
    }
    named.into_iter().collect()
}

#[test]
fn the_door_check_sees_what_it_must() {
    let named = |text: &str| {
        core_named(&Source {
            module: vec!["faces".into(), "decisions".into(), "inbox".into()],
            root: false,
            text: strip(text),
        })
    };
    assert_eq!(
        named("use crate::{run::Questions, confirm::Scope}; fn f(g: &Gate) {}"),
        ["`Gate`", "`crate::confirm`"]
    );
    assert_eq!(
        named("let s = state.agent.gate; fn f(i: crate::store::Issued) {}"),
        ["`.agent`", "`crate::store`"]
    );
    let clean = "// the Gate, state.agent, crate::confirm\nuse crate::run::GateError; \
                 let t = \"crate::store\"; let a = x.agents;";
    assert!(named(clean).is_empty(), "{:?}", named(clean));
}

/// Words that read another face's wire: a `ChatRequest` built from JSON
/// text (the AI SDK's request body), or a turn's events read back as the
/// AI SDK's JSON (`Event::cut`, an event's `.json()`). The AI SDK face
/// (`faces/ai_sdk`) speaks that wire itself; every other face gets typed
/// input and writes the turn's typed chunks through its own writer.
const OTHER_WIRES: [&str; 4] = [
    "ChatRequest::from_slice",
    "ChatRequest::from_str",
    "Event::cut",
    ".json()",
];

/// No face other than the AI SDK's parses the AI SDK's SSE or builds a
/// `ChatRequest` from JSON text; its tests may read what its writer wrote.
#[test]
fn faces_speak_only_their_own_wire() {
    let mut wrong = Vec::new();
    for face in sources() {
        let module: Vec<&str> = face.module.iter().map(String::as_str).collect();
        let speaks_ai_sdk = module.starts_with(&["faces", "ai_sdk"]);
        if module.first() != Some(&"faces") || speaks_ai_sdk || module.last() == Some(&"tests") {
            continue;
        }
        wrong.extend(other_wires(&face).map(|w| format!("{}: `{w}`", module.join("/"))));
    }
    assert_none("faces that read another face's wire", &wrong);
}

fn other_wires(source: &Source) -> impl Iterator<Item = &'static str> + '_ {
    OTHER_WIRES
        .into_iter()
        .filter(|word| source.text.contains(word))
}

#[test]
fn the_wire_check_sees_what_it_must() {
    let face = |text: &str| Source {
        module: vec!["faces".into(), "ag_ui".into()],
        root: true,
        text: strip(text),
    };
    let parses = face("let r = ChatRequest::from_slice(&body); let c = event.json();");
    assert_eq!(
        other_wires(&parses).collect::<Vec<_>>(),
        ["ChatRequest::from_slice", ".json()"]
    );
    let clean = face("// ChatRequest::from_slice\nlet js = \"r.json()\"; yield event;");
    assert_eq!(other_wires(&clean).count(), 0);
}

/// Every pool a caller takes a share of is made behind the door (`run`,
/// the store): a face takes its callers' places in the door's pools, and
/// keeps no count or cap of its own. Its tests may make one to test with.
#[test]
fn no_face_makes_a_pool() {
    let made: Vec<String> = sources()
        .into_iter()
        .filter(|s| s.module.first().map(String::as_str) == Some("faces"))
        .filter(|s| s.module.last().map(String::as_str) != Some("tests"))
        .filter(|s| s.text.contains("Shares::new") || s.text.contains("ShareLimits"))
        .map(|s| s.module.join("/"))
        .collect();
    assert_none("faces that make a pool of their own", &made);
}
