//! The per-agent registry of loaded tools (architecture, "Per-agent registry").
//!
//! Deliberately separate from discovery: discovery describes every tool on the
//! host; loading makes one callable for one agent. Callers resolve metadata
//! (file I/O) *before* calling [`Registry::load`], so the lock is never held
//! across I/O.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use toolsrv_metadata::Tool;

/// Why an unload failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
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
    tools: BTreeMap<String, Arc<Tool>>,
    revision: u64,
}

/// Loaded tools and revision counters by agent ID.
#[derive(Default)]
pub struct Registry {
    agents: Mutex<HashMap<String, Agent>>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Agent>> {
        self.agents.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Make `tool` (already resolved) callable for `agent`; returns the new revision.
    /// Loading an already loaded tool replaces its metadata and still counts.
    pub fn load(&self, agent: &str, tool: Tool) -> u64 {
        let mut g = self.lock();
        let a = g.entry(agent.to_string()).or_default();
        a.tools.insert(tool.name.clone(), Arc::new(tool));
        a.revision += 1;
        a.revision
    }

    /// Remove `tool` from `agent`'s loaded set; returns the new revision.
    pub fn unload(&self, agent: &str, tool: &str) -> Result<u64, RegistryError> {
        let mut g = self.lock();
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
    pub fn loaded(&self, agent: &str) -> Vec<Arc<Tool>> {
        self.lock()
            .get(agent)
            .map(|a| a.tools.values().cloned().collect())
            .unwrap_or_default()
    }

    /// One loaded tool.
    pub fn lookup(&self, agent: &str, tool: &str) -> Option<Arc<Tool>> {
        self.lock()
            .get(agent)
            .and_then(|a| a.tools.get(tool).cloned())
    }

    /// `agent`'s revision: 0 for an agent never seen.
    pub fn revision(&self, agent: &str) -> u64 {
        self.lock().get(agent).map_or(0, |a| a.revision)
    }
}
