//! [`RateLimiter`]: per-agent cooldown after repeated validation refusals.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Refusals within [`WINDOW`] that start a cooldown.
pub const MAX_REFUSALS: usize = 5;
/// The window refusals are counted in.
pub const WINDOW: Duration = Duration::from_secs(60);
/// How long a cooldown lasts.
pub const COOLDOWN: Duration = Duration::from_secs(60);

/// A request refused because its agent is cooling down.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("rate limited: too many rejected commands, retry in {retry_in_secs}s")]
pub struct RateLimited {
    /// Seconds left in the cooldown, rounded up, at least 1.
    pub retry_in_secs: u64,
}

#[derive(Debug, Default)]
struct AgentState {
    /// Times of recent refusals, oldest first, all within [`WINDOW`].
    refusals: VecDeque<Instant>,
    /// End of the current cooldown.
    cooldown_until: Option<Instant>,
}

impl AgentState {
    fn prune(&mut self, now: Instant) {
        while self
            .refusals
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= WINDOW)
        {
            self.refusals.pop_front();
        }
        if self.cooldown_until.is_some_and(|end| end <= now) {
            self.cooldown_until = None;
        }
    }

    fn is_idle(&self) -> bool {
        self.refusals.is_empty() && self.cooldown_until.is_none()
    }
}

/// Counts validation refusals per agent: the fifth within 60 s puts that agent
/// (only) on a 60 s cooldown. Thread-safe; agents with nothing recent are
/// forgotten, so memory is bounded by the agents active in the last minute.
#[derive(Debug, Default)]
pub struct RateLimiter {
    agents: Mutex<HashMap<String, AgentState>>,
}

impl RateLimiter {
    /// An empty limiter.
    pub fn new() -> RateLimiter {
        RateLimiter::default()
    }

    /// `Err` while `agent` is cooling down at `now`.
    pub fn check(&self, agent: &str, now: Instant) -> Result<(), RateLimited> {
        let mut agents = self.agents.lock().unwrap_or_else(|e| e.into_inner());
        let Some(state) = agents.get_mut(agent) else {
            return Ok(());
        };
        state.prune(now);
        match state.cooldown_until {
            Some(end) => {
                let left = end.saturating_duration_since(now);
                let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
                Err(RateLimited {
                    retry_in_secs: secs.max(1),
                })
            }
            None => {
                if state.is_idle() {
                    agents.remove(agent);
                }
                Ok(())
            }
        }
    }

    /// Records a validation refusal for `agent` at `now`; the fifth within the
    /// window starts the cooldown. Refusals during a cooldown are not counted.
    pub fn record_refusal(&self, agent: &str, now: Instant) {
        let mut agents = self.agents.lock().unwrap_or_else(|e| e.into_inner());
        agents.retain(|_, s| {
            s.prune(now);
            !s.is_idle()
        });
        let state = agents.entry(agent.to_string()).or_default();
        if state.cooldown_until.is_some() {
            return;
        }
        state.refusals.push_back(now);
        if state.refusals.len() >= MAX_REFUSALS {
            state.refusals.clear();
            state.cooldown_until = Some(now + COOLDOWN);
        }
    }

    /// Agents currently remembered (with recent refusals or a cooldown).
    pub fn tracked_agents(&self) -> usize {
        self.agents.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}
