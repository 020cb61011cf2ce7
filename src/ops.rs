//! The operations service: what the health, metrics and admin reads need to
//! know about the running process (store, bus, agents' breakers, uptime).

use std::time::{Duration, Instant};

use agon_projections::admin_stats::AdminStatsView;

use crate::agents::Agents;
use crate::bus::Bus;
use crate::store::dead_letters::DeadLetter;
use crate::store::{EventLog, StoreError};

/// The operations service; cheap to clone.
#[derive(Debug, Clone)]
pub struct Ops {
    log: EventLog,
    bus: Bus,
    agents: Agents,
    started: Instant,
    seal_interval: Duration,
}

impl Ops {
    pub fn new(log: EventLog, bus: Bus, agents: Agents, seal_interval: Duration) -> Self {
        Self {
            log,
            bus,
            agents,
            started: Instant::now(),
            seal_interval,
        }
    }

    /// The event log, for probes of the store and of the read models' lag.
    pub fn log(&self) -> &EventLog {
        &self.log
    }

    pub fn bus(&self) -> &Bus {
        &self.bus
    }

    pub fn agents(&self) -> &Agents {
        &self.agents
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    pub fn seal_interval(&self) -> Duration {
        self.seal_interval
    }

    /// Events consumers gave up on, oldest first.
    pub async fn dead_letters(&self) -> Result<Vec<DeadLetter>, StoreError> {
        self.log.dead_letters().await
    }

    /// Hands dead letter `id` to its consumer again; `None` when there is
    /// no such dead letter.
    pub async fn retry_dead_letter(&self, id: &str) -> Result<Option<DeadLetter>, StoreError> {
        self.bus.delivery().retry_dead_letter(&self.log, id).await
    }

    /// The service-wide counts of the admin statistics read model.
    pub async fn admin_stats(&self) -> Result<AdminStatsView, StoreError> {
        crate::projection::reads::admin_stats(&self.log).await
    }
}
