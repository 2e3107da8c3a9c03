use serde_json::{Value, json};

use super::*;

fn redaction(defaults: bool, extra: &[&str], pointers: &[&str]) -> Redaction {
    let extra: Vec<String> = extra.iter().map(|k| (*k).to_owned()).collect();
    let pointers: Vec<String> = pointers.iter().map(|p| (*p).to_owned()).collect();
    Redaction::new(defaults, &extra, [("pay", pointers.as_slice())])
        .unwrap_or_else(|e| panic!("{e}"))
}

const R: &str = MARKER;

/// (tool, defaults on, extra names, pointers, arguments, as shown)
type Case = (
    &'static str,
    bool,
    &'static [&'static str],
    &'static [&'static str],
    Value,
    Value,
);

#[test]
fn masks_by_key_name_and_by_pointer() {
    #[rustfmt::skip]
    let cases: &[Case] = &[
        // Nothing sensitive: the arguments as they are.
        ("pay", true, &[], &[], json!({"amount": 5, "to": "bob"}), json!({"amount": 5, "to": "bob"})),
        // Default names, any case and spelling, at any depth, any type.
        ("pay", true, &[], &[], json!({"apiKey": "k", "API_KEY": 1, "x": {"Password": {"a": 1}}}),
            json!({"apiKey": R, "API_KEY": R, "x": {"Password": R}})),
        ("pay", true, &[], &[], json!({"headers": [{"Authorization": "Bearer t"}, {"accept": "*/*"}]}),
            json!({"headers": [{"Authorization": R}, {"accept": "*/*"}]})),
        // Only whole names: `max_tokens` and `tokenizer` are not `token`.
        ("pay", true, &[], &[], json!({"max_tokens": 5, "tokenizer": "t", "token": "s"}),
            json!({"max_tokens": 5, "tokenizer": "t", "token": R})),
        // null hides nothing.
        ("pay", true, &[], &[], json!({"password": null}), json!({"password": null})),
        // Defaults off: only the config's names.
        ("pay", false, &["iban"], &[], json!({"password": "p", "IBAN": "DE00"}),
            json!({"password": "p", "IBAN": R})),
        // Pointers, on this tool only, through arrays, escaped.
        ("pay", false, &[], &["/account", "/cards/1/number", "/a~1b", "/m~0n"],
            json!({"account": "123", "cards": [{"number": 1}, {"number": 2}], "a/b": 1, "m~n": 2, "other": 3}),
            json!({"account": R, "cards": [{"number": 1}, {"number": R}], "a/b": R, "m~n": R, "other": 3})),
        ("internal--pay", false, &[], &["/account"], json!({"account": "123"}), json!({"account": R})),
        ("other", false, &[], &["/account"], json!({"account": "123"}), json!({"account": "123"})),
        ("pay", false, &[], &["/list/0"], json!({"list": ["a", "b"]}), json!({"list": [R, "b"]})),
        // A pointer to nothing masks nothing.
        ("pay", false, &[], &["/missing/deep"], json!({"x": 1}), json!({"x": 1})),
        // Not an object: nothing to name.
        ("pay", true, &[], &["/account"], json!("text"), json!("text")),
    ];
    for (tool, defaults, extra, pointers, args, shown) in cases {
        let r = redaction(*defaults, extra, pointers);
        let masked = r.mask(tool, args);
        assert_eq!(&*masked, shown, "{tool} {args}");
        assert_eq!(matches!(masked, Cow::Borrowed(_)), args == shown, "{args}");
        // Masking twice changes nothing more.
        assert_eq!(&*r.mask(tool, shown), shown, "{shown}");
        // What was shown comes back as the real call.
        assert_eq!(&*r.restore(tool, shown, args), args, "{shown}");
    }
}

#[test]
fn restores_only_markers_at_masked_places() {
    let r = redaction(true, &[], &["/account"]);
    let real = json!({"account": "123", "password": "p", "note": "hi", "list": [{"token": "t"}]});
    #[rustfmt::skip]
    let cases: &[(Value, Value)] = &[
        // The approver wrote a new value: theirs.
        (json!({"account": "999", "password": R, "note": "hi", "list": [{"token": R}]}),
            json!({"account": "999", "password": "p", "note": "hi", "list": [{"token": "t"}]})),
        // A marker where nothing is masked stays a marker.
        (json!({"account": R, "password": R, "note": R, "list": [{"token": R}]}),
            json!({"account": "123", "password": "p", "note": R, "list": [{"token": "t"}]})),
        // A key the call did not have gets nothing.
        (json!({"secret": R}), json!({"secret": R})),
        (json!("text"), json!("text")),
    ];
    for (shown, restored) in cases {
        assert_eq!(&*r.restore("pay", shown, &real), restored, "{shown}");
    }
}

#[test]
fn bad_pointers_are_named() {
    for (pointer, why) in [
        (
            "",
            "it names the whole arguments; name a field, e.g. /password",
        ),
        ("account", "it must start with `/`"),
        ("/a~2", "`~` must be followed by 0 or 1"),
        ("/a~", "`~` must be followed by 0 or 1"),
    ] {
        let pointers = [pointer.to_owned()];
        let error = Redaction::new(true, &[], [("pay", &pointers[..])]);
        assert_eq!(
            error,
            Err(BadPointer {
                pointer: pointer.to_owned(),
                why
            }),
            "{pointer}"
        );
    }
    assert!(redaction(true, &[], &["/a/b", "/0", "/"]).has_pointers("pay"));
    assert!(!redaction(true, &[], &[]).has_pointers("pay"));
    assert!(!Redaction::standard().has_pointers("pay"));
}

#[test]
fn extra_names_compare_as_the_defaults_do() {
    let r = redaction(false, &["Account-Number"], &[]);
    let args = json!({"account_number": 1, "accountNumber": 2, "account": 3});
    assert_eq!(
        *r.mask("pay", &args),
        json!({"account_number": R, "accountNumber": R, "account": 3})
    );
    assert_eq!(*Redaction::default().mask("pay", &args), args);
}

#[test]
fn names_match_as_normalized_whatever_the_path() {
    let long = format!("{}token", "x".repeat(60));
    let table: &[(&str, &[&str], bool)] = &[
        ("password", &[], true),
        ("API_Key", &[], true),
        ("x-api-key", &[], true),
        ("Access.Token", &[], true),
        ("max_tokens", &[], false),
        ("tokenizer", &[], false),
        ("", &[], false),
        ("İban", &["iban"], false),
        ("Iban", &["iban"], true),
        ("contraseña", &["contraseña"], true),
        ("CONTRASEÑA", &["contraseña"], true),
        (long.as_str(), &[], false),
        (long.as_str(), &[long.as_str()], true),
    ];
    for (key, extra, masked) in table {
        let r = redaction(true, extra, &[]);
        assert_eq!(r.names(key), *masked, "{key} with {extra:?}");
    }
    let standard = Redaction::standard();
    for name in super::DEFAULT_KEYS {
        assert!(standard.names(name), "{name}");
    }
}
