//! Settings of backups and disaster recovery (`SERVICE_BACKUP_*`, `SERVICE_DR_*`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::values::{ConfigError, Secret, Vars};

/// Where backups go, how long they are kept, and the recovery objectives
/// drills are measured against.
#[derive(Debug, Clone)]
pub struct BackupSettings {
    /// `SERVICE_BACKUP_DIR`: the directory backups are written to. Default
    /// `SERVICE_DATA_DIR/backups`.
    pub dir: PathBuf,
    /// `SERVICE_BACKUP_RETENTION_COUNT`: `cleanup` keeps at least the newest
    /// this many backups. Default 7.
    pub retention_count: usize,
    /// `SERVICE_BACKUP_RETENTION_DAYS`: `cleanup` removes backups older than
    /// this (beyond the kept count). Default 30.
    pub retention: Duration,
    /// `SERVICE_BACKUP_MAX_AGE_HOURS`: `dr/validate` calls the newest backup
    /// stale past this age. Default 24.
    pub max_age: Duration,
    /// `SERVICE_BACKUP_PAGE_MAX`: the largest `limit` of the backup list. Default 200.
    pub page_max: u32,
    /// `SERVICE_BACKUP_BATCH_ROWS`: rows per statement when a backup is
    /// restored. Default 500.
    pub batch_rows: usize,
    /// `SERVICE_BACKUP_CATCHUP_TIMEOUT_MS`: how long `verify-comprehensive`
    /// waits for the live read models to reach the backup's position.
    /// Default 10000.
    pub catchup_timeout: Duration,
    /// `SERVICE_BACKUP_COMPARE_WINDOW_EVENTS`: up to this many events written
    /// after a backup, `verify-comprehensive` compares with the live read
    /// models those events do not concern; past it, with read models
    /// replayed from the live log. Default 10000.
    pub compare_window: i64,
    /// `SERVICE_BACKUP_DESCRIPTION_MAX_CHARS`: the longest description a
    /// backup takes. Default 500.
    pub description_max_chars: usize,
    /// `SERVICE_DR_RPO_SECONDS`: the recovery point objective, as the age of
    /// the newest backup a drill restores. Default 3600.
    pub rpo: Duration,
    /// `SERVICE_DR_RPO_EVENTS`: the recovery point objective in events the
    /// newest backup lacks. Default 10000.
    pub rpo_events: u64,
    /// `SERVICE_DR_RTO_SECONDS`: the recovery time objective: restore,
    /// replay and verification of the newest backup. Default 900.
    pub rto: Duration,
    /// `SERVICE_BACKUP_S3_*`: the S3-compatible bucket backups are uploaded
    /// to; `None` (no `SERVICE_BACKUP_S3_BUCKET`) keeps them in `dir`.
    pub s3: Option<Box<S3Settings>>,
}

/// An S3-compatible bucket for backups. `SERVICE_BACKUP_DIR` stays the
/// staging directory a backup is written to before it is uploaded.
#[derive(Debug, Clone)]
pub struct S3Settings {
    /// `SERVICE_BACKUP_S3_BUCKET`: turns S3 storage on.
    pub bucket: String,
    /// `SERVICE_BACKUP_S3_ENDPOINT`: an S3-compatible server's URL, addressed
    /// path-style; unset: AWS.
    pub endpoint: Option<String>,
    /// `SERVICE_BACKUP_S3_REGION` (else `AWS_REGION`, `AWS_DEFAULT_REGION`).
    /// Default `us-east-1`.
    pub region: String,
    /// `SERVICE_BACKUP_S3_PREFIX`: objects go to `<prefix>/<backup_id>/<file>`.
    /// Default `agon-backups`.
    pub prefix: String,
    /// `SERVICE_BACKUP_S3_ACCESS_KEY_ID` (else `AWS_ACCESS_KEY_ID`).
    pub access_key_id: String,
    /// `SERVICE_BACKUP_S3_SECRET_ACCESS_KEY` (else `AWS_SECRET_ACCESS_KEY`).
    pub secret_access_key: Secret,
    /// `SERVICE_BACKUP_S3_SESSION_TOKEN` (else `AWS_SESSION_TOKEN`), for
    /// temporary credentials.
    pub session_token: Option<Secret>,
    /// `SERVICE_BACKUP_S3_ALLOW_HTTP`: whether a plain `http://` endpoint is
    /// allowed. Default false.
    pub allow_http: bool,
    /// `SERVICE_BACKUP_S3_PART_SIZE_MB`: files up to this size go up in one
    /// request, larger ones in parts of this size. Default 10.
    pub part_size: usize,
    /// `SERVICE_BACKUP_S3_PARALLEL_PARTS`: parts of one file in flight at a
    /// time (each holds a part in memory). Default 2.
    pub parallel_parts: usize,
    /// `SERVICE_BACKUP_S3_MAX_RETRIES`: retries of a failed request. Default 3.
    pub max_retries: usize,
    /// `SERVICE_BACKUP_S3_TIMEOUT_SECONDS`: the longest one request (one
    /// part) may take. Default 120.
    pub timeout: Duration,
    /// `SERVICE_BACKUP_S3_CONNECT_TIMEOUT_SECONDS`: the longest a connection
    /// may take to open. Default 5.
    pub connect_timeout: Duration,
}

