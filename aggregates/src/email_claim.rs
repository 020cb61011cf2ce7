//! One stream per email address, so that two registrations cannot take the
//! same address: the event store's per-stream sequence decides the race.

use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::Decide;

pub use crate::account::values::normalize_email;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EmailClaim {
    pub user_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmailClaimCommand {
    Claim {
        user_id: String,
    },
    /// The owner's account was erased: the address may be registered again.
    Release {
        user_id: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum EmailClaimEvent {
    EmailClaimed {
        user_id: String,
    },
    /// The claim of `user_id` ended with the erasure of that account.
    EmailReleased {
        user_id: String,
    },
}

impl DomainEvent for EmailClaimEvent {
    fn event_type(&self) -> String {
        match self {
            EmailClaimEvent::EmailClaimed { .. } => "EmailClaimed",
            EmailClaimEvent::EmailReleased { .. } => "EmailReleased",
        }
        .to_owned()
    }

    /// The version the upcasters bring stored events of this type to.
    fn event_version(&self) -> String {
        crate::wire::current_version(<EmailClaim as cqrs_es::Aggregate>::TYPE, &self.event_type())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EmailClaimError {
    #[error("email is already registered")]
    Taken,
}

impl Decide for EmailClaim {
    fn decide(&self, command: EmailClaimCommand) -> Result<Vec<EmailClaimEvent>, EmailClaimError> {
        match command {
            EmailClaimCommand::Claim { user_id } => match &self.user_id {
                Some(owner) if *owner == user_id => Ok(Vec::new()),
                Some(_) => Err(EmailClaimError::Taken),
                None => Ok(vec![EmailClaimEvent::EmailClaimed { user_id }]),
            },
            // Only the owner's erasure releases; anything else is a no-op.
            EmailClaimCommand::Release { user_id } => {
                if self.user_id.as_deref() == Some(user_id.as_str()) {
                    Ok(vec![EmailClaimEvent::EmailReleased { user_id }])
                } else {
                    Ok(Vec::new())
                }
            }
        }
    }
}

impl Aggregate for EmailClaim {
    const TYPE: &'static str = "email";
    type Command = EmailClaimCommand;
    type Event = EmailClaimEvent;
    type Error = EmailClaimError;
    type Services = ();

    async fn handle(
        &mut self,
        command: EmailClaimCommand,
        _services: &(),
        sink: &EventSink<Self>,
    ) -> Result<(), EmailClaimError> {
        crate::record(self, command, sink).await
    }

    fn apply(&mut self, event: EmailClaimEvent) {
        self.user_id = match event {
            EmailClaimEvent::EmailClaimed { user_id } => Some(user_id),
            EmailClaimEvent::EmailReleased { .. } => None,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cqrs_es::test::TestFramework;

    #[test]
    fn emails_compare_without_case_or_space() {
        assert_eq!(normalize_email("  Ada@Example.COM "), "ada@example.com");
    }

    #[tokio::test]
    async fn an_address_belongs_to_one_user() {
        let claimed = EmailClaimEvent::EmailClaimed {
            user_id: "u1".to_owned(),
        };
        TestFramework::<EmailClaim>::with(())
            .given(vec![claimed.clone()])
            .when_async(EmailClaimCommand::Claim {
                user_id: "u2".to_owned(),
            })
            .await
            .then_expect_error(EmailClaimError::Taken);
        TestFramework::<EmailClaim>::with(())
            .given(vec![claimed])
            .when_async(EmailClaimCommand::Claim {
                user_id: "u1".to_owned(),
            })
            .await
            .then_expect_events(vec![]);
    }

    #[tokio::test]
    async fn a_released_address_can_be_claimed_again() {
        let claimed = EmailClaimEvent::EmailClaimed {
            user_id: "u1".to_owned(),
        };
        let released = EmailClaimEvent::EmailReleased {
            user_id: "u1".to_owned(),
        };
        TestFramework::<EmailClaim>::with(())
            .given(vec![claimed.clone()])
            .when_async(EmailClaimCommand::Release {
                user_id: "u1".to_owned(),
            })
            .await
            .then_expect_events(vec![released.clone()]);
        TestFramework::<EmailClaim>::with(())
            .given(vec![claimed.clone()])
            .when_async(EmailClaimCommand::Release {
                user_id: "u2".to_owned(),
            })
            .await
            .then_expect_events(vec![]);
        TestFramework::<EmailClaim>::with(())
            .given(vec![claimed, released])
            .when_async(EmailClaimCommand::Claim {
                user_id: "u2".to_owned(),
            })
            .await
            .then_expect_events(vec![EmailClaimEvent::EmailClaimed {
                user_id: "u2".to_owned(),
            }]);
    }
}

crate::rejections!(EmailClaimError {
    Self::Taken => Conflict, "EMAIL_TAKEN",
});
