//! The compiled policies: for each policy version in use, one value holding
//! what is derived from it (its validator and its resolved rules), found
//! once per request by one key ([`PolicyKey`]), and the confinements
//! (Landlock rulesets and seccomp programs) by the rules they enforce,
//! whichever policy those came from.
//!
//! The key is the policy's identity today: a reloaded policy file is a new
//! value, so a new key, and what was derived from the old one is dropped
//! with it. A set of grants joins the key later; what a grant does not
//! touch (the view, a confinement whose rules came out equal) is then found
//! by its own content, not rebuilt.

use std::sync::{Arc, Mutex};

use toolsrv_base::LockUnpoisoned;
use toolsrv_sandbox::{Confinement, Policy, PolicyStore, ResolvedRules};
use toolsrv_validate::Validator;

use super::cache::{Same, TtlCache};
use super::Refused;

/// How many compiled policies are kept (the main policy and the profiles in
/// use; the oldest is dropped first).
const COMPILED: usize = 32;

/// How many prepared confinements are kept for reuse.
const CONFINEMENTS: usize = 16;

/// What a compiled policy is found by.
#[derive(PartialEq)]
pub(crate) struct PolicyKey {
    /// The policy, by identity.
    policy: Same<Policy>,
}

/// What resolved rules are cached by within a compiled policy: the working
/// directory opened, the tool as loaded (a tool file replaced by rename is
/// reloaded as a new value, and its rule must name the new file), the
/// executables, and the view they are for (its address: a view's
/// copy-on-write caches are its own files).
pub(crate) type RulesKey = (
    toolsrv_sandbox::FileId,
    Same<toolsrv_metadata::Tool>,
    Vec<std::path::PathBuf>,
    usize,
);

/// One policy version and what is derived from it.
pub(crate) struct Compiled {
    key: PolicyKey,
    /// The policy.
    pub(crate) policy: Arc<Policy>,
    /// Its validator (built-in rules plus its `validation.deny`), once built.
    validator: Mutex<Option<Arc<Validator>>>,
    /// Its resolved rules, by [`RulesKey`].
    pub(crate) rules: TtlCache<RulesKey, Arc<ResolvedRules>>,
    /// Its `network.domains` and `network.hosts` and its networks made
    /// ahead, when it lists domains.
    network: Option<super::network::Supply>,
}

impl Compiled {
    fn new(policy: Arc<Policy>, networks: &Arc<super::network::Networks>) -> Compiled {
        Compiled {
            key: PolicyKey {
                policy: Same(policy.clone()),
            },
            validator: Mutex::new(None),
            rules: TtlCache::default(),
            network: policy
                .network
                .allowlist()
                .map(|a| super::network::Supply::new(a, networks.clone())),
            policy,
        }
    }

    /// Where a run's own network comes from, when the policy lists domains.
    pub(crate) fn network(&self) -> Option<&super::network::Supply> {
        self.network.as_ref()
    }

    /// The policy's validator, built on first use. A policy whose rules do
    /// not compile is refused, each time, with the reason.
    pub(crate) fn validator(&self) -> Result<Arc<Validator>, Refused> {
        if let Some(v) = &*self.validator.lock_unpoisoned() {
            return Ok(v.clone());
        }
        let v = Arc::new(Validator::new(&self.policy.validation.deny)?);
        *self.validator.lock_unpoisoned() = Some(v.clone());
        Ok(v)
    }
}

/// The policy file and its profiles, compiled as they are used.
pub(crate) struct Policies {
    /// The sandbox policy (re-read when it changes) and its profiles.
    pub(crate) store: PolicyStore,
    /// The compiled policy in effect and the file-watch generation it was
    /// checked at ([`Policies::main`]).
    checked: Mutex<Option<(u64, Arc<Compiled>)>>,
    /// The compiled policies in use, newest last.
    compiled: Mutex<Vec<Arc<Compiled>>>,
    /// Confinements by the rules they enforce (a re-resolved but equal set
    /// of rules reuses its ruleset). Rules compare by the files they were
    /// resolved to (`ResolvedRules::ids`, the working directory's
    /// identity), not only by their paths.
    confinements: Mutex<Vec<(Arc<ResolvedRules>, Arc<Confinement>)>>,
    /// Pretend the kernel supports at most this Landlock ABI (test hook).
    abi_limit: Option<i32>,
    /// How runs under `network.domains` get their network.
    pub(crate) networks: Arc<super::network::Networks>,
}

