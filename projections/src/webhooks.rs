//! Webhook subscriptions as rows (`webhook_subscriptions`), for the owner's
//! list and reads and for the delivery consumer, which finds the active
//! subscriptions of a debate's owner by an index.

use agon_aggregates::webhook::WebhookEvent;
use chrono::SecondsFormat;

use crate::tables::{Cells, Changes, TableProjection};
use crate::{DecodeError, EventRecord};

/// The aggregate type webhook subscriptions are stored under.
pub const WEBHOOK_AGGREGATE: &str = "webhook";

/// One row per live subscription: `subscription_id`, `owner`, `url`,
/// `events` (a JSON array), `description`, `active` (0 or 1),
/// `disabled_reason`, `secret` (the sealed secret as JSON), `created_at`,
/// `updated_at` (RFC 3339).
pub const SUBSCRIPTIONS_TABLE: &str = "webhook_subscriptions";

/// Table projection of the Webhook aggregate.
pub struct WebhookSubscriptions;

fn time(at: &chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

impl TableProjection for WebhookSubscriptions {
    const NAME: &'static str = "webhook_subscriptions";
    const TABLES: &'static [&'static str] = &[SUBSCRIPTIONS_TABLE];
    type State = ();

    fn relevant(event: &EventRecord) -> bool {
        event.aggregate_type == WEBHOOK_AGGREGATE
    }

    fn apply(_: &mut (), event: &EventRecord, changes: &mut Changes) -> Result<(), DecodeError> {
        if !Self::relevant(event) {
            return Ok(());
        }
        let key: Cells = vec![("subscription_id", event.aggregate_id.as_str().into())];
        let json = |value: &serde_json::Value| serde_json::to_string(value).unwrap_or_default();
        match event.decode::<WebhookEvent>()? {
            WebhookEvent::WebhookCreated {
                owner,
                url,
                events,
                description,
                secret,
                at,
                ..
            } => changes.upsert(
                SUBSCRIPTIONS_TABLE,
                key,
                vec![
                    ("owner", owner.into()),
                    ("url", url.into()),
                    ("events", json(&serde_json::json!(events)).into()),
                    ("description", description.into()),
                    ("active", 1.into()),
                    ("disabled_reason", None.into()),
                    ("secret", json(&secret).into()),
                    ("created_at", time(&at).into()),
                    ("updated_at", time(&at).into()),
                ],
            ),
            WebhookEvent::WebhookUpdated {
                url,
                events,
                description,
                at,
            } => {
                let mut columns: Cells = vec![("updated_at", time(&at).into())];
                if let Some(url) = url {
                    columns.push(("url", url.into()));
                }
                if let Some(events) = events {
                    columns.push(("events", json(&serde_json::json!(events)).into()));
                }
                if let Some(description) = description {
                    columns.push(("description", description.into()));
                }
                changes.upsert(SUBSCRIPTIONS_TABLE, key, columns);
            }
            WebhookEvent::WebhookEnabled { at } => changes.upsert(
                SUBSCRIPTIONS_TABLE,
                key,
                vec![
                    ("active", 1.into()),
                    ("disabled_reason", None.into()),
                    ("updated_at", time(&at).into()),
                ],
            ),
            WebhookEvent::WebhookDisabled { reason, at } => changes.upsert(
                SUBSCRIPTIONS_TABLE,
                key,
                vec![
                    ("active", 0.into()),
                    ("disabled_reason", reason.into()),
                    ("updated_at", time(&at).into()),
                ],
            ),
            WebhookEvent::WebhookSecretRotated { secret, at } => changes.upsert(
                SUBSCRIPTIONS_TABLE,
                key,
                vec![
                    ("secret", json(&secret).into()),
                    ("updated_at", time(&at).into()),
                ],
            ),
            WebhookEvent::WebhookDeleted { .. } => changes.delete(SUBSCRIPTIONS_TABLE, key),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Cursor;
    use crate::tables::{Cell, Change};
    use serde_json::json;

    fn record(sequence: i64, event: &WebhookEvent) -> EventRecord {
        let payload = serde_json::to_value(event).unwrap_or_default();
        let event_type = payload
            .as_object()
            .and_then(|o| o.keys().next().cloned())
            .unwrap_or_default();
        EventRecord {
            cursor: Cursor::START,
            event_id: format!("e{sequence}"),
            aggregate_type: WEBHOOK_AGGREGATE.to_owned(),
            aggregate_id: "w1".to_owned(),
            sequence,
            event_type,
            event_version: "1".to_owned(),
            payload,
            metadata: json!({}),
            hash: String::new(),
        }
    }

    #[test]
    fn a_subscription_is_a_row_until_it_is_deleted() {
        let at = chrono::DateTime::UNIX_EPOCH;
        let events = [
            WebhookEvent::WebhookCreated {
                subscription_id: "w1".to_owned(),
                owner: "u1".to_owned(),
                url: "https://example.com/".to_owned(),
                events: vec!["debate.completed".to_owned()],
                description: None,
                secret: json!({"_encrypted": true}),
                at,
            },
            WebhookEvent::WebhookDisabled {
                reason: "failing".to_owned(),
                at,
            },
            WebhookEvent::WebhookDeleted { at },
        ];
        let mut changes = Changes::default();
        for (n, event) in events.iter().enumerate() {
            let sequence = i64::try_from(n).unwrap_or_default() + 1;
            WebhookSubscriptions::apply(&mut (), &record(sequence, event), &mut changes)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let kinds: Vec<_> = changes.iter().map(|c| c.change.clone()).collect();
        let Change::Upsert(created) = &kinds[0] else {
            panic!("an upsert first");
        };
        assert!(created.contains(&("owner", Cell::Text(Some("u1".to_owned())))));
        assert_eq!(kinds.last(), Some(&Change::Delete));
    }
}
