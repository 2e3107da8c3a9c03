//! The chain made and checked: an intact export verifies; a deleted, an
//! altered (one byte) and two swapped events are each named, and so is a
//! field nothing covers or a key given twice.

use super::verify::Why;
use super::*;

fn key(n: u8) -> AuditKey {
    AuditKey::from_seed([n; 32])
}

/// An export of `n` events, sealed by `sealer`.
fn export(sealer: &Sealer, n: u64) -> Vec<String> {
    let mut head = None;
    (1..=n)
        .map(|i| {
            let event =
                format!(r#"{{"atMs":{i},"principal":"alice","tool":"pay","argsDigest":"d{i}"}}"#);
            let link = sealer.seal(head.as_ref(), &event);
            head = Some(link.head());
            Chained { link, event }.line().unwrap_or_default()
        })
        .collect()
}

fn check(lines: &[String], keys: Option<&[VerifyingKey]>) -> Result<Verified, Broken> {
    verify(lines.iter().cloned().map(Ok), keys)
}

fn broken_at(lines: &[String], keys: Option<&[VerifyingKey]>) -> (usize, Option<u64>, Why) {
    match check(lines, keys) {
        Ok(v) => panic!("verified, but it was broken: {v:?}"),
        Err(Broken { line, seq, why }) => (line, seq, why),
    }
}

#[test]
fn an_intact_signed_export_verifies() {
    let key = key(7);
    let lines = export(&Sealer::new(Some(key.clone())), 5);
    let verified = check(&lines, Some(&[key.public()])).map_err(|e| e.to_string());
    assert_eq!(
        verified,
        Ok(Verified {
            events: 5,
            first: Some((1, GENESIS.to_owned())),
            last_seq: Some(5),
            signatures_checked: true,
        })
    );
}

#[test]
fn an_export_may_begin_inside_the_chain() {
    let lines = export(&Sealer::new(Some(key(1))), 6);
    let verified = check(&lines[2..], Some(&[key(1).public()]));
    assert_eq!(
        verified.map(|v| (v.events, v.first.map(|f| f.0))),
        Ok((4, Some(3)))
    );
}

#[test]
fn a_deleted_event_is_named() {
    let mut lines = export(&Sealer::new(Some(key(1))), 5);
    lines.remove(2);
    assert_eq!(
        broken_at(&lines, Some(&[key(1).public()])),
        (
            3,
            Some(4),
            Why::Missing {
                expected: 3,
                after: 2
            }
        )
    );
    // Without keys too: the chain alone finds it.
    assert_eq!(broken_at(&lines, None).0, 3);
}

#[test]
fn one_altered_byte_is_named_wherever_it_is() {
    let key = key(2);
    let lines = export(&Sealer::new(Some(key.clone())), 4);
    let original = lines[1].clone();
    let mut found = 0;
    for at in 0..original.len() {
        let mut bytes = original.clone().into_bytes();
        bytes[at] ^= 0x01;
        let Ok(altered) = String::from_utf8(bytes) else {
            continue;
        };
        let mut tampered = lines.clone();
        tampered[1] = altered;
        let (line, _, why) = broken_at(&tampered, Some(&[key.public()]));
        // The change is found at the altered line, or (a changed hash that
        // still matches nothing) at the next one, which no longer follows.
        assert!(
            line == 2 || (line == 3 && why == Why::Prev),
            "byte {at}: line {line} {why}"
        );
        found += 1;
    }
    assert_eq!(found, original.len());
}

#[test]
fn an_altered_event_is_found_by_its_hash() {
    let mut lines = export(&Sealer::default(), 3);
    lines[1] = lines[1].replace("\"d2\"", "\"d9\"");
    assert_eq!(broken_at(&lines, None), (2, Some(2), Why::Hash));
}

#[test]
fn two_swapped_events_are_named() {
    let mut lines = export(&Sealer::new(Some(key(3))), 5);
    lines.swap(1, 2);
    assert_eq!(
        broken_at(&lines, Some(&[key(3).public()])),
        (
            2,
            Some(3),
            Why::Missing {
                expected: 2,
                after: 1
            }
        )
    );
    let mut lines = export(&Sealer::default(), 5);
    lines.swap(3, 4);
    assert_eq!(broken_at(&lines, None).0, 4);
}

#[test]
fn a_chain_rewritten_without_the_key_fails_its_signatures() {
    let key = key(4);
    let signed = export(&Sealer::new(Some(key.clone())), 3);
    // Someone with the file but not the key rewrites it unsigned, or signs
    // it with a key of their own.
    let unsigned = export(&Sealer::default(), 3);
    assert_eq!(
        broken_at(&unsigned, Some(&[key.public()])),
        (1, Some(1), Why::Unsigned)
    );
    let forged = export(&Sealer::new(Some(super::tests::key(5))), 3);
    assert!(matches!(
        broken_at(&forged, Some(&[key.public()])).2,
        Why::UnknownKey(_)
    ));
    // A signature moved from another line.
    let mut moved = signed.clone();
    let sig = |line: &str| {
        serde_json::from_str::<serde_json::Value>(line)
            .ok()
            .and_then(|v| v["sig"].as_str().map(str::to_owned))
    };
    if let (Some(a), Some(b)) = (sig(&signed[0]), sig(&signed[1])) {
        moved[1] = moved[1].replace(&b, &a);
    }
    assert_eq!(
        broken_at(&moved, Some(&[key.public()])),
        (2, Some(2), Why::Signature)
    );
    // Rotation: either key verifies the lines it signed.
    assert!(
        check(
            &signed,
            Some(&[super::tests::key(9).public(), key.public()])
        )
        .is_ok()
    );
}

#[test]
fn the_first_event_follows_genesis() {
    let mut lines = export(&Sealer::default(), 2);
    lines[0] = lines[0].replace(GENESIS, &"1".repeat(64));
    assert_eq!(broken_at(&lines, None), (1, Some(1), Why::Genesis));
}

#[test]
fn a_line_that_is_not_json_is_named() {
    let mut lines = export(&Sealer::default(), 2);
    lines.push("{not json".to_owned());
    assert_eq!(broken_at(&lines, None), (3, None, Why::Unreadable));
}

#[test]
fn a_field_beside_the_event_is_named_not_its_value() {
    let key = key(8);
    let keys = [key.public()];
    let lines = export(&Sealer::new(Some(key.clone())), 3);
    let mut added = lines.clone();
    added[1] = added[1].replacen('{', r#"{"approvedBy":"cfo","#, 1);
    let (line, seq, why) = broken_at(&added, Some(&keys));
    assert_eq!(
        (line, seq, &why),
        (2, Some(2), &Why::Field("approvedBy".into()))
    );
    let said = Broken { line, seq, why }.to_string();
    assert!(said.contains(r#"field "approvedBy""#), "{said}");
    assert!(!said.contains("cfo"), "{said}");
    // Unsigned too: the chain alone does not cover it either.
    assert_eq!(broken_at(&added, None).2, Why::Field("approvedBy".into()));
    // At the end of the line as well as at its start.
    let mut last = lines.clone();
    last[2] = format!("{},\"note\":1}}", &last[2][..last[2].len() - 1]);
    assert_eq!(
        broken_at(&last, None),
        (3, Some(3), Why::Field("note".into()))
    );
    // Inside the event, the hash covers it.
    let mut inside = lines.clone();
    inside[1] = inside[1].replacen(r#""event":{"#, r#""event":{"approvedBy":"cfo","#, 1);
    assert_eq!(broken_at(&inside, Some(&keys)), (2, Some(2), Why::Hash));
}

#[test]
fn a_key_given_twice_is_refused_even_signed() {
    let key = key(10);
    let keys = [key.public()];
    // An event with a key twice, sealed as it is: hash and signature hold,
    // but readers differ on who decided.
    let event = r#"{"atMs":1,"by":"user","by":"cfo"}"#;
    let link = Sealer::new(Some(key.clone())).seal(None, event);
    let line = Chained {
        link,
        event: event.to_owned(),
    }
    .line()
    .unwrap_or_default();
    assert_eq!(
        broken_at(&[line], Some(&keys)),
        (1, Some(1), Why::Twice("by".into()))
    );
    // An envelope field twice: the first line holds its own, signed.
    let lines = export(&Sealer::new(Some(key.clone())), 2);
    let mut twice = lines.clone();
    twice[1] = twice[1].replacen('{', r#"{"hash":"0","#, 1);
    assert_eq!(
        broken_at(&twice, Some(&keys)),
        (2, None, Why::Twice("hash".into()))
    );
}

#[test]
fn keys_read_as_pem_or_base64() {
    let key = key(6);
    let pem = key.public_pem();
    assert!(pem.starts_with("-----BEGIN PUBLIC KEY-----"), "{pem}");
    assert_eq!(parse_public(&pem).ok(), Some(key.public()));
    let b64 = base64::engine::general_purpose::STANDARD.encode(key.public().as_bytes());
    assert_eq!(parse_public(&b64).ok(), Some(key.public()));
    let seed = base64::engine::general_purpose::STANDARD.encode([6u8; 32]);
    assert_eq!(AuditKey::parse(&seed).ok(), Some(key.clone()));
    // `openssl genpkey -algorithm ed25519` of the seed 0x06…: its PKCS#8.
    use ed25519_dalek::pkcs8::EncodePrivateKey;
    let private = key
        .0
        .to_pkcs8_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF)
        .map(|p| p.to_string())
        .unwrap_or_default();
    assert_eq!(AuditKey::parse(&private).ok(), Some(key));
    assert!(AuditKey::parse("not a key").is_err());
    assert!(parse_public("AAAA").is_err());
}
