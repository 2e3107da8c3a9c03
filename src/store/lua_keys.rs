//! Every key a Redis script touches is passed in `KEYS`: Redis Cluster
//! routes a script by its declared keys, and a key built inside the
//! script (`'prefix' .. name`, or read out of a hash) may live elsewhere.
//! A scan of each script's calls, not a Lua parser: a key argument must
//! be `KEYS[n]`, or `key` where the script binds that name to `KEYS` only.

use super::{redis, redis_limits, turn_log};

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

#[test]
fn every_script_declares_the_keys_it_touches() {
    let scripts = [
        ("CLAIM", redis::CLAIM),
        ("INSERT", redis::INSERT),
        ("TAKE_BUDGET", redis::TAKE_BUDGET),
        ("FORGET_ENTRY", redis::FORGET_ENTRY),
        ("REVOKE", redis::REVOKE),
        ("FINISH", redis::FINISH),
        ("GCRA", redis_limits::GCRA),
        ("TAKE_LEASE", redis_limits::TAKE_LEASE),
        ("RENEW_LEASE", redis_limits::RENEW_LEASE),
        ("APPEND", turn_log::APPEND),
        ("HOLD", turn_log::HOLD),
        ("TAKE_OVER", turn_log::TAKE_OVER),
        ("END", turn_log::END),
    ];
    for (name, script) in scripts {
        assert_eq!(undeclared(script), Vec::<String>::new(), "{name}");
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
