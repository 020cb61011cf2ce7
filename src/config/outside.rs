//! Settings of the public NATS stream that outside subscribers read
//! (`SERVICE_NATS_PUBLIC_*`); used only when `SERVICE_NATS_URL` is set.

use std::time::Duration;

use super::values::{ConfigError, Vars};

/// The longest stream name taken (JetStream allows more; 64 keeps it readable).
const MAX_STREAM_NAME: usize = 64;

/// What the public stream is called and how long it keeps messages.
#[derive(Debug, Clone)]
pub struct PublicStreamSettings {
    /// `SERVICE_NATS_PUBLIC_ENABLED`: publish `debate.completed`,
    /// `debate.verdict` and `debate.failed` for outside subscribers. Default true.
    pub enabled: bool,
    /// `SERVICE_NATS_PUBLIC_STREAM`: the stream's name. Default
    /// `AGON_<deployment>_PUBLIC`.
    pub stream: Option<String>,
    /// `SERVICE_NATS_PUBLIC_MAX_AGE_SECONDS`: how long a message is kept.
    /// Default 604800 (seven days).
    pub max_age: Duration,
    /// `SERVICE_NATS_PUBLIC_MAX_BYTES`: the most the stream holds before it
    /// drops its oldest messages; 0 means no bound. Default 0.
    pub max_bytes: u64,
    /// `SERVICE_NATS_PUBLIC_DUPLICATE_WINDOW_SECONDS`: how long a message id
    /// is remembered, so that a re-publish after a crash is dropped; at most
    /// the max age. Default 86400.
    pub duplicate_window: Duration,
}

impl PublicStreamSettings {
    pub(super) fn read<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Self, ConfigError> {
        let stream = vars.get("SERVICE_NATS_PUBLIC_STREAM");
        if let Some(name) = &stream {
            let fits = name.len() <= MAX_STREAM_NAME
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !fits {
                return Err(ConfigError::new(
                    "SERVICE_NATS_PUBLIC_STREAM",
                    format!(
                        "must be 1 to {MAX_STREAM_NAME} of A-Z, a-z, 0-9, _ and -, not {name:?}"
                    ),
                ));
            }
        }
        let max_age = vars.within(
            "SERVICE_NATS_PUBLIC_MAX_AGE_SECONDS",
            60,
            10 * 365 * 86_400,
            7 * 86_400,
        )?;
        let window = vars.within(
            "SERVICE_NATS_PUBLIC_DUPLICATE_WINDOW_SECONDS",
            1,
            max_age,
            86_400.min(max_age),
        )?;
        Ok(Self {
            enabled: vars.flag("SERVICE_NATS_PUBLIC_ENABLED", true)?,
            stream,
            max_age: Duration::from_secs(max_age),
            max_bytes: vars.within("SERVICE_NATS_PUBLIC_MAX_BYTES", 0, i64::MAX as u64, 0)?,
            duplicate_window: Duration::from_secs(window),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(pairs: &[(&str, &str)]) -> Result<PublicStreamSettings, ConfigError> {
        let map: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        PublicStreamSettings::read(&Vars(|name: &str| map.get(name).cloned()))
    }

    #[test]
    fn defaults_keep_a_week_and_remember_ids_for_a_day() {
        let s = read(&[]).unwrap();
        assert!(s.enabled && s.stream.is_none() && s.max_bytes == 0);
        assert_eq!(s.max_age, Duration::from_secs(604_800));
        assert_eq!(s.duplicate_window, Duration::from_secs(86_400));
    }

    #[test]
    fn a_bad_name_or_a_window_past_the_age_names_its_variable() {
        let e = read(&[("SERVICE_NATS_PUBLIC_STREAM", "a.b")]).unwrap_err();
        assert_eq!(e.variable, "SERVICE_NATS_PUBLIC_STREAM");
        let e = read(&[
            ("SERVICE_NATS_PUBLIC_MAX_AGE_SECONDS", "3600"),
            ("SERVICE_NATS_PUBLIC_DUPLICATE_WINDOW_SECONDS", "7200"),
        ])
        .unwrap_err();
        assert_eq!(e.variable, "SERVICE_NATS_PUBLIC_DUPLICATE_WINDOW_SECONDS");
        let s = read(&[("SERVICE_NATS_PUBLIC_MAX_AGE_SECONDS", "3600")]).unwrap();
        assert_eq!(s.duplicate_window, Duration::from_secs(3_600));
    }
}
