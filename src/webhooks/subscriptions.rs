//! Reads of the `webhook_subscriptions` table (the projection's rows).

use serde_json::Value;
use sqlx::FromRow;

use crate::store::db::with_pool;
use crate::store::{EventLog, StoreError};

/// One subscription as stored.
#[derive(Debug, Clone, FromRow)]
pub struct SubscriptionRow {
    pub subscription_id: String,
    pub owner: String,
    pub url: String,
    /// A JSON array of event names.
    pub events: String,
    pub description: Option<String>,
    pub active: i64,
    pub disabled_reason: Option<String>,
    /// The sealed secret, as JSON text.
    pub secret: String,
    pub created_at: String,
    pub updated_at: String,
}

impl SubscriptionRow {
    pub fn event_names(&self) -> Vec<String> {
        serde_json::from_str(&self.events).unwrap_or_default()
    }
}

const COLUMNS: &str = "subscription_id, owner, url, events, description, active, \
     disabled_reason, secret, created_at, updated_at";

pub async fn get(log: &EventLog, id: &str) -> Result<Option<SubscriptionRow>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM webhook_subscriptions WHERE subscription_id = $1");
    Ok(with_pool!(log.db().reader(), pool => {
        sqlx::query_as::<_, SubscriptionRow>(&sql)
            .bind(id)
            .fetch_optional(pool)
            .await?
    }))
}

/// Where a subscription's deliveries go: its URL and sealed secret.
pub async fn target(log: &EventLog, id: &str) -> Result<Option<(String, Value)>, StoreError> {
    Ok(get(log, id).await?.map(|row| {
        let secret = serde_json::from_str(&row.secret).unwrap_or(Value::Null);
        (row.url, secret)
    }))
}

/// `owner`'s subscriptions, oldest first, and how many match.
pub async fn list(
    log: &EventLog,
    owner: &str,
    active_only: bool,
    limit: i64,
    offset: i64,
) -> Result<(Vec<SubscriptionRow>, i64), StoreError> {
    let filter = if active_only { " AND active = 1" } else { "" };
    let sql = format!(
        "SELECT {COLUMNS} FROM webhook_subscriptions WHERE owner = $1{filter} \
         ORDER BY created_at, subscription_id LIMIT $2 OFFSET $3"
    );
    let count = format!("SELECT COUNT(*) FROM webhook_subscriptions WHERE owner = $1{filter}");
    Ok(with_pool!(log.db().reader(), pool => {
        let rows = sqlx::query_as::<_, SubscriptionRow>(&sql)
            .bind(owner)
            .bind(limit)
            .bind(offset)
            .fetch_all(pool)
            .await?;
        let total: i64 = sqlx::query_scalar(&count).bind(owner).fetch_one(pool).await?;
        (rows, total)
    }))
}
