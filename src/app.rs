//! The composition root: builds the store, the bus, the projections and the
//! HTTP router from [`Settings`], and runs them together until told to stop.

use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::agents::Agents;
use crate::audit::Audit;
use crate::auth::{Auth, AuthSetupError};
use crate::bus::{Bus, BusError, Ephemeral, LocalBus, NatsBus};
use crate::clock::Clock;
use crate::config::Settings;
use crate::crypto::signing::{KeyError, SealKey};
use crate::debates::{DebateLimits, Debates};
use crate::http::ratelimit::RedisError;
use crate::http::state::{ApiState, HttpState};
use crate::ops::Ops;
use crate::push::Push;
use crate::review::Reviews;
use crate::runner::Runner;
use crate::scm::Scm;
use crate::store::sealer::{self, seal_backlog};
use crate::store::{Db, EventLog, StoreError};
use crate::webhooks::{Webhooks, WebhooksError};
use crate::{http, projection};

mod console;

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
    #[error("cannot set up webhooks: {0}")]
    Webhooks(#[from] WebhooksError),
    #[error("cannot set up the source-host client: {0}")]
    Scm(#[source] reqwest::Error),
    #[error("cannot set up sign-in through identity providers: {0}")]
    Sso(#[from] crate::sso::SsoError),
    #[error("cannot listen: {0}")]
    Listen(#[from] std::io::Error),
    #[error("cannot set up backups: {0}")]
    Backups(#[from] Box<crate::backup::BackupError>),
}

/// Opens the event log the settings name (SQLite unless `DATABASE_URL` is
/// set), creating and migrating it when needed; all a command that works
/// on the log alone (such as `agon replay`) builds.
pub async fn open_log(settings: &Settings) -> Result<EventLog, StoreError> {
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
    Ok(EventLog::new(db).with_read_model_wait(settings.read_model_wait))
}

/// How often an unreachable Redis is retried.
const REDIS_CHECK_INTERVAL: Duration = Duration::from_secs(2);

/// The container of the running service's parts; cheap to clone. The faces
/// never take it whole: the HTTP API gets an [`ApiState`] of the services
/// its handlers use, the CLI the parts its command needs.
#[derive(Debug, Clone)]
pub struct App {
    pub settings: Arc<Settings>,
    pub log: EventLog,
    pub bus: Bus,
    pub seal_key: SealKey,
    /// The time every domain decision uses; tests move it forward.
    pub clock: Clock,
    pub auth: Auth,
    pub debates: Debates,
    pub ops: Ops,
    pub agents: Agents,
    pub runner: Runner,
    pub http: HttpState,
    /// The WebSocket push.
    pub push: Push,
    /// Read models that left their group (see `projection::group`), run alone.
    detached: Arc<std::sync::Mutex<Vec<JoinHandle<()>>>>,
    pub webhooks: Webhooks,
    /// Code reviews (the engine pull request review shares).
    pub reviews: Reviews,
    /// The source-host webhook receiver and pull request review.
    pub scm: Scm,
    /// The agents' text as they write it (`agent.delta`), from every replica.
    pub deltas: Ephemeral,
    /// Decision receipts and their retention.
    pub receipts: crate::receipts::Receipts,
    /// Backups and disaster-recovery drills.
    pub backups: crate::backup::Backups,
    /// Sign-in through identity providers (OAuth `extidp`, SSO).
    pub sso: crate::sso::Sso,
}

impl App {
    /// Opens the store the settings name (SQLite unless `DATABASE_URL` is
    /// set) and the bus (in-process unless `SERVICE_NATS_URL` is set).
    pub async fn build(settings: Settings) -> Result<Self, StartError> {
        let log = open_log(&settings).await?;
        let seal_key = SealKey::load_or_create(
            settings.signing_key.as_ref().map(|s| s.expose()),
            &settings.data_dir,
        )?;
        let bus = match &settings.nats_url {
            Some(url) => Bus::Nats(Box::new(NatsBus::open(url, &log, &settings).await?)),
            None => Bus::Local(LocalBus::with_retry(log.backend(), settings.consumer_retry)),
        };
        let http = HttpState::new(&settings)?;
        if let Some(redis) = http.limiter.redis()
            && !redis.connect().await
        {
            tracing::warn!("redis unreachable at start: rate limits fall back until it answers");
        }
        http::metrics::handle();
        let clock = Clock::default();
        let auth = Auth::new(&settings, log.clone(), clock.clone())?;
        let webhooks = Webhooks::new(
            log.clone(),
            clock.clone(),
            auth.field_cipher(),
            &settings.webhooks,
        )?;
        let agents = Agents::new(&settings.agents);
        // The agents' text as they write it: not stored, to every replica.
        let deltas = bus.ephemeral("deltas", settings.agents.delta_buffer);
        let runner = Runner::new(
            log.clone(),
            agents.clone(),
            clock.clone(),
            deltas.clone(),
            &settings,
        );
        let limits = DebateLimits {
            topic_chars: settings.agents.max_topic_chars,
            context_chars: settings.agents.max_context_chars,
            search_chars: settings.agents.max_search_chars,
            shape: settings.agents.debate_limits,
        };
        let debates = Debates::new(
            log.clone(),
            clock.clone(),
            agents.clone(),
            runner.clone(),
            limits,
        )
        .with_read_cache(settings.http.read_cache)
        .with_public_url(&settings.auth.public_url);
        let reviews = Reviews::new(
            log.clone(),
            clock.clone(),
            debates.clone(),
            settings.scm.max_input_bytes,
            settings.scm.max_comments,
        );
        let scm = Scm::new(log.clone(), &settings.scm, reviews.clone(), debates.clone())
            .map_err(StartError::Scm)?;
        let push = Push::new(
            settings.push.clone(),
            settings.http.allowed_origins.clone(),
            log.clone(),
            debates.clone(),
            clock.clone(),
            deltas.clone(),
            settings.agents.delta_buffer,
        );
        let ops = Ops::new(
            log.clone(),
            bus.clone(),
            agents.clone(),
            settings.seal_interval,
        );
        let receipts = crate::receipts::Receipts::new(
            log.clone(),
            seal_key.clone(),
            debates.clone(),
            clock.clone(),
            crate::receipts::retention::Retention::new(
                settings.receipt_retention_days,
                settings.receipt_cleanup_interval,
            ),
        );
        let backups = crate::backup::Backups::new(
            log.clone(),
            settings.backup.clone(),
            settings
                .database_url
                .as_ref()
                .map(|u| u.expose().to_owned()),
            seal_key.public_hex(),
            clock.clone(),
        )
        .map_err(Box::new)?;
        let sso = crate::sso::Sso::new(&settings.oauth, auth.clone(), log.clone(), clock.clone())?;
        Ok(Self {
            sso,
            receipts,
            settings: Arc::new(settings),
            log,
            bus,
            seal_key,
            clock,
            auth,
            debates,
            ops,
            agents,
            runner,
            http,
            push,
            detached: Arc::default(),
            webhooks,
            reviews,
            scm,
            deltas,
            backups,
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
        tasks.extend(self.deltas.spawn(stop).await);
        let (bus, log, stop_detached) = (self.bus.clone(), self.log.clone(), stop.clone());
        let detached = Arc::clone(&self.detached);
        let detach: projection::Detach = Box::new(move |member| {
            let task = bus.spawn_consumer(&log, member, &stop_detached);
            lock(&detached).push(task);
        });
        let read_models = projection::read_models(&self.log, detach);
        tasks.push(self.bus.spawn_consumer(&self.log, read_models, stop));
        let push = self.push.start(stop).await?;
        tasks.push(self.bus.spawn_consumer(&self.log, push, stop));
        let feed = self.runner.feed().await?;
        tasks.push(self.bus.spawn_consumer(&self.log, feed, stop));
        tasks.push(self.runner.spawn(stop));
        let dispatcher = self.webhooks.dispatcher();
        tasks.push(self.bus.spawn_consumer(&self.log, dispatcher, stop));
        tasks.push(self.webhooks.spawn_worker(stop));
        let settler = crate::review::settler::Settler::new(self.reviews.clone(), self.scm.poster());
        tasks.push(self.bus.spawn_consumer(&self.log, Arc::new(settler), stop));
        let public = &self.settings.public_stream;
        if let Some(publisher) = crate::outside::publisher(&self.bus, &self.log, public, stop) {
            tasks.push(self.bus.spawn_consumer(&self.log, publisher, stop));
        }
        Ok(tasks)
    }

    /// Lets running debates finish (up to the shutdown grace), waits for
    /// the background tasks, seals what they wrote and closes the store.
    pub async fn finish(&self, tasks: Vec<JoinHandle<()>>) {
        self.runner.drain(self.settings.agents.shutdown_grace).await;
        let detached = std::mem::take(&mut *lock(&self.detached));
        for task in tasks.into_iter().chain(detached) {
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
        self.run_with_ws(api, None, stop).await
    }

    /// [`Self::run`], also serving the WebSocket push on `ws` (`--ws-port`).
    pub async fn run_with_ws(
        self,
        api: TcpListener,
        ws: Option<TcpListener>,
        stop: CancellationToken,
    ) -> Result<(), StartError> {
        let mut tasks = self.start_background(&stop).await?;
        let (log, key, interval, token) = (
            self.log.clone(),
            self.seal_key.clone(),
            self.settings.seal_interval,
            stop.clone(),
        );
        tasks.push(tokio::spawn(sealer::run(log, key, interval, token)));
        let retention = self.receipts.clone().run_retention(stop.clone());
        tasks.push(tokio::spawn(retention));
        if let Some(redis) = self.http.limiter.redis() {
            let watch = redis.clone().watch(REDIS_CHECK_INTERVAL, stop.clone());
            tasks.push(tokio::spawn(watch));
        }

        self.push
            .render_with(crate::web::pages::live_html::renderer);
        let pages = crate::web::WebState::new(
            self.auth.clone(),
            self.debates.clone(),
            self.agents.clone(),
            self.webhooks.clone(),
            self.settings.web,
        );
        let pages = pages.with_console(crate::web::console::Console {
            ops: self.ops.clone(),
            push: self.push.clone(),
            platform: Arc::new(console::HttpReport {
                ops: self.ops.clone(),
                http: self.http.clone(),
                table: Arc::new(http::routes().into_parts().1),
                recent_errors: self.settings.web.recent_errors,
            }),
        });
        let router = http::router_with_pages(
            self.clone(),
            crate::web::router(pages),
            crate::web::not_found_page,
        );
        let options = http::serve::ServeOptions {
            limits: self.settings.http.connections.clone(),
            exempt: self.settings.rate_limits.trusted_proxies.clone(),
            drain: self.settings.http.request_timeout,
        };
        if let Some(ws) = ws {
            let (router, options, stop) = (
                http::ws::router(self.clone()),
                options.clone(),
                stop.clone(),
            );
            tasks.push(tokio::spawn(async move {
                if let Err(e) = http::serve::serve(ws, router, options, stop).await {
                    tracing::error!(error = %e, "the WebSocket port stopped accepting");
                }
            }));
        }
        let served = http::serve::serve(api, router, options, stop.clone()).await;
        stop.cancel();
        self.finish(tasks).await;
        served.map_err(StartError::Listen)
    }
}

impl From<App> for ApiState {
    fn from(app: App) -> Self {
        // Built here, not kept in `App`: only the HTTP face uses it.
        let audit = Audit::new(
            app.log.clone(),
            app.seal_key.public_hex(),
            app.settings.audit,
        );
        Self {
            settings: app.settings,
            auth: app.auth,
            debates: app.debates,
            ops: app.ops,
            agents: app.agents,
            http: app.http,
            push: app.push,
            webhooks: app.webhooks,
            reviews: app.reviews,
            scm: app.scm,
            receipts: app.receipts,
            backups: app.backups,
            sso: app.sso,
            audit,
        }
    }
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
