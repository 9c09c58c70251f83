//! Per-run resource limits (docs/tools.md, `limits:`), shared by the sandbox policy
//! and tool metadata: the same block, the same syntax, the same meaning.
//!
//! Every value is per run (the tool and every process it starts) except
//! `file_size` and `open_files`, which bind each process. `0` means unlimited.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use crate::{format_duration, parse_duration, parse_size};

/// The `limits:` block. `0` (or [`Duration::ZERO`]) is "unlimited".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    /// Processes and threads alive at once in the run.
    pub processes: u64,
    /// Bytes of memory of the whole run.
    pub memory: u64,
    /// CPU time of the whole run.
    pub cpu: Duration,
    /// Largest file a process of the run may write, in bytes.
    pub file_size: u64,
    /// Descriptors per process.
    pub open_files: u64,
}

/// One limit, by the name the protocol (docs/protocol.md) gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitName {
    /// `processes`
    Processes,
    /// `memory`
    Memory,
    /// `cpu`
    Cpu,
    /// `file_size`
    FileSize,
    /// `open_files`
    OpenFiles,
}

impl LimitName {
    /// The key in the `limits:` block.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitName::Processes => "processes",
            LimitName::Memory => "memory",
            LimitName::Cpu => "cpu",
            LimitName::FileSize => "file_size",
            LimitName::OpenFiles => "open_files",
        }
    }
}

/// The default processes limit of the built-in policy.
pub const DEFAULT_PROCESSES: u64 = 1024;

impl Limits {
    /// The built-in policy's limits: `processes: 1024`, everything else unlimited.
    pub fn policy_default() -> Limits {
        Limits {
            processes: DEFAULT_PROCESSES,
            ..Limits::default()
        }
    }

    /// These limits, tightened by `tool`'s: each value `tool` sets applies when it
    /// is lower than ours (or ours is unlimited). A tool never loosens a limit.
    pub fn tightened_by(&self, tool: &Limits) -> Limits {
        fn min(a: u64, b: u64) -> u64 {
            match (a, b) {
                (0, b) => b,
                (a, 0) => a,
                (a, b) => a.min(b),
            }
        }
        let cpu = match (self.cpu, tool.cpu) {
            (Duration::ZERO, b) => b,
            (a, Duration::ZERO) => a,
            (a, b) => a.min(b),
        };
        Limits {
            processes: min(self.processes, tool.processes),
            memory: min(self.memory, tool.memory),
            cpu,
            file_size: min(self.file_size, tool.file_size),
            open_files: min(self.open_files, tool.open_files),
        }
    }

    /// Whether nothing is limited.
    pub fn is_unlimited(&self) -> bool {
        *self == Limits::default()
    }

    /// The value of `name`, formatted as in docs/protocol.md's limit line
    /// (`processes 64`, `memory 64MiB`, `cpu 10s`).
    pub fn describe(&self, name: LimitName) -> String {
        let value = match name {
            LimitName::Processes => self.processes.to_string(),
            LimitName::OpenFiles => self.open_files.to_string(),
            LimitName::Memory => format_size(self.memory),
            LimitName::FileSize => format_size(self.file_size),
            LimitName::Cpu => format_duration(self.cpu),
        };
        format!("{} {value}", name.as_str())
    }
}

/// `n` bytes with the largest binary unit that divides it (`64MiB`, `1536KiB`, `100`).
pub fn format_size(n: u64) -> String {
    for (unit, scale) in [
        ("TiB", 1u64 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ] {
        if n >= scale && n.is_multiple_of(scale) {
            return format!("{}{unit}", n / scale);
        }
    }
    n.to_string()
}

/// The line a result ends with when a limit was reached (docs/containment.md).
pub fn limit_reached_line(limits: &Limits, name: LimitName) -> String {
    format!("[toolsrv: limit reached: {}]", limits.describe(name))
}

impl<'de> Deserialize<'de> for Limits {
    /// A tool's block: what it does not set is unlimited (so it tightens nothing).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Limits, D::Error> {
        d.deserialize_option(LimitsVisitor(Limits::default()))
    }
}

/// A policy's block: what it does not set (or a missing block) takes
/// [`Limits::policy_default`], so a policy that only sets `memory` keeps the
/// default `processes` limit.
pub fn deserialize_policy_limits<'de, D: Deserializer<'de>>(d: D) -> Result<Limits, D::Error> {
    d.deserialize_option(LimitsVisitor(Limits::policy_default()))
}

struct LimitsVisitor(Limits);

