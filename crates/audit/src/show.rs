//! A record for a person: `seq time event key=value …`, the chain's own
//! fields left out.

use serde_json::Value;

/// One line for `record` (a parsed record), or the line as it is when it
/// is not one.
pub fn human(line: &str) -> String {
    let Ok(Value::Object(m)) = serde_json::from_str::<Value>(line) else {
        return line.to_string();
    };
    let get = |k: &str| m.get(k).map(plain).unwrap_or_default();
    let mut out = format!("{:>5} {} {:<10}", get("seq"), get("time"), get("event"));
    for (k, v) in &m {
        if matches!(k.as_str(), "seq" | "prev" | "time" | "event") {
            continue;
        }
        out.push(' ');
        out.push_str(k);
        out.push('=');
        let text = plain(v);
        if text.contains(' ') || text.is_empty() {
            out.push_str(&format!("{text:?}"));
        } else {
            out.push_str(&text);
        }
    }
    out
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_as_one_line_without_the_chain() {
        let l = r#"{"seq":7,"prev":"ab","time":"2026-12-02T08:00:00.000Z","event":"run_end","pid":3,"state":"exited","command":"sh -c true"}"#;
        assert_eq!(
            human(l),
            "    7 2026-12-02T08:00:00.000Z run_end    command=\"sh -c true\" pid=3 state=exited"
        );
        assert_eq!(human("junk"), "junk");
    }
}