impl Policies {
    /// The policies of `store`, confined for a kernel of at most
    /// `abi_limit` (a test hook; `None`: what the kernel has).
    pub(crate) fn new(store: PolicyStore, abi_limit: Option<i32>) -> Policies {
        Policies {
            store,
            checked: Mutex::new(None),
            compiled: Mutex::new(Vec::new()),
            confinements: Mutex::new(Vec::new()),
            abi_limit,
            networks: Arc::default(),
        }
    }

    /// The compiled policy a request names: `None` or `default` is the
    /// policy in effect ([`Policies::main`]), another name a profile.
    pub(crate) fn for_request(
        &self,
        profile: Option<&str>,
        generation: u64,
        before_reading: impl FnOnce(),
    ) -> Result<Arc<Compiled>, Refused> {
        match profile {
            None | Some("default") => Ok(self.main(generation, before_reading)),
            Some(name) => Ok(self.compiled(self.store.profile(name)?)),
        }
    }

    /// The policy in effect ([`PolicyStore::current`]), looked at again only
    /// when the file-watch `generation` moved since it last was (the policy
    /// file is watched from startup: see [`crate::filewatch`]);
    /// `before_reading` runs first then (the guard's catch-up: a policy file
    /// a tool just planted goes to quarantine before it can be read).
    pub(crate) fn main(&self, generation: u64, before_reading: impl FnOnce()) -> Arc<Compiled> {
        if let Some((g, c)) = &*self.checked.lock_unpoisoned() {
            if *g == generation {
                return c.clone();
            }
        }
        before_reading();
        let c = self.compiled(self.store.current());
        *self.checked.lock_unpoisoned() = Some((generation, c.clone()));
        c
    }

    /// The compiled value of `policy`, made on its first use.
    fn compiled(&self, policy: Arc<Policy>) -> Arc<Compiled> {
        let key = PolicyKey {
            policy: Same(policy),
        };
        let mut all = self.compiled.lock_unpoisoned();
        if let Some(c) = all.iter().find(|c| c.key == key) {
            return c.clone();
        }
        let c = Arc::new(Compiled::new(key.policy.0, &self.networks));
        if all.len() >= COMPILED {
            all.remove(0);
        }
        all.push(c.clone());
        c
    }

    /// The prepared Landlock/seccomp confinement for `rules`, cached.
    pub(crate) fn confinement(
        &self,
        rules: &Arc<ResolvedRules>,
    ) -> Result<Arc<Confinement>, Refused> {
        {
            let mut cache = self.confinements.lock_unpoisoned();
            // The same resolution (the common case) is found by identity,
            // without comparing every path.
            if let Some((_, c)) = cache.iter().find(|(r, _)| Arc::ptr_eq(r, rules)) {
                return Ok(c.clone());
            }
            // A re-resolution that came out equal: keep its ruleset, and key
            // it by the new resolution from now on.
            if let Some((r, c)) = cache.iter_mut().find(|(r, _)| **r == **rules) {
                *r = rules.clone();
                return Ok(c.clone());
            }
        }
        let c = Arc::new(
            Confinement::prepare_with_abi_limit(rules, self.abi_limit).map_err(Refused::Sandbox)?,
        );
        for note in c.unenforced() {
            tracing::warn!(what = %note, "sandbox rule not enforced by this kernel (best effort)");
        }
        if c.rules_skipped() || rules.degraded {
            // Used for this run only: a rule missing for now (out of
            // descriptors) must not stay missing for the next runs.
            return Ok(c);
        }
        let mut cache = self.confinements.lock_unpoisoned();
        if cache.len() >= CONFINEMENTS {
            cache.remove(0);
        }
        cache.push((rules.clone(), c.clone()));
        Ok(c)
    }

    /// Prepares at startup what the first call under the policy in effect
    /// would otherwise build: its validator, with the built-in rules'
    /// regular expressions (compiled on their first use: a check of a
    /// harmless command).
    pub(crate) fn warm_up(&self) {
        match self.compiled(self.store.current()).validator() {
            Ok(v) => {
                let _ = v.check("true", &[]);
            }
            Err(e) => {
                tracing::debug!(error = %e, "the validator could not be built at startup; the first call reports it");
            }
        }
    }
}
