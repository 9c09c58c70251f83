//! What the proxy refused a run, kept for `proc/<pid>/denials`: each
//! refusal with its time, kind, the access asked, the target and the
//! policy line that would allow it.

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::decide::Refusal;

/// What kind of thing was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DenialKind {
    /// A host by name (`network.domains`).
    Domain,
    /// A connection by address.
    Net,
}

impl DenialKind {
    /// Its name in a denial record.
    pub fn as_str(self) -> &'static str {
        match self {
            DenialKind::Domain => "domain",
            DenialKind::Net => "net",
        }
    }
}

/// One refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// When.
    pub time: SystemTime,
    /// By name or by address.
    pub kind: DenialKind,
    /// What was asked: `connect`, or `resolve` for a DNS question.
    pub access: &'static str,
    /// What was asked for (`host:port`, a name, or the request as far as
    /// it parsed).
    pub target: String,
    /// The refusal's text (what the tool read).
    pub reason: String,
    /// The policy line that would allow it (empty when none would).
    pub allow: String,
}

impl Denial {
    /// The record of `refusal` of a connection to `target`.
    pub fn of(refusal: &Refusal, target: String) -> Denial {
        let (kind, allow) = match refusal {
            Refusal::NotListed { suggest, .. } => (
                DenialKind::Domain,
                format!("network.domains: [\"{suggest}\"]"),
            ),
            Refusal::Literal { target } => {
                (DenialKind::Net, format!("network.domains: [\"{target}\"]"))
            }
            Refusal::Unreachable {
                target, address, ..
            } => (
                DenialKind::Domain,
                format!("network.hosts: {{\"{}\": \"{address}\"}}", target.host),
            ),
            Refusal::BadName { .. } | Refusal::NoAddress { .. } => {
                (DenialKind::Domain, String::new())
            }
            Refusal::Itself { .. } => (DenialKind::Net, String::new()),
        };
        Denial {
            time: SystemTime::now(),
            kind,
            access: "connect",
            target,
            reason: refusal.to_string(),
            allow,
        }
    }
}

/// The refusals of one proxy, readable while it serves.
#[derive(Debug, Clone, Default)]
pub struct Denials(Arc<Mutex<Vec<Denial>>>);

/// The most refusals kept per proxy (the oldest are kept: the count goes on).
const KEPT: usize = 10_000;

impl Denials {
    /// The refusals so far, oldest first.
    pub fn list(&self) -> Vec<Denial> {
        match self.0.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Records `d` and logs it.
    pub(crate) fn push(&self, d: Denial) {
        tracing::info!(target = %d.target, reason = %d.reason, "network proxy: refused");
        let mut g = match self.0.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if g.len() < KEPT {
            g.push(d);
        }
    }
}
