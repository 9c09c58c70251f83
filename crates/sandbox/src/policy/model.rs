//! The policy data model and its YAML (serde) mapping.
//!
//! Every section and key is optional (a missing or `null` section takes its
//! defaults) and unknown keys are errors. Values that are syntactically YAML but
//! semantically wrong (port 0, a deny pattern that is not a regex, an unknown
//! log level, a relative path) are rejected *inside* deserialization so that the
//! error carries the line of the offending value.

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;
pub(crate) use toolsrv_protocol::Limits;

/// A parsed `sandbox.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Policy {
    /// General settings.
    #[serde(deserialize_with = "null_default")]
    pub general: General,
    /// Filesystem access rules.
    #[serde(deserialize_with = "null_default")]
    pub filesystem: Filesystem,
    /// Network rules.
    #[serde(deserialize_with = "null_default")]
    pub network: Network,
    /// Names of variables passed through from toolsrv's own environment (an allowlist).
    #[serde(deserialize_with = "env_names")]
    pub env: Vec<String>,
    /// Credentials the tools use without seeing them (`network.domains`
    /// must list their hosts): each run's variable holds a placeholder the
    /// proxy replaces in requests to the secret's hosts.
    #[serde(deserialize_with = "secret_list")]
    pub secrets: Vec<SecretSpec>,
    /// Advanced options.
    #[serde(deserialize_with = "null_default")]
    pub advanced: Advanced,
    /// Command validation options.
    #[serde(deserialize_with = "null_default")]
    pub validation: Validation,
    /// Per-run resource limits (what is not set takes the built-in default).
    #[serde(deserialize_with = "toolsrv_protocol::deserialize_policy_limits")]
    pub limits: Limits,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            general: General::default(),
            filesystem: Filesystem::default(),
            network: Network::default(),
            env: Vec::new(),
            secrets: Vec::new(),
            advanced: Advanced::default(),
            validation: Validation::default(),
            limits: Limits::policy_default(),
        }
    }
}

/// One `secrets:` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretSpec {
    /// The variable the run sees (holding the placeholder).
    #[serde(deserialize_with = "env_name")]
    pub env: String,
    /// Where the real value comes from.
    pub from: SecretSource,
    /// The hosts it goes to (`name`: every port; `name:port`).
    #[serde(deserialize_with = "secret_hosts")]
    pub hosts: Vec<String>,
    /// Also into plain-HTTP requests to those hosts (default: TLS only).
    #[serde(default)]
    pub plaintext: bool,
}

/// Where a secret's value comes from: `env:NAME` (toolsrv's own
/// environment) or `file:PATH` (read at each run; the file is hidden from
/// every tool).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// A variable of toolsrv's own environment.
    Env(String),
    /// A file (a policy path: absolute, `~` or `{VARIABLE}`).
    File(String),
}

impl<'de> Deserialize<'de> for SecretSource {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if let Some(name) = text.strip_prefix("env:") {
            return check_env_name(name)
                .map(SecretSource::Env)
                .map_err(de::Error::custom);
        }
        if let Some(path) = text.strip_prefix("file:") {
            return check_path(path)
                .map(SecretSource::File)
                .map_err(de::Error::custom);
        }
        Err(de::Error::custom(format!(
            "secrets: from {text:?} is neither \"env:NAME\" nor \"file:PATH\""
        )))
    }
}

fn env_name<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let name = String::deserialize(d)?;
    check_env_name(&name).map_err(de::Error::custom)
}

fn secret_hosts<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let hosts = checked_list(
        d,
        |h| {
            toolsrv_netproxy::Allowlist::new(&[h.to_string()], &[])
                .map(|_| h.to_string())
                .map_err(|e| e.to_string().replace("network.domains", "secrets: hosts"))
        },
        "host names",
    )?;
    if hosts.is_empty() {
        return Err(de::Error::custom(
            "secrets: hosts is empty: name the hosts the secret goes to",
        ));
    }
    Ok(hosts)
}

