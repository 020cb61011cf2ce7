//! The composition root: builds the store, the bus, the projections and the
//! HTTP router from [`Settings`], and runs them together until told to stop.

use std::sync::Arc;
use std::time::{Duration, Instant};

use thiserror::Error;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::agents::Agents;
use crate::auth::{Auth, AuthSetupError};
use crate::bus::{Bus, BusError, LocalBus, NatsBus};
use crate::clock::Clock;
use crate::config::Settings;
use crate::crypto::signing::{KeyError, SealKey};
use crate::http::debates::rendered::RenderedDetails;
use crate::http::ratelimit::{RateLimiter, RedisError};
use crate::http::recent_errors::RecentErrors;
use crate::runner::Runner;
use crate::store::sealer::{self, seal_backlog};
use crate::store::{Db, EventLog, StoreError};
use crate::{http, projection};

#[derive(Debug, Error)]
pub enum StartError {
    #[error("cannot open the event store: {0}")]
    Store(#[from] StoreError),
    #[error("cannot load the seal signing key: {0}")]
    Key(#[from] KeyError),
    #[error("cannot connect to NATS: {0}")]
    Bus(#[from] BusError),
    #[error("cannot set up Redis: {0}")]
    Redis(#[from] RedisError),
    #[error("cannot set up accounts: {0}")]
    Auth(#[from] AuthSetupError),
    #[error("cannot listen: {0}")]
    Listen(#[from] std::io::Error),
}

/// How often an unreachable Redis is retried.
const REDIS_CHECK_INTERVAL: Duration = Duration::from_secs(2);

/// Everything the running service shares; cheap to clone.
#[derive(Debug, Clone)]
pub struct App {
    pub settings: Arc<Settings>,
    pub log: EventLog,
    pub bus: Bus,
    pub seal_key: SealKey,
    pub started: Instant,
    pub limiter: RateLimiter,
    pub recent_errors: RecentErrors,
    pub auth: Auth,
    /// The time every domain decision uses; tests move it forward.
    pub clock: Clock,
    pub agents: Agents,
    pub runner: Runner,
    /// Rendered debate details, by the digest of their documents.
    pub details: Arc<RenderedDetails>,
}

impl App {
    /// Opens the store the settings name (SQLite unless `DATABASE_URL` is
    /// set) and the bus (in-process unless `SERVICE_NATS_URL` is set).
    pub async fn build(settings: Settings) -> Result<Self, StartError> {
        let db = match &settings.database_url {
            Some(url) => {
                Db::connect_postgres_timed(
                    url.expose(),
                    settings.database_max_connections,
                    settings.database_acquire_timeout,
                )
                .await?
            }
            None => Db::open_sqlite(&settings.data_dir).await?,
        };
        let seal_key = SealKey::load_or_create(
            settings.signing_key.as_ref().map(|s| s.expose()),
            &settings.data_dir,
        )?;
        let log = EventLog::new(db);
        let bus = match &settings.nats_url {
            Some(url) => Bus::Nats(Box::new(NatsBus::open(url, &log, &settings).await?)),
            None => Bus::Local(LocalBus::new(log.backend())),
        };
        let limiter = RateLimiter::new(&settings.rate_limits)?;
        if let Some(redis) = limiter.redis()
            && !redis.connect().await
        {
            tracing::warn!("redis unreachable at start: rate limits fall back until it answers");
        }
        http::metrics::handle();
        let clock = Clock::default();
        let auth = Auth::new(&settings, log.clone(), clock.clone())?;
        let agents = Agents::new(&settings.agents);
        let runner = Runner::new(log.clone(), agents.clone(), clock.clone(), &settings);
        let details = Arc::new(RenderedDetails::new(settings.http.detail_cache_bytes));
        Ok(Self {
            settings: Arc::new(settings),
            log,
            bus,
            seal_key,
            started: Instant::now(),
            limiter,
            recent_errors: RecentErrors::default(),
            auth,
            clock,
            agents,
            runner,
            details,
        })
    }

    /// Starts the relay, the projections, the debate runner and the sealer,
    /// which run until `stop`.
    pub async fn start_background(
        &self,
        stop: &CancellationToken,
    ) -> Result<Vec<JoinHandle<()>>, StartError> {
        projection::reset_changed(&self.log).await?;
        let mut tasks = vec![self.bus.spawn_relay(&self.log, stop)];
        for consumer in projection::runners(&self.log) {
            tasks.push(self.bus.spawn_consumer(&self.log, consumer, stop));
        }
        let feed = self.runner.feed().await?;
        tasks.push(self.bus.spawn_consumer(&self.log, feed, stop));
        tasks.push(self.runner.spawn(stop));
        Ok(tasks)
    }

    /// Lets running debates finish (up to the shutdown grace), waits for
    /// the background tasks, seals what they wrote and closes the store.
    pub async fn finish(&self, tasks: Vec<JoinHandle<()>>) {
        self.runner.drain(self.settings.agents.shutdown_grace).await;
        for task in tasks {
            // A task that panicked has already reported it; the others finish.
            let _ = task.await;
        }
        // Nothing of this process writes any more: sealing now leaves a run
        // shorter than the seal interval, or one stopped by SIGTERM, sealed.
        seal_backlog(&self.log, &self.seal_key).await;
        self.log.db().close().await;
    }

    /// Serves the API on `api` and runs the background work until `stop`
    /// fires; then stops taking debates, lets running ones finish (bounded)
    /// and waits for the rest.
    pub async fn run(self, api: TcpListener, stop: CancellationToken) -> Result<(), StartError> {
        let mut tasks = self.start_background(&stop).await?;
        let (log, key, interval, token) = (
            self.log.clone(),
            self.seal_key.clone(),
            self.settings.seal_interval,
            stop.clone(),
        );
        tasks.push(tokio::spawn(sealer::run(log, key, interval, token)));
        if let Some(redis) = self.limiter.redis() {
            let watch = redis.clone().watch(REDIS_CHECK_INTERVAL, stop.clone());
            tasks.push(tokio::spawn(watch));
        }

        let router = http::router(self.clone());
        let options = http::serve::ServeOptions {
            limits: self.settings.http.connections.clone(),
            exempt: self.settings.rate_limits.trusted_proxies.clone(),
            drain: self.settings.http.request_timeout,
        };
        let served = http::serve::serve(api, router, options, stop.clone()).await;
        stop.cancel();
        self.finish(tasks).await;
        served.map_err(StartError::Listen)
    }
}
