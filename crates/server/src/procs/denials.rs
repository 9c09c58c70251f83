//! A run's denials (docs/protocol.md, "Denials"): what its sandbox refused
//! it, one record per distinct kind, access and target with a count, read
//! as `proc/<pid>/denials` (one JSON object per line) and summed up in the
//! last lines of its result. Today the network's (refused hosts, names and
//! addresses under `network.domains`) and the limits a run reached (their
//! own line in the result already says so: they are not summed up again).

use std::collections::HashMap;

use toolsrv_netproxy::Denial;
use toolsrv_protocol::{format_rfc3339_millis, LimitName, Limits};

/// The most denial lines a result carries; the rest are counted.
pub(crate) const SHOWN: usize = 5;

/// One distinct denial and how often it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    /// The first time.
    pub(crate) time: std::time::SystemTime,
    /// `domain` or `net`.
    pub(crate) kind: &'static str,
    /// `connect`, `resolve`.
    pub(crate) access: &'static str,
    /// `host:port`, a name or an address.
    pub(crate) target: String,
    /// How many times.
    pub(crate) count: u64,
    /// The policy line that would allow it.
    pub(crate) allow: String,
}

/// `denials` merged by (kind, access, target), in the order each first
/// happened.
pub(crate) fn records(denials: &[Denial]) -> Vec<Record> {
    let mut out: Vec<Record> = Vec::new();
    let mut index: HashMap<(&'static str, &'static str, &str), usize> = HashMap::new();
    for d in denials {
        let key = (d.kind.as_str(), d.access, d.target.as_str());
        match index.get(&key) {
            Some(&i) => out[i].count += 1,
            None => {
                index.insert(key, out.len());
                out.push(Record {
                    time: d.time,
                    kind: d.kind.as_str(),
                    access: d.access,
                    target: d.target.clone(),
                    count: 1,
                    allow: d.allow.clone(),
                });
            }
        }
    }
    out
}

/// The record of a run that reached `name` of `limits`: the access is the
/// limit's name, the target its value, the line that would allow more its
/// value doubled.
pub(crate) fn limit_record(limits: &Limits, name: LimitName) -> Record {
    let value_of = |l: &Limits| {
        l.describe(name)
            .split_once(' ')
            .map(|(_, v)| v.to_string())
            .unwrap_or_default()
    };
    let mut more = *limits;
    match name {
        LimitName::Processes => more.processes = more.processes.saturating_mul(2),
        LimitName::OpenFiles => more.open_files = more.open_files.saturating_mul(2),
        LimitName::Memory => more.memory = more.memory.saturating_mul(2),
        LimitName::FileSize => more.file_size = more.file_size.saturating_mul(2),
        LimitName::Cpu => more.cpu = more.cpu.saturating_mul(2),
    }
    Record {
        time: std::time::SystemTime::now(),
        kind: "limit",
        access: name.as_str(),
        target: value_of(limits),
        count: 1,
        allow: format!("limits.{}: {}", name.as_str(), value_of(&more)),
    }
}

/// The `proc/<pid>/denials` file: one JSON object per record and line.
pub(crate) fn json_lines(records: &[Record]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        let line = serde_json::json!({
            "time": format_rfc3339_millis(r.time),
            "kind": r.kind,
            "access": r.access,
            "target": r.target,
            "count": r.count,
            "allow": r.allow,
        });
        out.extend_from_slice(line.to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

/// The last lines of a result: at most [`SHOWN`] denials, then how many
/// more `proc/<pid>/denials` holds.
pub(crate) fn result_lines(records: &[Record], pid: u64) -> Vec<String> {
    let records: Vec<&Record> = records.iter().filter(|r| r.kind != "limit").collect();
    let mut lines: Vec<String> = records
        .iter()
        .take(SHOWN)
        .map(|r| {
            if r.allow.is_empty() {
                format!("[toolsrv: denied {} {}]", r.access, r.target)
            } else {
                format!(
                    "[toolsrv: denied {} {}; allow with {}]",
                    r.access, r.target, r.allow
                )
            }
        })
        .collect();
    if records.len() > SHOWN {
        lines.push(format!(
            "[toolsrv: {} more denials in proc/{pid}/denials]",
            records.len() - SHOWN
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolsrv_netproxy::DenialKind;

    fn denial(target: &str) -> Denial {
        Denial {
            time: std::time::SystemTime::UNIX_EPOCH,
            kind: DenialKind::Domain,
            access: "connect",
            target: target.into(),
            reason: "no".into(),
            allow: format!("network.domains: [\"{target}\"]"),
        }
    }

    #[test]
    fn the_same_denial_is_counted_and_past_five_the_rest_are_summed_up() {
        let mut all: Vec<Denial> = ["a.test", "b.test", "a.test"]
            .iter()
            .map(|t| denial(t))
            .collect();
        let r = records(&all);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].target.as_str(), r[0].count), ("a.test", 2));
        let text = String::from_utf8(json_lines(&r)).unwrap();
        assert_eq!(
            text.lines().next().unwrap(),
            r#"{"access":"connect","allow":"network.domains: [\"a.test\"]","count":2,"kind":"domain","target":"a.test","time":"1970-01-01T00:00:00.000Z"}"#
        );
        all.extend(["c", "d", "e", "f", "g"].iter().map(|t| denial(t)));
        let lines = result_lines(&records(&all), 7);
        assert_eq!(lines.len(), 6);
        assert_eq!(
            lines[0],
            "[toolsrv: denied connect a.test; allow with network.domains: [\"a.test\"]]"
        );
        assert_eq!(lines[5], "[toolsrv: 2 more denials in proc/7/denials]");
    }
}