fn secret_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<SecretSpec>, D::Error> {
    let list: Option<Vec<SecretSpec>> = Option::deserialize(d)?;
    let list = list.unwrap_or_default();
    let mut seen = std::collections::HashSet::new();
    for s in &list {
        if !seen.insert(s.env.clone()) {
            return Err(de::Error::custom(format!(
                "secrets: {} is listed twice",
                s.env
            )));
        }
    }
    Ok(list)
}

/// `general:` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct General {
    /// Run with what the kernel supports (`true`, the default) or refuse to run
    /// when a rule cannot be enforced.
    #[serde(deserialize_with = "null_true")]
    pub best_effort: bool,
    /// Optional log level for sandbox decisions: `debug`, `info`, `warn` or `error`
    /// (an empty string is the same as absent).
    #[serde(deserialize_with = "log_level")]
    pub log_level: Option<String>,
}

impl Default for General {
    fn default() -> Self {
        General {
            best_effort: true,
            log_level: None,
        }
    }
}

/// `filesystem:` section. Paths may contain `{VARIABLE}`s and a leading `~`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Filesystem {
    /// Read files, list directories.
    #[serde(deserialize_with = "paths")]
    pub ro: Vec<String>,
    /// `ro` + execute.
    #[serde(deserialize_with = "paths")]
    pub rox: Vec<String>,
    /// `ro` + write, create, remove, rename, truncate.
    #[serde(deserialize_with = "paths")]
    pub rw: Vec<String>,
    /// `rw` + execute.
    #[serde(deserialize_with = "paths")]
    pub rwx: Vec<String>,
    /// Paths or globs (`*` within a name, `**` across directories) hidden
    /// from every rule, added to the built-in list (docs/policy-format.md, "Protected paths").
    #[serde(deserialize_with = "paths")]
    pub(crate) deny_read: Vec<String>,
    /// Paths or globs read-only under every rule, added to the built-in list.
    #[serde(deserialize_with = "paths")]
    pub(crate) deny_write: Vec<String>,
}

/// `network:` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Network {
    /// `false`: no network at all. Default `true`.
    #[serde(deserialize_with = "null_true")]
    pub enabled: bool,
    /// Non-empty: only these TCP ports may be bound.
    #[serde(deserialize_with = "ports")]
    pub bind_tcp: Vec<u16>,
    /// Non-empty: only these TCP ports may be connected to.
    #[serde(deserialize_with = "ports")]
    pub connect_tcp: Vec<u16>,
    /// Non-empty: outbound TCP only through toolsrv's proxy, to the hosts
    /// these lines name (`pypi.org`, `*.pythonhosted.org`, `github.com:22`;
    /// no port: 80 and 443), in a network namespace of the run's own.
    #[serde(deserialize_with = "domain_lines")]
    pub domains: Vec<String>,
    /// Names the proxy resolves to fixed addresses (a hosts file of the
    /// policy's own: such a name may map to a private or loopback address).
    #[serde(deserialize_with = "host_pins")]
    pub hosts: Vec<(String, Vec<std::net::IpAddr>)>,
}

impl Default for Network {
    fn default() -> Self {
        Network {
            enabled: true,
            bind_tcp: Vec::new(),
            connect_tcp: Vec::new(),
            domains: Vec::new(),
            hosts: Vec::new(),
        }
    }
}

impl Network {
    /// The allowlist of `domains` and `hosts`; `None` without `domains`
    /// (the network is then limited only by `enabled` and the ports).
    pub fn allowlist(&self) -> Option<toolsrv_netproxy::Allowlist> {
        if self.domains.is_empty() {
            return None;
        }
        // Every line and pin was checked by the same call when parsed.
        toolsrv_netproxy::Allowlist::new(&self.domains, &self.hosts).ok()
    }
}

fn domain_lines<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    checked_list(
        d,
        |line| {
            toolsrv_netproxy::Allowlist::new(&[line.to_string()], &[])
                .map(|_| line.to_string())
                .map_err(|e| e.to_string())
        },
        "host names",
    )
}