impl<'de> Visitor<'de> for LimitsVisitor {
    type Value = Limits;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a limits block (processes, memory, cpu, file_size, open_files)")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Limits, E> {
        Ok(self.0)
    }

    fn visit_none<E: de::Error>(self) -> Result<Limits, E> {
        Ok(self.0)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Limits, D::Error> {
        d.deserialize_map(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Limits, A::Error> {
        let mut out = self.0;
        let mut seen: Vec<String> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if seen.contains(&key) {
                return Err(de::Error::custom(format!("duplicate limit \"{key}\"")));
            }
            let kind = match key.as_str() {
                "processes" | "open_files" => Kind::Count,
                "memory" | "file_size" => Kind::Size,
                "cpu" => Kind::Duration,
                other => {
                    return Err(de::Error::custom(format!(
                        "unknown limit \"{other}\": expected processes, memory, cpu, file_size or open_files"
                    )))
                }
            };
            let value = map.next_value_seed(ValueSeed { key: &key, kind })?;
            match key.as_str() {
                "processes" => out.processes = value.count(),
                "open_files" => out.open_files = value.count(),
                "memory" => out.memory = value.count(),
                "file_size" => out.file_size = value.count(),
                _ => out.cpu = value.duration(),
            }
            seen.push(key);
        }
        Ok(out)
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Count,
    Size,
    Duration,
}

enum Value {
    Count(u64),
    Duration(Duration),
}

impl Value {
    fn count(self) -> u64 {
        match self {
            Value::Count(n) => n,
            Value::Duration(d) => d.as_secs(),
        }
    }
    fn duration(self) -> Duration {
        match self {
            Value::Duration(d) => d,
            Value::Count(n) => Duration::from_secs(n),
        }
    }
}

struct ValueSeed<'k> {
    key: &'k str,
    kind: Kind,
}

impl<'de> de::DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.kind {
            Kind::Count => write!(f, "a non-negative whole number for limit \"{}\"", self.key),
            Kind::Size => write!(f, "a size in bytes (e.g. 64MiB) for limit \"{}\"", self.key),
            Kind::Duration => write!(f, "a duration (e.g. 10m) for limit \"{}\"", self.key),
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        self.visit_u64(0)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(match self.kind {
            Kind::Duration => Value::Duration(Duration::from_secs(v)),
            _ => Value::Count(v),
        })
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Err(E::custom(format!(
                "invalid limit {}: {v}: limits are 0 (unlimited) or more",
                self.key
            ))),
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        let bad = |why: String| E::custom(format!("invalid limit {}: {why}", self.key));
        match self.kind {
            Kind::Count => v
                .trim()
                .parse::<u64>()
                .map(Value::Count)
                .map_err(|_| bad(format!("{v:?} is not a whole number"))),
            Kind::Size => parse_size(v)
                .map(Value::Count)
                .map_err(|e| bad(e.to_string())),
            Kind::Duration => parse_duration(v)
                .map(Value::Duration)
                .map_err(|e| bad(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(y: &str) -> Result<Limits, String> {
        serde_json::from_str::<Limits>(y).map_err(|e| e.to_string())
    }

    #[test]
    fn values_take_units() {
        let l = parse(r#"{"processes": 32, "memory": "64MiB", "cpu": "1m30s", "file_size": 1048576, "open_files": "100"}"#)
            .unwrap();
        assert_eq!(l.processes, 32);
        assert_eq!(l.memory, 64 << 20);
        assert_eq!(l.cpu, Duration::from_secs(90));
        assert_eq!(l.file_size, 1 << 20);
        assert_eq!(l.open_files, 100);
        assert_eq!(l.describe(LimitName::Memory), "memory 64MiB");
        assert_eq!(
            limit_reached_line(&l, LimitName::Processes),
            "[toolsrv: limit reached: processes 32]"
        );
    }

    #[test]
    fn bad_values_name_the_limit() {
        let e = parse(r#"{"memory": "lots"}"#).unwrap_err();
        assert!(e.contains("invalid limit memory"), "{e}");
        let e = parse(r#"{"processes": -1}"#).unwrap_err();
        assert!(e.contains("invalid limit processes"), "{e}");
        let e = parse(r#"{"threads": 4}"#).unwrap_err();
        assert!(e.contains("unknown limit \"threads\""), "{e}");
        let e = parse(r#"{"cpu": "soon"}"#).unwrap_err();
        assert!(e.contains("invalid limit cpu"), "{e}");
    }

    #[test]
    fn a_tool_tightens_but_never_loosens() {
        let policy = Limits {
            processes: 64,
            memory: 1 << 30,
            ..Limits::default()
        };
        let tool = Limits {
            processes: 1000,
            memory: 64 << 20,
            file_size: 1 << 20,
            ..Limits::default()
        };
        let l = policy.tightened_by(&tool);
        assert_eq!(
            l.processes, 64,
            "a higher value of the tool does not loosen"
        );
        assert_eq!(l.memory, 64 << 20);
        assert_eq!(
            l.file_size,
            1 << 20,
            "unlimited in the policy: the tool's applies"
        );
        let none = Limits::default();
        assert_eq!(
            policy.tightened_by(&none),
            policy,
            "0 in the tool never loosens"
        );
    }
}
