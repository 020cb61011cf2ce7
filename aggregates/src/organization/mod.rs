//! The Organization aggregate: a named group of users, its members' roles
//! and the invitations that bring new members in.

mod aggregate;
#[cfg(test)]
mod tests;

pub use aggregate::{
    Invite, OrgRole, Organization, OrganizationCommand, OrganizationError, OrganizationEvent,
};
