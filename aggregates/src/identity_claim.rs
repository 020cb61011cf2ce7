//! One stream per provider identity (by its blind index), so that one
//! identity at a provider signs in as one account only: the event store's
//! per-stream sequence decides a race between two links.

use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::Decide;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IdentityClaim {
    pub user_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityClaimCommand {
    Claim {
        user_id: String,
    },
    /// The identity was unlinked from `user_id`'s account, or the account
    /// erased: it may be linked again.
    Release {
        user_id: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum IdentityClaimEvent {
    IdentityClaimed { user_id: String },
    IdentityReleased { user_id: String },
}

impl DomainEvent for IdentityClaimEvent {
    fn event_type(&self) -> String {
        match self {
            IdentityClaimEvent::IdentityClaimed { .. } => "IdentityClaimed",
            IdentityClaimEvent::IdentityReleased { .. } => "IdentityReleased",
        }
        .to_owned()
    }

    fn event_version(&self) -> String {
        crate::wire::current_version(<IdentityClaim as Aggregate>::TYPE, &self.event_type())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum IdentityClaimError {
    #[error("this identity already signs in as another account")]
    Taken,
}

crate::rejections!(IdentityClaimError {
    Self::Taken => Conflict, "IDENTITY_TAKEN",
});

impl Decide for IdentityClaim {
    fn decide(
        &self,
        command: IdentityClaimCommand,
    ) -> Result<Vec<IdentityClaimEvent>, IdentityClaimError> {
        match command {
            IdentityClaimCommand::Claim { user_id } => match &self.user_id {
                Some(owner) if *owner == user_id => Ok(Vec::new()),
                Some(_) => Err(IdentityClaimError::Taken),
                None => Ok(vec![IdentityClaimEvent::IdentityClaimed { user_id }]),
            },
            IdentityClaimCommand::Release { user_id } => {
                if self.user_id.as_deref() == Some(user_id.as_str()) {
                    Ok(vec![IdentityClaimEvent::IdentityReleased { user_id }])
                } else {
                    Ok(Vec::new())
                }
            }
        }
    }
}

impl Aggregate for IdentityClaim {
    const TYPE: &'static str = "identity";
    type Command = IdentityClaimCommand;
    type Event = IdentityClaimEvent;
    type Error = IdentityClaimError;
    type Services = ();

    async fn handle(
        &mut self,
        command: IdentityClaimCommand,
        _services: &(),
        sink: &EventSink<Self>,
    ) -> Result<(), IdentityClaimError> {
        crate::record(self, command, sink).await
    }

    fn apply(&mut self, event: IdentityClaimEvent) {
        self.user_id = match event {
            IdentityClaimEvent::IdentityClaimed { user_id } => Some(user_id),
            IdentityClaimEvent::IdentityReleased { .. } => None,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cqrs_es::test::TestFramework;

    #[tokio::test]
    async fn an_identity_belongs_to_one_account_until_released() {
        let claimed = IdentityClaimEvent::IdentityClaimed {
            user_id: "u1".to_owned(),
        };
        TestFramework::<IdentityClaim>::with(())
            .given(vec![claimed.clone()])
            .when_async(IdentityClaimCommand::Claim {
                user_id: "u2".to_owned(),
            })
            .await
            .then_expect_error(IdentityClaimError::Taken);
        TestFramework::<IdentityClaim>::with(())
            .given(vec![
                claimed,
                IdentityClaimEvent::IdentityReleased {
                    user_id: "u1".to_owned(),
                },
            ])
            .when_async(IdentityClaimCommand::Claim {
                user_id: "u2".to_owned(),
            })
            .await
            .then_expect_events(vec![IdentityClaimEvent::IdentityClaimed {
                user_id: "u2".to_owned(),
            }]);
    }
}
