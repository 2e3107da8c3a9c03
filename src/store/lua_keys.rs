//! Every key a Redis script touches is passed in `KEYS`: Redis Cluster
//! routes a script by its declared keys, and a key built inside the
//! script (`'prefix' .. name`, or read out of a hash) may live elsewhere.
//! A scan of each script's calls, not a Lua parser: a key argument must
//! be `KEYS[n]`, or `key` where the script binds that name to `KEYS` only.

use super::{limits, redis, turn_log};

/// Commands whose first argument is no key.
const KEYLESS: &[&str] = &["TIME", "PUBLISH"];

/// The first argument of every `redis.call` of `script` that is not a
/// declared key, and every list a `key` may be bound from that holds
/// something else: empty when the script declares all it touches.
fn undeclared(script: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in script.match_indices("redis.call(") {
        let rest = &script[at + "redis.call(".len()..];
        let Some((command, args)) = rest.split_once(',') else {
            continue; // no argument: no key
        };
        let command = command.trim().trim_matches('\'');
        if KEYLESS.contains(&command) {
            continue;
        }
        let key = first_argument(args);
        if !is_declared(key) && key != "key" {
            found.push(format!("{command} {key}"));
        }
    }
    // What `key` is bound to: a loop over a list, or a helper's argument.
    for opening in ["ipairs({", "live("] {
        for (at, _) in script.match_indices(opening) {
            if script[..at].ends_with("function ") {
                continue; // the helper's own parameter
            }
            let rest = &script[at + opening.len()..];
            let list = rest.split(['}', ')']).next().unwrap_or_default();
            for item in list.split(',').map(str::trim) {
                if !is_declared(item) {
                    found.push(format!("{opening} {item}"));
                }
            }
        }
    }
    found
}

/// The argument at the start of `args`, up to its top-level `,` or `)`.
fn first_argument(args: &str) -> &str {
    let mut depth = 0usize;
    for (i, c) in args.char_indices() {
        match c {
            '(' | '{' => depth += 1,
            ')' | '}' if depth == 0 => return args[..i].trim(),
            ')' | '}' => depth -= 1,
            ',' if depth == 0 => return args[..i].trim(),
            _ => {}
        }
    }
    args.trim()
}

fn is_declared(arg: &str) -> bool {
    arg.strip_prefix("KEYS[")
        .and_then(|rest| rest.strip_suffix(']'))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Every script the Redis store runs, by its file in `redis/lua/`.
const SCRIPTS: &[(&str, &str)] = &[
    ("claim_confirmation.lua", redis::CLAIM),
    ("insert_confirmation.lua", redis::INSERT),
    ("take_budget.lua", redis::TAKE_BUDGET),
    ("forget_grant_entry.lua", redis::FORGET_ENTRY),
    ("revoke_grant.lua", redis::REVOKE),
    ("redeem_grant.lua", redis::REDEEM_GRANT),
    ("revoke_narrowed.lua", redis::REVOKE_NARROWED),
    ("finish_confirmation.lua", redis::FINISH),
    ("audit_append.lua", redis::AUDIT_APPEND),
    ("rate_limit_gcra.lua", limits::redis::GCRA),
    ("take_stream_lease.lua", limits::redis::TAKE_LEASE),
    ("renew_stream_lease.lua", limits::redis::RENEW_LEASE),
    ("turn_log_append.lua", turn_log::APPEND),
    ("turn_log_hold.lua", turn_log::HOLD),
    ("turn_log_take_over.lua", turn_log::TAKE_OVER),
    ("turn_log_end.lua", turn_log::END),
];

#[test]
fn every_script_declares_the_keys_it_touches() {
    for (name, script) in SCRIPTS {
        assert_eq!(undeclared(script), Vec::<String>::new(), "{name}");
    }
}

/// The scan above sees every `.lua` file there is, each as the constant
/// the store runs: a new script cannot be left out of it.
#[test]
fn the_scan_covers_every_script_file() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store/redis/lua");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".lua"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut scanned: Vec<String> = SCRIPTS.iter().map(|(name, _)| (*name).to_owned()).collect();
    scanned.sort();
    assert_eq!(files, scanned, "every .lua file in {}", dir.display());
    for (name, script) in SCRIPTS {
        let text = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        assert_eq!(text, *script, "{name} is not the constant that names it");
    }
}

/// The scan sees what the two scripts once did: a key read out of a hash,
/// and one built from a prefix.
#[test]
fn the_scan_sees_keys_built_in_the_script() {
    let cases: &[(&str, &[&str])] = &[
        ("redis.call('GET', KEYS[1])", &[]),
        ("redis.call('TIME')", &[]),
        ("redis.call('PUBLISH', KEYS[3], ARGV[1])", &[]),
        ("redis.call('EXISTS', stream)", &["EXISTS stream"]),
        (
            "redis.call('EXISTS', ARGV[2] .. (owner or '')) == 1",
            &["EXISTS ARGV[2] .. (owner or '')"],
        ),
        ("redis.call('GET', 'prefix' .. x)", &["GET 'prefix' .. x"]),
        (
            "for _, key in ipairs({KEYS[1], stream}) do redis.call('PTTL', key) end",
            &["ipairs({ stream"],
        ),
        ("redis.call('XADD', KEYS[12], '1-0')", &[]),
        ("redis.call('DEL', KEYS[])", &["DEL KEYS[]"]),
    ];
    for (script, expected) in cases {
        assert_eq!(undeclared(script), *expected, "{script}");
    }
}