impl BackupSettings {
    pub(super) fn read<F: Fn(&str) -> Option<String>>(
        vars: &Vars<F>,
        data_dir: &Path,
    ) -> Result<Self, ConfigError> {
        let secs = |variable, min, max, default| {
            vars.within(variable, min, max, default)
                .map(Duration::from_secs)
        };
        Ok(Self {
            dir: vars
                .get("SERVICE_BACKUP_DIR")
                .map_or_else(|| data_dir.join("backups"), PathBuf::from),
            retention_count: vars.within_u32("SERVICE_BACKUP_RETENTION_COUNT", 1, 100_000, 7)?
                as usize,
            retention: Duration::from_secs(
                vars.within("SERVICE_BACKUP_RETENTION_DAYS", 1, 36_500, 30)? * 86_400,
            ),
            max_age: Duration::from_secs(
                vars.within("SERVICE_BACKUP_MAX_AGE_HOURS", 1, 87_600, 24)? * 3_600,
            ),
            page_max: vars.within_u32("SERVICE_BACKUP_PAGE_MAX", 1, 10_000, 200)?,
            batch_rows: vars.within_u32("SERVICE_BACKUP_BATCH_ROWS", 1, 2_000, 500)? as usize,
            catchup_timeout: Duration::from_millis(vars.within(
                "SERVICE_BACKUP_CATCHUP_TIMEOUT_MS",
                0,
                3_600_000,
                10_000,
            )?),
            compare_window: i64::from(vars.within_u32(
                "SERVICE_BACKUP_COMPARE_WINDOW_EVENTS",
                1,
                1_000_000,
                10_000,
            )?),
            description_max_chars: vars.within_u32(
                "SERVICE_BACKUP_DESCRIPTION_MAX_CHARS",
                0,
                100_000,
                500,
            )? as usize,
            rpo: secs("SERVICE_DR_RPO_SECONDS", 1, 31_536_000, 3_600)?,
            rpo_events: vars.within("SERVICE_DR_RPO_EVENTS", 0, u64::MAX >> 1, 10_000)?,
            rto: secs("SERVICE_DR_RTO_SECONDS", 1, 31_536_000, 900)?,
            s3: S3Settings::read(vars)?.map(Box::new),
        })
    }
}

/// The `SERVICE_BACKUP_S3_*` variables that mean nothing without a bucket.
const S3_ONLY: [&str; 4] = [
    "SERVICE_BACKUP_S3_ENDPOINT",
    "SERVICE_BACKUP_S3_PREFIX",
    "SERVICE_BACKUP_S3_ACCESS_KEY_ID",
    "SERVICE_BACKUP_S3_SECRET_ACCESS_KEY",
];

