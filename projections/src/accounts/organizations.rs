//! Organization documents: an organization's name and member count, for
//! invitations and `me`.

use agon_aggregates::organization::OrganizationEvent;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::ORGANIZATION_AGGREGATE;
use crate::{DecodeError, DocumentProjection, EventRecord};

/// An organization's name, for invitations and `me`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrganizationView {
    pub org_id: String,
    pub name: String,
    pub owner_id: String,
    pub members: u64,
    pub created_at: DateTime<Utc>,
}

/// Projection of organizations, one document per organization.
pub struct Organizations;

impl DocumentProjection for Organizations {
    const NAME: &'static str = "organizations";
    type Doc = OrganizationView;

    fn key(event: &EventRecord) -> Result<Option<String>, DecodeError> {
        Ok((event.aggregate_type == ORGANIZATION_AGGREGATE).then(|| event.aggregate_id.clone()))
    }

    fn apply(
        doc: Option<OrganizationView>,
        event: &EventRecord,
    ) -> Result<Option<OrganizationView>, DecodeError> {
        let change: OrganizationEvent = event.decode()?;
        Ok(match (change, doc) {
            (
                OrganizationEvent::OrganizationCreated {
                    org_id,
                    name,
                    owner_id,
                    at,
                },
                _,
            ) => Some(OrganizationView {
                org_id,
                name,
                owner_id,
                members: 1,
                created_at: at,
            }),
            (OrganizationEvent::InviteAccepted { .. }, Some(mut view)) => {
                view.members += 1;
                Some(view)
            }
            (_, doc) => doc,
        })
    }

    fn owner(doc: &OrganizationView) -> Option<String> {
        Some(doc.owner_id.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{at, fold, record};
    use super::*;

    #[test]
    fn an_organization_counts_its_members() {
        let created = OrganizationEvent::OrganizationCreated {
            org_id: "o1".to_owned(),
            name: "Acme".to_owned(),
            owner_id: "u1".to_owned(),
            at: at(),
        };
        let accepted = OrganizationEvent::InviteAccepted {
            invite_id: "i1".to_owned(),
            user_id: "u2".to_owned(),
            role: agon_aggregates::organization::OrgRole::Member,
            at: at(),
        };
        let events: Vec<_> = [created, accepted]
            .into_iter()
            .enumerate()
            .map(|(n, e)| {
                let sequence = i64::try_from(n).unwrap_or_default() + 1;
                record(
                    ORGANIZATION_AGGREGATE,
                    "o1",
                    sequence,
                    serde_json::to_value(e).unwrap_or_default(),
                )
            })
            .collect();
        let view = fold::<Organizations>(&events).unwrap_or_else(|| panic!("no organization"));
        assert_eq!((view.name.as_str(), view.members), ("Acme", 2));
    }
}
