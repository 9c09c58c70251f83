//! Credentials a run uses without seeing them (docs/network.md, "Secrets"):
//! the run's variable holds a placeholder shaped like the real value, and
//! the proxy puts the real value in place of the placeholder in the
//! request headers it forwards to that secret's hosts, and to no other.

use std::sync::Arc;

use hyper::header::{HeaderMap, HeaderValue, AUTHORIZATION, PROXY_AUTHORIZATION};

use crate::allow::normalize;

/// Prefixes of well-known token formats: a placeholder keeps its value's
/// prefix, so a client's format check passes.
const PREFIXES: &[&str] = &[
    "github_pat_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "glpat-",
    "sk-ant-",
    "sk-proj-",
    "sk-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "hf_",
    "npm_",
    "pypi-",
    "AKIA",
];

/// One secret of a run.
#[derive(Clone)]
pub struct Secret {
    /// The variable the run sees it by.
    pub name: String,
    /// The real value (never shown, logged or put in a run's reach).
    value: String,
    /// What the run's variable holds instead.
    pub placeholder: String,
    /// The hosts it goes to: `name` (every port) or `name:port`.
    hosts: Vec<(String, Option<u16>)>,
    /// Whether it also goes into plain-HTTP requests.
    pub plaintext: bool,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("name", &self.name)
            .field("hosts", &self.hosts)
            .field("plaintext", &self.plaintext)
            .finish_non_exhaustive()
    }
}

impl Secret {
    /// The secret `name` with `value` for `hosts`, with a fresh
    /// placeholder. A host line is `name` or `name:port`.
    pub fn new(name: &str, value: String, hosts: &[String], plaintext: bool) -> Secret {
        let hosts = hosts
            .iter()
            .map(|h| match h.rsplit_once(':') {
                Some((n, p)) if p.parse::<u16>().is_ok() => (normalize(n), p.parse().ok()),
                _ => (normalize(h), None),
            })
            .collect();
        Secret {
            name: name.to_string(),
            placeholder: placeholder_for(&value),
            value,
            hosts,
            plaintext,
        }
    }

    /// Whether it goes to `host:port`.
    pub fn binds(&self, host: &str, port: u16) -> bool {
        let host = normalize(host);
        self.hosts
            .iter()
            .any(|(h, p)| *h == host && p.is_none_or(|p| p == port))
    }
}

/// A placeholder for `value`: its length, its known prefix and the class
/// of each of its other characters (digit, lower, upper case letter; any
/// other kept as is); `toolsrv-secret-<random>` for a value without a
/// known prefix.
pub fn placeholder_for(value: &str) -> String {
    let Some(prefix) = PREFIXES.iter().find(|p| value.starts_with(**p)) else {
        let bytes: [u8; 16] = rand::random();
        return format!("toolsrv-secret-{}", hex::encode(bytes));
    };
    let mut out = String::with_capacity(value.len());
    out.push_str(prefix);
    for c in value[prefix.len()..].chars() {
        let r: u8 = rand::random();
        out.push(match c {
            '0'..='9' => char::from(b'0' + r % 10),
            'a'..='z' => char::from(b'a' + r % 26),
            'A'..='Z' => char::from(b'A' + r % 26),
            other => other,
        });
    }
    if out == value {
        // A value of only its prefix and symbols: nothing to vary.
        return placeholder_for(&format!("{value}0"));
    }
    out
}

/// A run's secrets.
#[derive(Clone, Default, Debug)]
pub struct Secrets(Arc<Vec<Secret>>);

impl Secrets {
    /// The run's secrets.
    pub fn new(list: Vec<Secret>) -> Secrets {
        Secrets(Arc::new(list))
    }

    /// Whether some secret goes to `host:port`: its TLS is then terminated
    /// by the proxy.
    pub(crate) fn intercepts(&self, host: &str, port: u16) -> bool {
        self.0.iter().any(|s| s.binds(host, port))
    }

    /// Whether some secret goes into plain-HTTP requests to `host:port`.
    pub(crate) fn in_plain_http(&self, host: &str, port: u16) -> bool {
        self.0.iter().any(|s| s.plaintext && s.binds(host, port))
    }

