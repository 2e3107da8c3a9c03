//! An approval needs the tool as it was asked about, and a grant holds
//! only for the definition it was made for.

use super::*;

#[test]
fn an_approval_needs_the_tool_as_it_was_asked_about() {
    let asked = |definition: Option<&str>| Issued {
        fingerprint: definition.map(|definition| Fingerprint {
            definition: definition.into(),
            call: "call".into(),
        }),
        ..issued()
    };
    let stale = || Err(Refusal::Stale("pay".into()));
    for (name, question, now, expected) in [
        ("the same definition", asked(Some("d1")), Some("d1"), Ok(())),
        (
            "relisted differently",
            asked(Some("d1")),
            Some("d2"),
            stale(),
        ),
        ("no longer offered", asked(Some("d1")), None, stale()),
        ("asked before fingerprints", asked(None), Some("d2"), Ok(())),
        ("asked before fingerprints, gone", asked(None), None, Ok(())),
    ] {
        assert_eq!(fresh(&question, now), expected, "{name}");
    }
    assert!(
        Refusal::Stale("pay".into())
            .to_string()
            .contains("the definition of pay changed"),
    );
}

#[test]
fn a_grant_holds_for_the_definition_it_was_made_for() {
    for (name, granted, now, holds) in [
        ("the same definition", Some("d1"), Some("d1"), true),
        ("relisted differently", Some("d1"), Some("d2"), false),
        ("no longer offered", Some("d1"), None, false),
        ("granted before digests", None, Some("d2"), true),
    ] {
        assert_eq!(grant_holds(granted, now), holds, "{name}");
    }
}
