//! Fuzz target: parse arbitrary bytes as a request payload; whatever parses must
//! re-encode to a payload that parses to the same value, and argument conversion
//! against a typed schema must not panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = toolsrv_protocol::parse_payload(data) {
        let again = toolsrv_protocol::parse_payload(p.encode().as_bytes());
        assert_eq!(again.as_ref(), Ok(&p), "re-encoding changed the payload");
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "n": {"type": "integer"}, "x": {"type": "number"}, "b": {"type": "boolean"},
                "a": {"type": "array"}, "o": {"type": "object"}, "s": {"type": "string"}
            },
            "required": ["s"],
            "additionalProperties": false
        });
        let _ = toolsrv_protocol::convert_args(&p.args, &schema);
    }
});