    /// Puts the real values in place of the placeholders of the secrets
    /// bound to `host:port` in `headers` (over verified TLS, or plain HTTP
    /// for those with `plaintext`), `Basic` credentials decoded for it.
    pub(crate) fn fill(&self, headers: &mut HeaderMap, host: &str, port: u16, tls: bool) {
        let bound: Vec<&Secret> = self
            .0
            .iter()
            .filter(|s| s.binds(host, port) && (tls || s.plaintext))
            .collect();
        if bound.is_empty() {
            return;
        }
        for (name, value) in headers.iter_mut() {
            let Ok(text) = value.to_str() else { continue };
            let mut new = replace_all(text, &bound);
            if name == AUTHORIZATION || name == PROXY_AUTHORIZATION {
                if let Some(b) = basic(&new, &bound) {
                    new = b;
                }
            }
            if new != text {
                if let Ok(v) = HeaderValue::from_str(&new) {
                    *value = v;
                }
            }
        }
    }
}

fn replace_all(text: &str, bound: &[&Secret]) -> String {
    let mut out = text.to_string();
    for s in bound {
        if out.contains(&s.placeholder) {
            out = out.replace(&s.placeholder, &s.value);
        }
    }
    out
}

/// `Basic <base64>` with placeholders in the decoded credentials, filled.
fn basic(value: &str, bound: &[&Secret]) -> Option<String> {
    use base64::Engine;
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let engine = base64::engine::general_purpose::STANDARD;
    let decoded = String::from_utf8(engine.decode(token.trim()).ok()?).ok()?;
    let filled = replace_all(&decoded, bound);
    (filled != decoded).then(|| format!("{scheme} {}", engine.encode(filled)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_placeholder_keeps_the_prefix_length_and_classes_of_its_value() {
        let v = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5";
        let p = placeholder_for(v);
        assert_eq!(p.len(), v.len());
        assert!(p.starts_with("ghp_") && p != v, "{p}");
        for (a, b) in v.chars().zip(p.chars()) {
            assert_eq!(a.is_ascii_digit(), b.is_ascii_digit());
            assert_eq!(a.is_ascii_lowercase(), b.is_ascii_lowercase());
            assert_eq!(a.is_ascii_uppercase(), b.is_ascii_uppercase());
        }
        assert_eq!(placeholder_for("sk-ant-api03-x_y").matches('_').count(), 1);
        let plain = placeholder_for("hunter2");
        assert!(
            plain.starts_with("toolsrv-secret-") && plain.len() == 47,
            "{plain}"
        );
    }

    #[test]
    fn only_bound_hosts_get_the_value_in_headers_and_basic_credentials() {
        let s = Secret::new(
            "GH",
            "ghp_REALREALREAL".into(),
            &["api.github.com".into(), "git.test:8443".into()],
            false,
        );
        let ph = s.placeholder.clone();
        let secrets = Secrets::new(vec![s]);
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, format!("Bearer {ph}").parse().unwrap());
        h.insert("x-other", format!("{ph}!").parse().unwrap());
        let mut to_other = h.clone();
        secrets.fill(&mut to_other, "evil.test", 443, true);
        assert_eq!(to_other, h, "untouched for another host");
        let mut plain = h.clone();
        secrets.fill(&mut plain, "api.github.com", 80, false);
        assert_eq!(plain, h, "untouched over plain HTTP");
        let mut wrong_port = h.clone();
        secrets.fill(&mut wrong_port, "git.test", 443, true);
        assert_eq!(wrong_port, h);
        secrets.fill(&mut h, "API.github.com", 443, true);
        assert_eq!(h[AUTHORIZATION], "Bearer ghp_REALREALREAL");
        assert_eq!(h["x-other"], "ghp_REALREALREAL!");
        use base64::Engine;
        let e = base64::engine::general_purpose::STANDARD;
        let mut b = HeaderMap::new();
        b.insert(
            AUTHORIZATION,
            format!("Basic {}", e.encode(format!("x-access-token:{ph}")))
                .parse()
                .unwrap(),
        );
        secrets.fill(&mut b, "git.test", 8443, true);
        assert_eq!(
            b[AUTHORIZATION],
            format!("Basic {}", e.encode("x-access-token:ghp_REALREALREAL")).as_str()
        );
    }
}
