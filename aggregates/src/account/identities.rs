//! Identities at outside providers (OAuth, enterprise SSO) that sign in as
//! an account: linking, unlinking, and the rule that an account always
//! keeps a way in.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::error::AccountError;
use super::events::AccountEvent;
use super::state::Account;

/// One identity at one provider, by its blind index (a keyed hash of
/// provider and subject computed by the service).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderIdentity {
    pub provider: String,
    pub subject_index: String,
}

impl Account {
    /// Whether `identity` is the one linked for its provider.
    pub fn is_linked(&self, identity: &ProviderIdentity) -> bool {
        self.identities.get(&identity.provider) == Some(&identity.subject_index)
    }

    /// The account can still be signed in to with a password or another
    /// provider once `provider` is unlinked.
    pub fn keeps_a_way_in_without(&self, provider: &str) -> bool {
        !self.password_unset || self.identities.keys().any(|linked| linked != provider)
    }

    pub(super) fn ensure_linked(&self, identity: &ProviderIdentity) -> Result<(), AccountError> {
        if self.is_linked(identity) {
            Ok(())
        } else {
            Err(AccountError::IdentityNotLinked)
        }
    }

    pub(super) fn decide_link(
        &self,
        identity: ProviderIdentity,
        at: DateTime<Utc>,
    ) -> Result<Vec<AccountEvent>, AccountError> {
        self.ensure_active()?;
        match self.identities.get(&identity.provider) {
            Some(linked) if *linked == identity.subject_index => Ok(Vec::new()),
            Some(_) => Err(AccountError::ProviderAlreadyLinked),
            None => Ok(vec![AccountEvent::IdentityLinked {
                provider: identity.provider,
                subject_index: identity.subject_index,
                provisioned: false,
                at,
            }]),
        }
    }

    pub(super) fn decide_unlink(
        &self,
        provider: &str,
        at: DateTime<Utc>,
    ) -> Result<Vec<AccountEvent>, AccountError> {
        self.ensure_active()?;
        let subject_index = self
            .identities
            .get(provider)
            .ok_or(AccountError::IdentityNotLinked)?;
        if !self.keeps_a_way_in_without(provider) {
            return Err(AccountError::LastSignInMethod);
        }
        Ok(vec![AccountEvent::IdentityUnlinked {
            provider: provider.to_owned(),
            subject_index: subject_index.clone(),
            at,
        }])
    }
}