/// `hosts:` a mapping of names to an address or a list of addresses.
fn host_pins<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<(String, Vec<std::net::IpAddr>)>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Addresses {
        One(String),
        Many(Vec<String>),
    }
    let map: Option<std::collections::BTreeMap<String, Addresses>> = Option::deserialize(d)?;
    let mut pins = Vec::new();
    for (name, addrs) in map.unwrap_or_default() {
        let list = match addrs {
            Addresses::One(a) => vec![a],
            Addresses::Many(v) => v,
        };
        let parsed = list
            .iter()
            .map(|a| {
                a.trim().parse::<std::net::IpAddr>().map_err(|_| {
                    de::Error::custom(format!(
                        "network.hosts: {name:?} maps to {a:?}, which is not an IP address"
                    ))
                })
            })
            .collect::<Result<Vec<_>, D::Error>>()?;
        pins.push((name, parsed));
    }
    toolsrv_netproxy::Allowlist::new(&[], &pins).map_err(de::Error::custom)?;
    Ok(pins)
}

/// `advanced:` section.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Advanced {
    /// Add the shared-library dependencies of the executable as `rox`.
    #[serde(deserialize_with = "null_default")]
    pub ldd: bool,
    /// Add the executable itself (for scripts: the script and its interpreter) as `rox`.
    #[serde(deserialize_with = "null_default")]
    pub add_exec: bool,
    /// Let tools use the kernel's keyrings (`keyctl`, `add_key`,
    /// `request_key`, refused by the seccomp filter otherwise). A run's
    /// session keyring is its own either way; the user's keyrings (`@u`,
    /// the persistent keyring) are then shared with the human.
    #[serde(deserialize_with = "null_default")]
    pub(crate) keyrings: bool,
}

/// `validation:` section.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Validation {
    /// Extra regular expressions that reject a command (added to the built-in rules).
    #[serde(deserialize_with = "deny_patterns")]
    pub deny: Vec<String>,
}

/// `null` (e.g. `general:` with nothing under it) means "the defaults".
fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A boolean whose default (and `null`) is `true`.
fn null_true<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Option::<bool>::deserialize(d)?.unwrap_or(true))
}

/// Deserializes a string through `check`, which runs inside the visitor so the
/// error carries the position of the value.
struct Checked<F>(F, &'static str);

impl<'de, F> Visitor<'de> for Checked<F>
where
    F: Fn(&str) -> Result<String, String>,
{
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.1)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        (self.0)(v).map_err(E::custom)
    }
}

/// A sequence (or `null`) of strings, each validated by `check`.
fn checked_list<'de, D, F>(d: D, check: F, what: &'static str) -> Result<Vec<String>, D::Error>
where
    D: Deserializer<'de>,
    F: Fn(&str) -> Result<String, String> + Copy,
{
    struct ListVisitor<F>(F, &'static str);

    impl<'de, F> Visitor<'de> for ListVisitor<F>
    where
        F: Fn(&str) -> Result<String, String> + Copy,
    {
        type Value = Vec<String>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(f, "a list of {}", self.1)
        }

        fn visit_unit<E: de::Error>(self) -> Result<Vec<String>, E> {
            Ok(Vec::new())
        }

        fn visit_none<E: de::Error>(self) -> Result<Vec<String>, E> {
            Ok(Vec::new())
        }

        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Vec<String>, D2::Error> {
            d.deserialize_seq(self)
        }

        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
            let mut out = Vec::new();
            while let Some(item) = seq.next_element_seed(ItemSeed(self.0, self.1))? {
                out.push(item);
            }
            Ok(out)
        }
    }

    struct ItemSeed<F>(F, &'static str);

    impl<'de, F> de::DeserializeSeed<'de> for ItemSeed<F>
    where
        F: Fn(&str) -> Result<String, String>,
    {
        type Value = String;

        fn deserialize<D2: Deserializer<'de>>(self, d: D2) -> Result<String, D2::Error> {
            d.deserialize_str(Checked(self.0, self.1))
        }
    }

    d.deserialize_option(ListVisitor(check, what))
}

fn paths<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    checked_list(d, check_path, "paths")
}

