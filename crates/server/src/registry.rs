//! The per-agent registry of loaded tools (architecture, "Per-agent registry").
//!
//! Deliberately separate from discovery: discovery describes every tool on the
//! host; loading makes one callable for one agent. Callers resolve metadata
//! (file I/O) *before* calling [`Registry::load`], so the lock is never held
//! across I/O.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use toolsrv_base::{FileStamp, LockUnpoisoned};
use toolsrv_metadata::{Catalog, MetaError, Tool};
use toolsrv_protocol::{validate_agent_id, validate_tool_name, NameError};

use crate::filewatch::FileWatch;

/// Why an unload failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RegistryError {
    /// The tool is not loaded for that agent.
    #[error("tool {tool:?} is not loaded for agent {agent:?}")]
    NotLoaded {
        /// The tool name.
        tool: String,
        /// The agent ID.
        agent: String,
    },
}

#[derive(Default)]
struct Agent {
    tools: BTreeMap<String, Loaded>,
    revision: u64,
}

/// A loaded tool and what its metadata file was when it was loaded.
struct Loaded {
    tool: Arc<Tool>,
    stamp: Option<FileStamp>,
    /// The [`FileWatch`] generation at which the file was last found as it
    /// was when loaded (`None`: not checked since loaded).
    checked: Option<u64>,
}

/// A loaded tool as found by [`Registry::lookup_checked`].
pub(crate) enum Lookup {
    /// Loaded, and its metadata file is as it was when loaded.
    Current(Arc<Tool>),
    /// Loaded, but its metadata file changed (or went away) since: reload it.
    Changed(Arc<Tool>),
}

/// Loaded tools and revision counters by agent ID.
pub(crate) struct Registry {
    agents: Mutex<HashMap<String, Agent>>,
    /// Says when loaded tools' files (and the policy file) may have changed.
    pub(crate) files: FileWatch,
}

impl Registry {
    /// An empty registry.
    pub(crate) fn new() -> Registry {
        Registry {
            agents: Mutex::new(HashMap::new()),
            files: FileWatch::new(),
        }
    }

    /// Make `tool` (already resolved) callable for `agent`; returns the new revision.
    /// Loading an already loaded tool replaces its metadata and still counts.
    pub(crate) fn load(&self, agent: &str, tool: Tool) -> u64 {
        // Watched before its stamp is taken: a change in between is seen.
        self.files.watch(&tool.source);
        let mut g = self.agents.lock_unpoisoned();
        let stamp = FileStamp::of_path(&tool.source);
        let a = g.entry(agent.to_string()).or_default();
        a.tools.insert(
            tool.name.clone(),
            Loaded {
                tool: Arc::new(tool),
                stamp,
                checked: None,
            },
        );
        a.revision += 1;
        a.revision
    }

    /// Remove `tool` from `agent`'s loaded set; returns the new revision.
    pub(crate) fn unload(&self, agent: &str, tool: &str) -> Result<u64, RegistryError> {
        let mut g = self.agents.lock_unpoisoned();
        let not_loaded = || RegistryError::NotLoaded {
            tool: tool.to_string(),
            agent: agent.to_string(),
        };
        let a = g.get_mut(agent).ok_or_else(not_loaded)?;
        a.tools.remove(tool).ok_or_else(not_loaded)?;
        a.revision += 1;
        Ok(a.revision)
    }

    /// `agent`'s loaded tools, sorted by name.
    pub(crate) fn loaded(&self, agent: &str) -> Vec<Arc<Tool>> {
        self.agents
            .lock_unpoisoned()
            .get(agent)
            .map(|a| a.tools.values().map(|l| l.tool.clone()).collect())
            .unwrap_or_default()
    }

    /// One loaded tool.
    pub(crate) fn lookup(&self, agent: &str, tool: &str) -> Option<Arc<Tool>> {
        self.agents
            .lock_unpoisoned()
            .get(agent)
            .and_then(|a| a.tools.get(tool).map(|l| l.tool.clone()))
    }

    /// One loaded tool, and whether its metadata file changed since it was
    /// loaded. `generation` is [`FileWatch::generation`] now: a file already
    /// found unchanged at that generation is not looked at again; otherwise
    /// one `stat` of the file, outside the lock.
    pub(crate) fn lookup_checked(
        &self,
        agent: &str,
        tool: &str,
        generation: u64,
    ) -> Option<Lookup> {
        let (t, stamp) = {
            let g = self.agents.lock_unpoisoned();
            let l = g.get(agent)?.tools.get(tool)?;
            if l.checked == Some(generation) {
                return Some(Lookup::Current(l.tool.clone()));
            }
            (l.tool.clone(), l.stamp)
        };
        if FileStamp::of_path(&t.source) != stamp {
            return Some(Lookup::Changed(t));
        }
        let mut g = self.agents.lock_unpoisoned();
        if let Some(l) = g.get_mut(agent).and_then(|a| a.tools.get_mut(tool)) {
            // Only if it is still the version just checked.
            if Arc::ptr_eq(&l.tool, &t) {
                l.checked = Some(generation);
            }
        }
        Some(Lookup::Current(t))
    }

    /// `agent`'s revision: 0 for an agent never seen.
    pub(crate) fn revision(&self, agent: &str) -> u64 {
        self.agents
            .lock_unpoisoned()
            .get(agent)
            .map_or(0, |a| a.revision)
    }
}

/// Why a `ctl` command failed; the text is the `Rerror`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CtlError {
    /// `load`/`unload` without exactly an agent and a tool.
    #[error("usage: {verb} <agent> <tool>, got {line:?}")]
    Usage {
        /// `load` or `unload`.
        verb: String,
        /// The command line.
        line: String,
    },
    /// Neither `load` nor `unload`.
    #[error("unknown ctl command {0:?}")]
    Unknown(String),
    /// A malformed agent ID or tool name.
    #[error(transparent)]
    Name(#[from] NameError),
    /// The tool cannot be loaded.
    #[error(transparent)]
    Resolve(#[from] MetaError),
    /// The tool to unload is not loaded.
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

impl From<CtlError> for toolsrv_vfs::Error {
    fn from(e: CtlError) -> toolsrv_vfs::Error {
        toolsrv_vfs::Error::new(e.to_string())
    }
}

/// Parse and apply one `ctl` command (`load <agent> <tool>` resolves the tool
/// in `catalog` first, outside the registry's lock).
pub(crate) fn apply_ctl(
    registry: &Registry,
    catalog: &Catalog,
    line: &str,
) -> Result<(), CtlError> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let (verb, agent, tool) = match words.as_slice() {
        [verb @ ("load" | "unload"), agent, tool] => (*verb, *agent, *tool),
        [verb @ ("load" | "unload"), ..] => {
            return Err(CtlError::Usage {
                verb: verb.to_string(),
                line: line.to_string(),
            });
        }
        [other, ..] => return Err(CtlError::Unknown(other.to_string())),
        [] => return Ok(()),
    };
    validate_agent_id(agent)?;
    validate_tool_name(tool)?;
    if verb == "load" {
        let rev = registry.load(agent, catalog.resolve(tool)?);
        tracing::info!(agent, tool, rev, "tool loaded");
    } else {
        let rev = registry.unload(agent, tool)?;
        tracing::info!(agent, tool, rev, "tool unloaded");
    }
    Ok(())
}
