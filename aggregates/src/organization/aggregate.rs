//! Commands, events and rules of an organization.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::Decide;

/// A member's role inside an organization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OrgRole {
    Owner,
    Admin,
    Member,
    Viewer,
}

impl OrgRole {
    pub fn as_str(self) -> &'static str {
        match self {
            OrgRole::Owner => "owner",
            OrgRole::Admin => "admin",
            OrgRole::Member => "member",
            OrgRole::Viewer => "viewer",
        }
    }

    /// Roles an invitation may grant: every one but the owner's.
    pub fn parse_invitable(text: &str) -> Option<OrgRole> {
        match text {
            "admin" => Some(OrgRole::Admin),
            "member" => Some(OrgRole::Member),
            "viewer" => Some(OrgRole::Viewer),
            _ => None,
        }
    }

    fn may_invite(self) -> bool {
        matches!(self, OrgRole::Owner | OrgRole::Admin)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Invite {
    pub email: String,
    pub role: OrgRole,
    pub token_hash: String,
    pub expires_at: DateTime<Utc>,
    pub accepted_by: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Organization {
    pub org_id: String,
    pub name: String,
    pub owner_id: String,
    pub members: BTreeMap<String, OrgRole>,
    pub invites: BTreeMap<String, Invite>,
    pub created_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum OrganizationCommand {
    Create {
        org_id: String,
        name: String,
        owner_id: String,
        at: DateTime<Utc>,
    },
    Invite {
        invite_id: String,
        email: String,
        role: OrgRole,
        token_hash: String,
        expires_at: DateTime<Utc>,
        by: String,
        at: DateTime<Utc>,
    },
    AcceptInvite {
        invite_id: String,
        token_hash: String,
        user_id: String,
        /// The accepting user's normalized email; it must be the invited one.
        email: String,
        at: DateTime<Utc>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum OrganizationEvent {
    OrganizationCreated {
        org_id: String,
        name: String,
        owner_id: String,
        at: DateTime<Utc>,
    },
    MemberInvited {
        invite_id: String,
        email: String,
        role: OrgRole,
        token_hash: String,
        expires_at: DateTime<Utc>,
        invited_by: String,
        at: DateTime<Utc>,
    },
    InviteAccepted {
        invite_id: String,
        user_id: String,
        role: OrgRole,
        at: DateTime<Utc>,
    },
}

impl DomainEvent for OrganizationEvent {
    fn event_type(&self) -> String {
        match self {
            OrganizationEvent::OrganizationCreated { .. } => "OrganizationCreated",
            OrganizationEvent::MemberInvited { .. } => "MemberInvited",
            OrganizationEvent::InviteAccepted { .. } => "InviteAccepted",
        }
        .to_owned()
    }

    /// The version the upcasters bring stored events of this type to.
    fn event_version(&self) -> String {
        crate::wire::current_version(
            <Organization as cqrs_es::Aggregate>::TYPE,
            &self.event_type(),
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OrganizationError {
    #[error("organization already exists")]
    AlreadyExists,
    #[error("organization does not exist")]
    NotFound,
    #[error("organization name must be 1 to 100 characters")]
    InvalidName,
    #[error("only an owner or admin of the organization may invite")]
    NotAllowed,
    #[error("the owner role cannot be granted by invitation")]
    InvalidRole,
    #[error("user is already a member")]
    AlreadyMember,
    #[error("invitation not found")]
    InviteNotFound,
    #[error("invitation expired")]
    InviteExpired,
    #[error("invitation already used")]
    InviteUsed,
    #[error("invitation was sent to another email address")]
    InviteEmailMismatch,
}

impl Organization {
    /// The pending invitation `invite_id` if `token_hash` opens it at `at`.
    pub fn open_invite(
        &self,
        invite_id: &str,
        token_hash: &str,
        at: DateTime<Utc>,
    ) -> Result<&Invite, OrganizationError> {
        let invite = self
            .invites
            .get(invite_id)
            .filter(|invite| invite.token_hash == token_hash)
            .ok_or(OrganizationError::InviteNotFound)?;
        if invite.accepted_by.is_some() {
            return Err(OrganizationError::InviteUsed);
        }
        if invite.expires_at <= at {
            return Err(OrganizationError::InviteExpired);
        }
        Ok(invite)
    }
}

impl Decide for Organization {
    fn decide(
        &self,
        command: OrganizationCommand,
    ) -> Result<Vec<OrganizationEvent>, OrganizationError> {
        use OrganizationCommand as C;
        use OrganizationEvent as E;
        if self.created_at.is_none() && !matches!(command, C::Create { .. }) {
            return Err(OrganizationError::NotFound);
        }
        Ok(match command {
            C::Create {
                org_id,
                name,
                owner_id,
                at,
            } => {
                if self.created_at.is_some() {
                    return Err(OrganizationError::AlreadyExists);
                }
                let name = name.trim().to_owned();
                if name.is_empty() || name.chars().count() > 100 {
                    return Err(OrganizationError::InvalidName);
                }
                vec![E::OrganizationCreated {
                    org_id,
                    name,
                    owner_id,
                    at,
                }]
            }
            C::Invite {
                invite_id,
                email,
                role,
                token_hash,
                expires_at,
                by,
                at,
            } => {
                if !self.members.get(&by).is_some_and(|r| r.may_invite()) {
                    return Err(OrganizationError::NotAllowed);
                }
                if role == OrgRole::Owner {
                    return Err(OrganizationError::InvalidRole);
                }
                vec![E::MemberInvited {
                    invite_id,
                    email,
                    role,
                    token_hash,
                    expires_at,
                    invited_by: by,
                    at,
                }]
            }
            C::AcceptInvite {
                invite_id,
                token_hash,
                user_id,
                email,
                at,
            } => {
                let invite = self.open_invite(&invite_id, &token_hash, at)?;
                if invite.email != email {
                    return Err(OrganizationError::InviteEmailMismatch);
                }
                if self.members.contains_key(&user_id) {
                    return Err(OrganizationError::AlreadyMember);
                }
                vec![E::InviteAccepted {
                    invite_id,
                    user_id,
                    role: invite.role,
                    at,
                }]
            }
        })
    }
}

impl Aggregate for Organization {
    const TYPE: &'static str = "organization";
    type Command = OrganizationCommand;
    type Event = OrganizationEvent;
    type Error = OrganizationError;
    type Services = ();

    async fn handle(
        &mut self,
        command: OrganizationCommand,
        _services: &(),
        sink: &EventSink<Self>,
    ) -> Result<(), OrganizationError> {
        crate::record(self, command, sink).await
    }

    fn apply(&mut self, event: OrganizationEvent) {
        match event {
            OrganizationEvent::OrganizationCreated {
                org_id,
                name,
                owner_id,
                at,
            } => {
                self.members.insert(owner_id.clone(), OrgRole::Owner);
                self.org_id = org_id;
                self.name = name;
                self.owner_id = owner_id;
                self.created_at = Some(at);
            }
            OrganizationEvent::MemberInvited {
                invite_id,
                email,
                role,
                token_hash,
                expires_at,
                ..
            } => {
                self.invites.insert(
                    invite_id,
                    Invite {
                        email,
                        role,
                        token_hash,
                        expires_at,
                        accepted_by: None,
                    },
                );
            }
            OrganizationEvent::InviteAccepted {
                invite_id,
                user_id,
                role,
                ..
            } => {
                if let Some(invite) = self.invites.get_mut(&invite_id) {
                    invite.accepted_by = Some(user_id.clone());
                }
                self.members.insert(user_id, role);
            }
        }
    }
}

crate::rejections!(OrganizationError {
    Self::AlreadyExists => Conflict, "ORGANIZATION_EXISTS",
    Self::NotFound => NotFound, "ORGANIZATION_NOT_FOUND",
    Self::InvalidName => Invalid, "INVALID_ORGANIZATION_NAME",
    Self::NotAllowed => Forbidden, "NOT_ALLOWED_TO_INVITE",
    Self::InvalidRole => Invalid, "INVALID_INVITE_ROLE",
    Self::AlreadyMember => Conflict, "ALREADY_MEMBER",
    Self::InviteNotFound => NotFound, "INVITE_NOT_FOUND",
    Self::InviteExpired => Conflict, "INVITE_EXPIRED",
    Self::InviteUsed => Conflict, "INVITE_USED",
    Self::InviteEmailMismatch => Forbidden, "INVITE_EMAIL_MISMATCH",
});