impl S3Settings {
    fn read<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Option<Self>, ConfigError> {
        let Some(bucket) = vars.get("SERVICE_BACKUP_S3_BUCKET") else {
            if let Some(set) = S3_ONLY.into_iter().find(|v| vars.get(v).is_some()) {
                return Err(ConfigError::new(
                    set,
                    "is set but SERVICE_BACKUP_S3_BUCKET is not; set the bucket to store backups in S3",
                ));
            }
            return Ok(None);
        };
        let valid_bucket = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if !valid_bucket {
            return Err(ConfigError::new(
                "SERVICE_BACKUP_S3_BUCKET",
                "must be a bucket name of 3 to 63 lowercase letters, digits, dots and hyphens",
            ));
        }
        let either = |ours: &str, theirs: &[&str]| {
            vars.get(ours)
                .or_else(|| theirs.iter().find_map(|v| vars.get(v)))
        };
        let allow_http = vars.flag("SERVICE_BACKUP_S3_ALLOW_HTTP", false)?;
        let endpoint = vars
            .get("SERVICE_BACKUP_S3_ENDPOINT")
            .map(|text| endpoint(&text, allow_http))
            .transpose()?;
        let access_key_id = either("SERVICE_BACKUP_S3_ACCESS_KEY_ID", &["AWS_ACCESS_KEY_ID"])
            .ok_or_else(|| {
                ConfigError::new(
                    "SERVICE_BACKUP_S3_ACCESS_KEY_ID",
                    "is required with SERVICE_BACKUP_S3_BUCKET (or AWS_ACCESS_KEY_ID)",
                )
            })?;
        let secret_access_key = either(
            "SERVICE_BACKUP_S3_SECRET_ACCESS_KEY",
            &["AWS_SECRET_ACCESS_KEY"],
        )
        .map(Secret::new)
        .ok_or_else(|| {
            ConfigError::new(
                "SERVICE_BACKUP_S3_SECRET_ACCESS_KEY",
                "is required with SERVICE_BACKUP_S3_BUCKET (or AWS_SECRET_ACCESS_KEY)",
            )
        })?;
        let prefix = vars
            .get("SERVICE_BACKUP_S3_PREFIX")
            .unwrap_or_else(|| "agon-backups".to_owned());
        let prefix = prefix.trim_matches('/').to_owned();
        let valid_prefix = prefix.split('/').all(|segment| {
            !segment.is_empty()
                && segment != "."
                && segment != ".."
                && segment.bytes().all(|b| {
                    b.is_ascii_alphanumeric()
                        || matches!(b, b'-' | b'_' | b'.' | b'!' | b'(' | b')')
                })
        });
        if !valid_prefix {
            return Err(ConfigError::new(
                "SERVICE_BACKUP_S3_PREFIX",
                "must be key segments of letters, digits and -_.!() separated by /",
            ));
        }
        Ok(Some(Self {
            bucket,
            endpoint,
            region: either(
                "SERVICE_BACKUP_S3_REGION",
                &["AWS_REGION", "AWS_DEFAULT_REGION"],
            )
            .unwrap_or_else(|| "us-east-1".to_owned()),
            prefix,
            access_key_id,
            secret_access_key,
            session_token: either("SERVICE_BACKUP_S3_SESSION_TOKEN", &["AWS_SESSION_TOKEN"])
                .map(Secret::new),
            allow_http,
            part_size: vars.within_u32("SERVICE_BACKUP_S3_PART_SIZE_MB", 5, 5_000, 10)? as usize
                * 1024
                * 1024,
            parallel_parts: vars.within_u32("SERVICE_BACKUP_S3_PARALLEL_PARTS", 1, 64, 2)? as usize,
            max_retries: vars.within_u32("SERVICE_BACKUP_S3_MAX_RETRIES", 0, 100, 3)? as usize,
            timeout: Duration::from_secs(vars.within(
                "SERVICE_BACKUP_S3_TIMEOUT_SECONDS",
                1,
                86_400,
                120,
            )?),
            connect_timeout: Duration::from_secs(vars.within(
                "SERVICE_BACKUP_S3_CONNECT_TIMEOUT_SECONDS",
                1,
                3_600,
                5,
            )?),
        }))
    }
}

