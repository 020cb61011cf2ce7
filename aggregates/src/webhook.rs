//! The Webhook aggregate: one outgoing webhook subscription (spec §6.2): the
//! owner, the receiving URL, the event names it wants, its signing secret
//! (kept encrypted: the aggregate only carries the sealed value) and whether
//! deliveries go out. Only its owner changes it; the delivery worker may
//! disable it after sustained failure, and only the owner enables it again.

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use crate::Decide;

/// The event names a subscription may ask for.
pub const WEBHOOK_EVENTS: [&str; 3] = ["debate.completed", "debate.verdict", "debate.failed"];

/// The most event names one subscription lists.
const MAX_EVENTS: usize = WEBHOOK_EVENTS.len();

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Webhook {
    pub subscription_id: String,
    pub owner: String,
    pub url: String,
    pub events: Vec<String>,
    pub active: bool,
    pub deleted: bool,
}

impl Webhook {
    fn exists(&self) -> bool {
        !self.subscription_id.is_empty() && !self.deleted
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum WebhookCommand {
    Create {
        subscription_id: String,
        owner: String,
        url: String,
        events: Vec<String>,
        description: Option<String>,
        /// The longest description the service takes, in characters.
        description_max: usize,
        /// The signing secret as the field cipher sealed it.
        secret: Value,
        at: DateTime<Utc>,
    },
    /// Changes what is given; `active: Some(true)` re-enables it.
    Update {
        by: String,
        url: Option<String>,
        events: Option<Vec<String>>,
        description: Option<String>,
        /// The longest description the service takes, in characters.
        description_max: usize,
        active: Option<bool>,
        at: DateTime<Utc>,
    },
    RotateSecret {
        by: String,
        secret: Value,
        at: DateTime<Utc>,
    },
    /// The delivery worker gave up on the receiver for now.
    Disable {
        reason: String,
        at: DateTime<Utc>,
    },
    Delete {
        by: String,
        at: DateTime<Utc>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum WebhookEvent {
    WebhookCreated {
        subscription_id: String,
        owner: String,
        url: String,
        events: Vec<String>,
        description: Option<String>,
        secret: Value,
        at: DateTime<Utc>,
    },
    WebhookUpdated {
        url: Option<String>,
        events: Option<Vec<String>>,
        description: Option<String>,
        at: DateTime<Utc>,
    },
    WebhookEnabled {
        at: DateTime<Utc>,
    },
    WebhookDisabled {
        /// `failing` when the worker disabled it, `owner` when its owner did.
        reason: String,
        at: DateTime<Utc>,
    },
    WebhookSecretRotated {
        secret: Value,
        at: DateTime<Utc>,
    },
    WebhookDeleted {
        at: DateTime<Utc>,
    },
}

impl DomainEvent for WebhookEvent {
    fn event_type(&self) -> String {
        match self {
            WebhookEvent::WebhookCreated { .. } => "WebhookCreated",
            WebhookEvent::WebhookUpdated { .. } => "WebhookUpdated",
            WebhookEvent::WebhookEnabled { .. } => "WebhookEnabled",
            WebhookEvent::WebhookDisabled { .. } => "WebhookDisabled",
            WebhookEvent::WebhookSecretRotated { .. } => "WebhookSecretRotated",
            WebhookEvent::WebhookDeleted { .. } => "WebhookDeleted",
        }
        .to_owned()
    }

    fn event_version(&self) -> String {
        crate::wire::current_version(<Webhook as Aggregate>::TYPE, &self.event_type())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WebhookError {
    #[error("webhook subscription not found")]
    NotFound,
    #[error("webhook subscription already exists")]
    Exists,
    #[error("events must list 1 to {MAX_EVENTS} of: {}", WEBHOOK_EVENTS.join(", "))]
    BadEvents,
    #[error("description is longer than {max} characters")]
    LongDescription { max: usize },
}

crate::rejections!(WebhookError {
    Self::NotFound => NotFound, "WEBHOOK_NOT_FOUND",
    Self::Exists => Conflict, "WEBHOOK_EXISTS",
    Self::BadEvents => Invalid, "WEBHOOK_EVENTS",
    Self::LongDescription { .. } => Invalid, "WEBHOOK_DESCRIPTION",
});

/// The event names, each known, without repeats, in the given order.
fn check_events(events: &[String]) -> Result<(), WebhookError> {
    let known = events.iter().all(|e| WEBHOOK_EVENTS.contains(&e.as_str()));
    let unique = events
        .iter()
        .enumerate()
        .all(|(i, e)| !events[..i].contains(e));
    if events.is_empty() || events.len() > MAX_EVENTS || !known || !unique {
        return Err(WebhookError::BadEvents);
    }
    Ok(())
}

fn check_description(description: Option<&String>, max: usize) -> Result<(), WebhookError> {
    match description {
        Some(text) if text.chars().count() > max => Err(WebhookError::LongDescription { max }),
        _ => Ok(()),
    }
}

impl Decide for Webhook {
    fn decide(&self, command: WebhookCommand) -> Result<Vec<WebhookEvent>, WebhookError> {
        use WebhookCommand as C;
        use WebhookEvent as E;
        let owned_by = |by: &str| {
            if self.exists() && self.owner == by {
                Ok(())
            } else {
                Err(WebhookError::NotFound)
            }
        };
        match command {
            C::Create {
                subscription_id,
                owner,
                url,
                events,
                description,
                description_max,
                secret,
                at,
            } => {
                if !self.subscription_id.is_empty() {
                    return Err(WebhookError::Exists);
                }
                check_events(&events)?;
                check_description(description.as_ref(), description_max)?;
                Ok(vec![E::WebhookCreated {
                    subscription_id,
                    owner,
                    url,
                    events,
                    description,
                    secret,
                    at,
                }])
            }
            C::Update {
                by,
                url,
                events,
                description,
                description_max,
                active,
                at,
            } => {
                owned_by(&by)?;
                if let Some(events) = &events {
                    check_events(events)?;
                }
                check_description(description.as_ref(), description_max)?;
                let mut out = Vec::new();
                if url.is_some() || events.is_some() || description.is_some() {
                    out.push(E::WebhookUpdated {
                        url,
                        events,
                        description,
                        at,
                    });
                }
                match active {
                    Some(true) if !self.active => out.push(E::WebhookEnabled { at }),
                    Some(false) if self.active => out.push(E::WebhookDisabled {
                        reason: "owner".to_owned(),
                        at,
                    }),
                    _ => {}
                }
                Ok(out)
            }
            C::RotateSecret { by, secret, at } => {
                owned_by(&by)?;
                Ok(vec![E::WebhookSecretRotated { secret, at }])
            }
            C::Disable { reason, at } => {
                if !self.exists() {
                    return Err(WebhookError::NotFound);
                }
                if !self.active {
                    return Ok(Vec::new());
                }
                Ok(vec![E::WebhookDisabled { reason, at }])
            }
            C::Delete { by, at } => {
                owned_by(&by)?;
                Ok(vec![E::WebhookDeleted { at }])
            }
        }
    }
}

impl Aggregate for Webhook {
    const TYPE: &'static str = "webhook";
    type Command = WebhookCommand;
    type Event = WebhookEvent;
    type Error = WebhookError;
    type Services = ();

    async fn handle(
        &mut self,
        command: WebhookCommand,
        _services: &(),
        sink: &EventSink<Self>,
    ) -> Result<(), WebhookError> {
        crate::record(self, command, sink).await
    }

    fn apply(&mut self, event: WebhookEvent) {
        match event {
            WebhookEvent::WebhookCreated {
                subscription_id,
                owner,
                url,
                events,
                ..
            } => {
                self.subscription_id = subscription_id;
                self.owner = owner;
                self.url = url;
                self.events = events;
                self.active = true;
            }
            WebhookEvent::WebhookUpdated { url, events, .. } => {
                if let Some(url) = url {
                    self.url = url;
                }
                if let Some(events) = events {
                    self.events = events;
                }
            }
            WebhookEvent::WebhookEnabled { .. } => self.active = true,
            WebhookEvent::WebhookDisabled { .. } => self.active = false,
            WebhookEvent::WebhookSecretRotated { .. } => {}
            WebhookEvent::WebhookDeleted { .. } => self.deleted = true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use cqrs_es::test::TestFramework;
    use serde_json::json;

    fn at() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2027, 1, 15, 8, 0, 0).unwrap()
    }

    fn created() -> WebhookEvent {
        WebhookEvent::WebhookCreated {
            subscription_id: "w1".to_owned(),
            owner: "u1".to_owned(),
            url: "https://example.com/hook".to_owned(),
            events: vec!["debate.completed".to_owned()],
            description: None,
            secret: json!("sealed"),
            at: at(),
        }
    }

    fn update(by: &str, active: Option<bool>, events: Option<Vec<&str>>) -> WebhookCommand {
        WebhookCommand::Update {
            by: by.to_owned(),
            url: None,
            events: events.map(|e| e.into_iter().map(str::to_owned).collect()),
            description: None,
            description_max: 500,
            active,
            at: at(),
        }
    }

    #[test]
    fn events_must_be_known_and_distinct() {
        let names = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(check_events(&names(&["debate.completed", "debate.failed"])).is_ok());
        for bad in [
            names(&[]),
            names(&["debate.created"]),
            names(&["debate.completed", "debate.completed"]),
        ] {
            assert_eq!(check_events(&bad), Err(WebhookError::BadEvents), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn only_the_owner_changes_a_subscription() {
        TestFramework::<Webhook>::with(())
            .given(vec![created()])
            .when_async(update("u2", Some(false), None))
            .await
            .then_expect_error(WebhookError::NotFound);
        TestFramework::<Webhook>::with(())
            .given(vec![created()])
            .when_async(update("u1", None, Some(vec!["debate.nope"])))
            .await
            .then_expect_error(WebhookError::BadEvents);
    }

    #[tokio::test]
    async fn a_disabled_subscription_is_enabled_by_its_owner() {
        let disabled = WebhookEvent::WebhookDisabled {
            reason: "failing".to_owned(),
            at: at(),
        };
        TestFramework::<Webhook>::with(())
            .given(vec![created(), disabled.clone()])
            .when_async(update("u1", Some(true), None))
            .await
            .then_expect_events(vec![WebhookEvent::WebhookEnabled { at: at() }]);
        // Disabling twice records nothing.
        TestFramework::<Webhook>::with(())
            .given(vec![created(), disabled])
            .when_async(WebhookCommand::Disable {
                reason: "failing".to_owned(),
                at: at(),
            })
            .await
            .then_expect_events(vec![]);
    }

    #[tokio::test]
    async fn a_deleted_subscription_is_gone() {
        TestFramework::<Webhook>::with(())
            .given(vec![created(), WebhookEvent::WebhookDeleted { at: at() }])
            .when_async(WebhookCommand::RotateSecret {
                by: "u1".to_owned(),
                secret: json!("new"),
                at: at(),
            })
            .await
            .then_expect_error(WebhookError::NotFound);
    }
}
