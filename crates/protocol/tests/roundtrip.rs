//! Property tests: escaping, payload encoding, durations and sizes round-trip.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use toolsrv_protocol::payload::{is_reserved_env_name, unsafe_id_reason};
use toolsrv_protocol::{
    encode_payload, escape_value, format_duration, parse_duration, parse_payload, parse_size,
    unescape_value, Payload,
};

const RESERVED: &[&str] = &[
    "token", "tool", "agent", "session", "cwd", "bypass", "timeout", "sandbox",
];

/// Arbitrary strings, plus strings dense in the characters the escaping cares about.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![any::<String>(), "[\\\\\nn=\r a\u{e9}]{0,16}"]
}

/// A field value: anything (every byte but the escapes stands for itself).
fn field_value() -> impl Strategy<Value = String> {
    value()
}

fn name() -> impl Strategy<Value = String> {
    "[A-Za-z0-9._:@-]{1,20}".prop_filter("`.` and `..` are refused", |n| {
        unsafe_id_reason(n).is_none()
    })
}

/// A session value the parser accepts (docs/protocol.md, "Requests and results").
fn session() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(
        field_value().prop_filter("unsafe session", |v| unsafe_id_reason(v).is_none()),
    )
}

fn arg_key() -> impl Strategy<Value = String> {
    "[a-z_][a-z0-9_]{0,10}".prop_filter("reserved key", |k| !RESERVED.contains(&k.as_str()))
}

fn some_non_empty() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(field_value().prop_filter("empty means absent", |v| !v.is_empty()))
}

fn payload() -> impl Strategy<Value = Payload> {
    (
        (
            proptest::option::of(field_value()),
            name(),
            name(),
            session(),
            some_non_empty(),
        ),
        (
            proptest::collection::btree_map(
                "[A-Za-z_][A-Za-z0-9_]{0,8}".prop_filter("reserved", |n| !is_reserved_env_name(n)),
                field_value(),
                0..4,
            ),
            any::<bool>(),
            proptest::option::of((0u64..10_000_000, 0u32..1_000_000_000)),
            some_non_empty(),
            proptest::collection::btree_map(arg_key(), field_value(), 0..6),
        ),
    )
        .prop_filter_map(
            "zero timeout",
            |((token, tool, agent, session, cwd), (env, bypass, timeout, sandbox, args))| {
                let timeout = timeout.map(|(s, n)| Duration::new(s, n));
                if timeout.is_some_and(|t| t.is_zero()) {
                    return None;
                }
                Some(Payload {
                    token,
                    tool,
                    agent,
                    session,
                    cwd,
                    env: env.into_iter().collect(),
                    bypass,
                    timeout,
                    sandbox,
                    args: args.into_iter().collect(),
                })
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn unescape_inverts_escape(s in value()) {
        prop_assert_eq!(unescape_value(&escape_value(&s)), s);
    }

    #[test]
    fn escaped_values_are_single_lines(s in value()) {
        prop_assert!(!escape_value(&s).contains('\n'));
    }

    #[test]
    fn encoded_fields_parse_back(
        tool in name(),
        agent in name(),
        args in proptest::collection::btree_map(arg_key(), field_value(), 0..8),
    ) {
        let mut fields: Vec<(&str, &str)> = vec![("tool", &tool), ("agent", &agent)];
        fields.extend(args.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let parsed = parse_payload(encode_payload(&fields).as_bytes());
        let parsed = parsed.map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(parsed.tool, tool);
        prop_assert_eq!(parsed.agent, agent);
        let back: BTreeMap<String, String> = parsed.args.into_iter().collect();
        prop_assert_eq!(back, args);
    }

    #[test]
    fn payload_encode_parses_back(p in payload()) {
        let text = p.encode();
        let parsed = parse_payload(text.as_bytes()).map_err(|e| TestCaseError::fail(format!("{e}: {text:?}")))?;
        prop_assert_eq!(parsed, p);
    }

    #[test]
    fn durations_round_trip(secs in 0u64..1_000_000_000_000, nanos in 0u32..1_000_000_000) {
        let d = Duration::new(secs, nanos);
        let text = format_duration(d);
        prop_assert_eq!(parse_duration(&text).ok(), Some(d), "{}", text);
    }

    #[test]
    fn sizes_scale(n in 0u64..1_000_000, unit in 0usize..4) {
        let (suffix, scale) = [("", 1u64), ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30)][unit];
        prop_assert_eq!(parse_size(&format!("{n}{suffix}")), Ok(n * scale));
    }

    #[test]
    fn parse_duration_never_panics(s in "[0-9.a-zµ+ -]{0,12}") {
        let _ = parse_duration(&s);
    }
}