/// `SERVICE_BACKUP_S3_ENDPOINT`: an `https://` URL with a host, or
/// `http://` when `SERVICE_BACKUP_S3_ALLOW_HTTP` says so.
fn endpoint(text: &str, allow_http: bool) -> Result<String, ConfigError> {
    const VARIABLE: &str = "SERVICE_BACKUP_S3_ENDPOINT";
    let url = url::Url::parse(text)
        .map_err(|e| ConfigError::new(VARIABLE, format!("must be a URL: {e}")))?;
    if url.host_str().is_none_or(str::is_empty) {
        return Err(ConfigError::new(VARIABLE, "must name a host"));
    }
    if !url.username().is_empty() || url.password().is_some() || url.query().is_some() {
        return Err(ConfigError::new(
            VARIABLE,
            "must not carry credentials or a query; use SERVICE_BACKUP_S3_ACCESS_KEY_ID",
        ));
    }
    match url.scheme() {
        "https" => {}
        "http" if allow_http => {}
        "http" => {
            return Err(ConfigError::new(
                VARIABLE,
                "is plain http; set SERVICE_BACKUP_S3_ALLOW_HTTP=true to allow it",
            ));
        }
        other => {
            return Err(ConfigError::new(
                VARIABLE,
                format!("must be an http(s) URL, not {other}:"),
            ));
        }
    }
    Ok(text.trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s3(pairs: &[(&str, &str)]) -> Result<Option<S3Settings>, ConfigError> {
        let vars = Vars(|name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        });
        S3Settings::read(&vars)
    }

    const KEYS: [(&str, &str); 3] = [
        ("SERVICE_BACKUP_S3_BUCKET", "agon-backups"),
        ("SERVICE_BACKUP_S3_ACCESS_KEY_ID", "id"),
        ("SERVICE_BACKUP_S3_SECRET_ACCESS_KEY", "secret"),
    ];

    fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
        let mut vars = KEYS.to_vec();
        vars.extend_from_slice(extra);
        vars
    }

    #[test]
    fn no_bucket_is_local_storage() {
        assert!(s3(&[]).unwrap().is_none());
        let set = s3(&with(&[])).unwrap().unwrap();
        assert_eq!(set.bucket, "agon-backups");
        assert_eq!(set.prefix, "agon-backups");
        assert_eq!(set.region, "us-east-1");
        assert!(!set.allow_http);
    }

    #[test]
    fn bad_combinations_name_their_variable() {
        let cases: [(&[(&str, &str)], &str); 6] = [
            (
                &[("SERVICE_BACKUP_S3_BUCKET", "b-1")],
                "SERVICE_BACKUP_S3_ACCESS_KEY_ID",
            ),
            (
                &[
                    ("SERVICE_BACKUP_S3_BUCKET", "b-1"),
                    ("SERVICE_BACKUP_S3_ACCESS_KEY_ID", "id"),
                ],
                "SERVICE_BACKUP_S3_SECRET_ACCESS_KEY",
            ),
            (
                &[("SERVICE_BACKUP_S3_ENDPOINT", "https://s3.example.com")],
                "SERVICE_BACKUP_S3_ENDPOINT",
            ),
            (
                &[("SERVICE_BACKUP_S3_BUCKET", "Not_A_Bucket")],
                "SERVICE_BACKUP_S3_BUCKET",
            ),
            (
                &[
                    ("SERVICE_BACKUP_S3_BUCKET", "b-1"),
                    ("SERVICE_BACKUP_S3_ENDPOINT", "not a url"),
                ],
                "SERVICE_BACKUP_S3_ENDPOINT",
            ),
            (
                &[
                    ("SERVICE_BACKUP_S3_BUCKET", "b-1"),
                    ("SERVICE_BACKUP_S3_ENDPOINT", "http://127.0.0.1:9000"),
                ],
                "SERVICE_BACKUP_S3_ENDPOINT",
            ),
        ];
        for (vars, variable) in cases {
            assert_eq!(s3(vars).unwrap_err().variable, variable, "{vars:?}");
        }
        let bad_prefix = with(&[("SERVICE_BACKUP_S3_PREFIX", "a//../b")]);
        assert_eq!(
            s3(&bad_prefix).unwrap_err().variable,
            "SERVICE_BACKUP_S3_PREFIX"
        );
        let ftp = with(&[("SERVICE_BACKUP_S3_ENDPOINT", "ftp://127.0.0.1")]);
        assert_eq!(s3(&ftp).unwrap_err().variable, "SERVICE_BACKUP_S3_ENDPOINT");
    }

    #[test]
    fn plain_http_only_when_allowed() {
        let vars = with(&[
            ("SERVICE_BACKUP_S3_ENDPOINT", "http://127.0.0.1:9000/"),
            ("SERVICE_BACKUP_S3_ALLOW_HTTP", "true"),
            ("SERVICE_BACKUP_S3_PREFIX", "/team/backups/"),
        ]);
        let set = s3(&vars).unwrap().unwrap();
        assert_eq!(set.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(set.prefix, "team/backups");
    }

    #[test]
    fn the_standard_aws_variables_stand_in() {
        let set = s3(&[
            ("SERVICE_BACKUP_S3_BUCKET", "b-1"),
            ("AWS_ACCESS_KEY_ID", "aws-id"),
            ("AWS_SECRET_ACCESS_KEY", "aws-secret"),
            ("AWS_REGION", "eu-west-1"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(set.access_key_id, "aws-id");
        assert_eq!(set.secret_access_key.expose(), "aws-secret");
        assert_eq!(set.region, "eu-west-1");
        let ours = s3(&with(&[("AWS_ACCESS_KEY_ID", "aws-id")]))
            .unwrap()
            .unwrap();
        assert_eq!(ours.access_key_id, "id");
    }
}
