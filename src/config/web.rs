//! Settings of the web UI's pages (`SERVICE_UI_*`).

use super::values::{ConfigError, Vars};

/// How much the pages show at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebSettings {
    /// `SERVICE_UI_PAGE_SIZE`: rows per page of the pages' lists (the
    /// console's users, the debate history). Default 50.
    pub page_size: u32,
    /// `SERVICE_UI_RECENT_ERRORS`: recent errors the console lists. Default 20.
    pub recent_errors: usize,
    /// `SERVICE_UI_DEBATE_CONTRIBUTIONS`: contributions a debate's page
    /// shows at once; a longer debate's rounds come a few at a time, linked
    /// (a round is never split). Default 50.
    pub debate_contributions: u32,
}

impl Default for WebSettings {
    fn default() -> Self {
        Self {
            page_size: 50,
            recent_errors: 20,
            debate_contributions: 50,
        }
    }
}

impl WebSettings {
    pub(super) fn read<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Self, ConfigError> {
        let defaults = Self::default();
        Ok(Self {
            page_size: vars.within_u32("SERVICE_UI_PAGE_SIZE", 1, 1_000, defaults.page_size)?,
            recent_errors: vars.within_u32(
                "SERVICE_UI_RECENT_ERRORS",
                1,
                1_000,
                defaults.recent_errors as u32,
            )? as usize,
            debate_contributions: vars.within_u32(
                "SERVICE_UI_DEBATE_CONTRIBUTIONS",
                1,
                100_000,
                defaults.debate_contributions,
            )?,
        })
    }
}