fn env_names<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    checked_list(d, check_env_name, "environment variable names")
}

fn deny_patterns<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    checked_list(d, check_regex, "regular expressions")
}

/// A policy path must be absolute, start with `~`, or start with a `{VARIABLE}`;
/// every `{` must open a well-formed variable name.
fn check_path(p: &str) -> Result<String, String> {
    if p.is_empty() {
        return Err("empty path in policy".to_string());
    }
    if !(p.starts_with('/') || p.starts_with('~') || p.starts_with('{')) {
        return Err(format!(
            "relative path \"{p}\": policy paths must be absolute or start with ~ or a {{VARIABLE}}"
        ));
    }
    let mut rest = p;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            return Err(format!("unclosed \"{{\" in path \"{p}\""));
        };
        let name = &after[..close];
        if !is_var_name(name) {
            return Err(format!(
                "invalid variable \"{{{name}}}\" in path \"{p}\": names are letters, digits and _"
            ));
        }
        rest = &after[close + 1..];
    }
    Ok(p.to_string())
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn check_env_name(name: &str) -> Result<String, String> {
    if is_var_name(name) {
        Ok(name.to_string())
    } else {
        Err(format!(
            "invalid environment variable name \"{name}\": names are letters, digits and _, not starting with a digit"
        ))
    }
}

fn check_regex(pattern: &str) -> Result<String, String> {
    match regex::Regex::new(pattern) {
        Ok(_) => Ok(pattern.to_string()),
        Err(e) => Err(format!(
            "invalid deny pattern \"{pattern}\": {}",
            one_line(&e.to_string())
        )),
    }
}

/// The regex crate's errors span several lines (with a caret diagram); keep the last.
fn one_line(s: &str) -> String {
    s.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or(s)
        .trim()
        .trim_start_matches("error: ")
        .to_string()
}

fn log_level<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    struct LevelVisitor;
    impl<'de> Visitor<'de> for LevelVisitor {
        type Value = Option<String>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("one of debug, info, warn, error")
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
            d.deserialize_str(self)
        }

        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            match v {
                "" => Ok(None),
                "debug" | "info" | "warn" | "error" => Ok(Some(v.to_string())),
                other => Err(E::custom(format!(
                    "invalid log_level \"{other}\": expected one of debug, info, warn, error"
                ))),
            }
        }
    }
    d.deserialize_option(LevelVisitor)
}

fn ports<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u16>, D::Error> {
    struct PortSeed;
    impl<'de> de::DeserializeSeed<'de> for PortSeed {
        type Value = u16;
        fn deserialize<D2: Deserializer<'de>>(self, d: D2) -> Result<u16, D2::Error> {
            d.deserialize_i64(PortVisitor)
        }
    }
    struct PortVisitor;
    impl Visitor<'_> for PortVisitor {
        type Value = u16;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a TCP port number between 1 and 65535")
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<u16, E> {
            match u16::try_from(v) {
                Ok(p) if p != 0 => Ok(p),
                _ => Err(E::custom(format!(
                    "invalid port {v}: ports must be between 1 and 65535"
                ))),
            }
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u16, E> {
            match u16::try_from(v) {
                Ok(p) if p != 0 => Ok(p),
                _ => Err(E::custom(format!(
                    "invalid port {v}: ports must be between 1 and 65535"
                ))),
            }
        }
    }
    struct ListVisitor;
    impl<'de> Visitor<'de> for ListVisitor {
        type Value = Vec<u16>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list of TCP port numbers")
        }

        fn visit_unit<E: de::Error>(self) -> Result<Vec<u16>, E> {
            Ok(Vec::new())
        }

        fn visit_none<E: de::Error>(self) -> Result<Vec<u16>, E> {
            Ok(Vec::new())
        }

        fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Vec<u16>, D2::Error> {
            d.deserialize_seq(self)
        }

        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u16>, A::Error> {
            let mut out = Vec::new();
            while let Some(p) = seq.next_element_seed(PortSeed)? {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
            Ok(out)
        }
    }
    d.deserialize_option(ListVisitor)
}
