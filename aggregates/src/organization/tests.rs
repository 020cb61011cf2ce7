//! Given/when/then tests of the Organization aggregate.

use chrono::{DateTime, Duration, TimeZone, Utc};
use cqrs_es::test::TestFramework;

use super::*;

type Given = TestFramework<Organization>;

fn t(seconds: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000, 0)
        .single()
        .unwrap_or_default()
        + Duration::seconds(seconds)
}

fn created() -> OrganizationEvent {
    OrganizationEvent::OrganizationCreated {
        org_id: "o1".to_owned(),
        name: "Acme".to_owned(),
        owner_id: "owner".to_owned(),
        at: t(0),
    }
}

fn invited(role: OrgRole) -> OrganizationEvent {
    OrganizationEvent::MemberInvited {
        invite_id: "i1".to_owned(),
        email: "bob@example.com".to_owned(),
        role,
        token_hash: "tok".to_owned(),
        expires_at: t(100),
        invited_by: "owner".to_owned(),
        at: t(1),
    }
}

fn invite(by: &str, role: OrgRole) -> OrganizationCommand {
    OrganizationCommand::Invite {
        invite_id: "i1".to_owned(),
        email: "bob@example.com".to_owned(),
        role,
        token_hash: "tok".to_owned(),
        expires_at: t(100),
        by: by.to_owned(),
        at: t(1),
    }
}

fn accept(user: &str, email: &str, at: i64) -> OrganizationCommand {
    OrganizationCommand::AcceptInvite {
        invite_id: "i1".to_owned(),
        token_hash: "tok".to_owned(),
        user_id: user.to_owned(),
        email: email.to_owned(),
        at: t(at),
    }
}

#[tokio::test]
async fn a_blank_name_is_refused() {
    Given::with(())
        .given_no_previous_events()
        .when_async(OrganizationCommand::Create {
            org_id: "o1".to_owned(),
            name: "   ".to_owned(),
            owner_id: "u".to_owned(),
            at: t(0),
        })
        .await
        .then_expect_error(OrganizationError::InvalidName);
}

#[tokio::test]
async fn the_owner_invites_and_others_may_not() {
    Given::with(())
        .given(vec![created()])
        .when_async(invite("owner", OrgRole::Member))
        .await
        .then_expect_events(vec![invited(OrgRole::Member)]);
    Given::with(())
        .given(vec![created()])
        .when_async(invite("stranger", OrgRole::Member))
        .await
        .then_expect_error(OrganizationError::NotAllowed);
    Given::with(())
        .given(vec![created()])
        .when_async(invite("owner", OrgRole::Owner))
        .await
        .then_expect_error(OrganizationError::InvalidRole);
}

#[tokio::test]
async fn an_invitation_is_accepted_once_by_its_addressee_before_it_expires() {
    Given::with(())
        .given(vec![created(), invited(OrgRole::Viewer)])
        .when_async(accept("bob", "bob@example.com", 50))
        .await
        .then_expect_events(vec![OrganizationEvent::InviteAccepted {
            invite_id: "i1".to_owned(),
            user_id: "bob".to_owned(),
            role: OrgRole::Viewer,
            at: t(50),
        }]);
    Given::with(())
        .given(vec![created(), invited(OrgRole::Viewer)])
        .when_async(accept("eve", "eve@example.com", 50))
        .await
        .then_expect_error(OrganizationError::InviteEmailMismatch);
    Given::with(())
        .given(vec![created(), invited(OrgRole::Viewer)])
        .when_async(accept("bob", "bob@example.com", 100))
        .await
        .then_expect_error(OrganizationError::InviteExpired);
    Given::with(())
        .given(vec![
            created(),
            invited(OrgRole::Viewer),
            OrganizationEvent::InviteAccepted {
                invite_id: "i1".to_owned(),
                user_id: "bob".to_owned(),
                role: OrgRole::Viewer,
                at: t(50),
            },
        ])
        .when_async(accept("bob", "bob@example.com", 60))
        .await
        .then_expect_error(OrganizationError::InviteUsed);
}

#[tokio::test]
async fn nothing_happens_to_an_organization_that_does_not_exist() {
    Given::with(())
        .given_no_previous_events()
        .when_async(invite("owner", OrgRole::Member))
        .await
        .then_expect_error(OrganizationError::NotFound);
}
