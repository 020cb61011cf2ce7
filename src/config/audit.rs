//! Limits of the audit API (`SERVICE_AUDIT_*`).

use super::values::{ConfigError, Vars};

/// How much one audit read or export may return.
#[derive(Debug, Clone, Copy)]
pub struct AuditSettings {
    /// `SERVICE_AUDIT_PAGE_MAX`: the most entries or trails one page holds
    /// (`limit` above it is refused). Default 500.
    pub page_max: u32,
    /// `SERVICE_AUDIT_EXPORT_MAX_EVENTS`: the most events one export holds;
    /// a JSON or CSV export says where to continue, a SOC 2 package of a
    /// longer log is refused. Default 100000.
    pub export_max_events: u32,
}

impl AuditSettings {
    pub(super) fn read<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Self, ConfigError> {
        Ok(Self {
            page_max: vars.within_u32("SERVICE_AUDIT_PAGE_MAX", 1, 100_000, 500)?,
            export_max_events: vars.within_u32(
                "SERVICE_AUDIT_EXPORT_MAX_EVENTS",
                1,
                10_000_000,
                100_000,
            )?,
        })
    }
}

impl Default for AuditSettings {
    fn default() -> Self {
        Self {
            page_max: 500,
            export_max_events: 100_000,
        }
    }
}
