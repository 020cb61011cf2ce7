//! Erasure of a user's personal data on an immutable log (crypto-shredding,
//! ARCHITECTURE.md "Erasure"): the account records `Erased`, its sessions
//! and keys end, its email claim is released, and its subject key is
//! destroyed, so the sealed email and name in its events can never be read
//! again while every event, hash and seal stays as it was.
//!
//! Personal fields are opened here, on the way out of the log and the read
//! models: the aggregate and the projection keep them as stored.

use agon_aggregates::CommandMeta;
use agon_aggregates::account::{Account, AccountCommand, AccountEvent, ERASED};
use agon_aggregates::email_claim::{EmailClaim, EmailClaimCommand};
use agon_aggregates::ids::UserId;
use agon_projections::Accounts;
use agon_projections::accounts::AccountView;

use super::attempts::{Gate, credential_of, detached};
use super::{Auth, AuthError, Caller};
use crate::crypto::subject_keys::{DataKey, Revealed, reveal, sealed_subject};

/// What an erasure did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Erasure {
    /// Sessions it ended (API keys end too).
    pub sessions_revoked: usize,
}

impl Auth {
    /// `account` with its email and name opened ([`ERASED`] once its key is gone).
    pub(super) async fn revealed(&self, mut account: Account) -> Result<Account, AuthError> {
        let key = self.key_for(&[&account.email, &account.name]).await?;
        account.email = opened(&account.email, key.as_ref())?;
        account.name = opened(&account.name, key.as_ref())?;
        Ok(account)
    }

    /// `view` with its email and name opened.
    pub(super) async fn revealed_view(
        &self,
        mut view: AccountView,
    ) -> Result<AccountView, AuthError> {
        let key = self.key_for(&[&view.email, &view.name]).await?;
        view.email = opened(&view.email, key.as_ref())?;
        view.name = opened(&view.name, key.as_ref())?;
        Ok(view)
    }

    /// `views` with their emails and names opened, their keys read together.
    pub(super) async fn revealed_views(
        &self,
        views: Vec<AccountView>,
    ) -> Result<Vec<AccountView>, AuthError> {
        let subjects: Vec<&str> = views
            .iter()
            .flat_map(|v| [sealed_subject(&v.email), sealed_subject(&v.name)])
            .flatten()
            .collect();
        let keys = self.subject_keys().get_many(&subjects).await?;
        views
            .into_iter()
            .map(|mut view| {
                let key = sealed_subject(&view.email)
                    .or_else(|| sealed_subject(&view.name))
                    .and_then(|subject| keys.get(subject));
                view.email = opened(&view.email, key)?;
                view.name = opened(&view.name, key)?;
                Ok(view)
            })
            .collect()
    }

    /// The key that the sealed ones of `fields` need, if it still exists.
    async fn key_for(&self, fields: &[&str]) -> Result<Option<DataKey>, AuthError> {
        match fields.iter().find_map(|field| sealed_subject(field)) {
            Some(subject) => Ok(self.subject_keys().get(subject).await?),
            None => Ok(None),
        }
    }

    /// An admin erases `user_id`. Erasing an erased account again finishes
    /// what a failed erasure left undone (claim, key) and changes nothing else.
    #[tracing::instrument(level = "debug", skip_all, fields(user_id = %user_id), err(level = "debug"))]
    pub async fn erase(&self, admin: &UserId, user_id: &UserId) -> Result<Erasure, AuthError> {
        let account = self.inner.log.load::<Account>(user_id).await?;
        if account.created_at.is_none() {
            return Err(AuthError::NotFound {
                resource_type: "user",
                resource_id: user_id.to_string(),
            });
        }
        let erase = AccountCommand::Erase {
            by: admin.as_str().to_owned(),
            at: self.clock().now(),
        };
        let (_, events) = self.command(user_id, erase, admin).await?;
        self.finish_erasure(&account, &events).await
    }

    /// The caller erases their own account, proving it with their password
    /// (checked like a password change: against the credential's budget).
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn erase_own(&self, caller: &Caller, password: &str) -> Result<Erasure, AuthError> {
        let credential = credential_of(caller)?;
        let (auth, caller, password) = (self.clone(), caller.clone(), password.to_owned());
        detached(async move {
            let gate = auth.inner.attempts.gate(&caller.user_id);
            let result = auth
                .erase_own_gated(&gate, &caller, credential, password)
                .await;
            auth.inner.attempts.release(&caller.user_id, gate);
            result
        })
        .await
    }

    async fn erase_own_gated(
        &self,
        gate: &Gate,
        caller: &Caller,
        credential: String,
        password: String,
    ) -> Result<Erasure, AuthError> {
        let user_id = &caller.user_id;
        let (attempt_id, account) = self
            .reserve(gate, user_id, Some(credential.clone()))
            .await?;
        let matches = self
            .hasher()
            .verify(password, Some(account.password_hash.clone()))
            .await;
        if !matches {
            let wrong = AuthError::Forbidden("Password is incorrect".to_owned());
            return Err(self
                .reauth_failed(gate, caller, credential, &attempt_id, wrong)
                .await);
        }
        self.end_attempt(gate, user_id, &attempt_id).await;
        let erase = AccountCommand::Erase {
            by: user_id.to_string(),
            at: self.clock().now(),
        };
        let (_, events) = self.gated(gate, user_id, erase).await?;
        self.finish_erasure(&account, &events).await
    }

    /// After `Erased`: the address may be registered again, its provider
    /// identities linked again, the key goes
    /// (the erasure proper), and the read models show it before the answer.
    async fn finish_erasure(
        &self,
        account: &Account,
        events: &[AccountEvent],
    ) -> Result<Erasure, AuthError> {
        let user_id = account.user_id.as_str();
        if let Some(index) = &account.email_index {
            let release = EmailClaimCommand::Release {
                user_id: user_id.to_owned(),
            };
            self.log()
                .execute::<EmailClaim>(index, release, CommandMeta::by(user_id))
                .await?;
        }
        for subject_index in account.identities.values() {
            self.release(subject_index, user_id).await?;
        }
        self.subject_keys().destroy(user_id).await?;
        self.await_revocations(events).await?;
        self.docs()
            .wait_for::<Accounts>(user_id, |view| view.erased)
            .await?;
        let sessions_revoked = super::admin::count_revoked(events);
        Ok(Erasure { sessions_revoked })
    }
}

/// The plaintext of a stored field, or [`ERASED`].
fn opened(field: &str, key: Option<&DataKey>) -> Result<String, AuthError> {
    Ok(match reveal(field, key)? {
        Revealed::Plain(text) => text,
        Revealed::Erased => ERASED.to_owned(),
    })
}
