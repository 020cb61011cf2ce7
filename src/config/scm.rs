//! Settings of the source-host integration (`SCM_*`) and of code reviews
//! (`SERVICE_REVIEW_*`).

use std::time::Duration;

use super::values::{ConfigError, Secret, Vars};

/// The GitHub REST API the default `SCM_API_URL` names.
pub const GITHUB_API: &str = "https://api.github.com";

#[derive(Debug, Clone)]
pub struct ScmSettings {
    /// `SCM_TOKEN`: the token the service calls the host's API with; unset:
    /// pull request reads and review submissions answer `demo: true`.
    pub token: Option<Secret>,
    /// `SCM_WEBHOOK_SECRET`: the secret webhook deliveries are signed with
    /// (`X-Hub-Signature-256`); unset: deliveries are refused (401) unless
    /// `SERVICE_SCM_DEMO` is on.
    pub webhook_secret: Option<Secret>,
    /// `SCM_API_URL`: the host's REST API base (GitHub Enterprise:
    /// `https://HOST/api/v3`). Default `https://api.github.com`.
    pub api_url: String,
    /// `SERVICE_SCM_DEMO`: accept unsigned deliveries while no
    /// `SCM_WEBHOOK_SECRET` is set (trying the receiver out). Default false;
    /// refused in production.
    pub demo: bool,
    /// `SERVICE_SCM_TIMEOUT_SECONDS`: one call to the host's API. Default 10.
    pub timeout: Duration,
    /// `SERVICE_REVIEW_MAX_INPUT_BYTES`: the largest snippet or diff reviewed
    /// (posted, or fetched from the host). Default 1048576.
    pub max_input_bytes: usize,
    /// `SERVICE_REVIEW_MAX_COMMENTS`: line comments one review carries. Default 20.
    pub max_comments: usize,
    /// `SERVICE_SCM_AUTO_POST`: post the reviews that source-host webhooks
    /// started to their pull requests once they complete (needs
    /// `SCM_TOKEN`). Default true.
    pub auto_post: bool,
    /// `SERVICE_SCM_MAX_LISTED_REVIEWS`: the most reviews of one pull
    /// request read back from the host, to find one already posted before
    /// posting again. Default 1000.
    pub max_listed_reviews: usize,
}

impl ScmSettings {
    pub(super) fn read<F: Fn(&str) -> Option<String>>(
        vars: &Vars<F>,
        production: bool,
    ) -> Result<Self, ConfigError> {
        let demo = vars.flag("SERVICE_SCM_DEMO", false)?;
        if demo && production {
            return Err(ConfigError::new(
                "SERVICE_SCM_DEMO",
                "unsigned source-host deliveries are not accepted in production",
            ));
        }
        let api_url = vars
            .get("SCM_API_URL")
            .unwrap_or_else(|| GITHUB_API.to_owned());
        let parsed = reqwest::Url::parse(&api_url)
            .map_err(|e| ConfigError::new("SCM_API_URL", format!("not a URL: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(ConfigError::new("SCM_API_URL", "must be an http(s) URL"));
        }
        Ok(Self {
            token: vars
                .get("SCM_TOKEN")
                .filter(|t| !t.is_empty())
                .map(Secret::new),
            webhook_secret: vars
                .get("SCM_WEBHOOK_SECRET")
                .filter(|t| !t.is_empty())
                .map(Secret::new),
            api_url: api_url.trim_end_matches('/').to_owned(),
            demo,
            timeout: Duration::from_secs(vars.within("SERVICE_SCM_TIMEOUT_SECONDS", 1, 300, 10)?),
            max_input_bytes: vars.within_u32(
                "SERVICE_REVIEW_MAX_INPUT_BYTES",
                1,
                64 << 20,
                1 << 20,
            )? as usize,
            max_comments: vars.within_u32("SERVICE_REVIEW_MAX_COMMENTS", 0, 1_000, 20)? as usize,
            auto_post: vars.flag("SERVICE_SCM_AUTO_POST", true)?,
            max_listed_reviews: vars.within_u32(
                "SERVICE_SCM_MAX_LISTED_REVIEWS",
                1,
                100_000,
                1_000,
            )? as usize,
        })
    }
}
