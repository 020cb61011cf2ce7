//! Enterprise SSO over SAML 2.0 in a build without it: the `saml` feature
//! (samael and libxmlsec1) is off, so a SAML setting stops the start with
//! a message saying how to build it in.

use super::{SamlIdentity as Identity, SamlLogout as LogoutAsked, SsoError};
use crate::config::SamlSettings;

/// Never built: [`Provider::new`] refuses.
#[derive(Debug)]
pub enum Provider {}

impl Provider {
    pub fn new(_settings: &SamlSettings, _entity_id: &str) -> Result<Self, SsoError> {
        Err(SsoError::Provider(
            "SERVICE_SSO_PROVIDER_TYPE=saml needs a build with SAML: cargo build --release --features saml (with libxmlsec1-dev libxml2-dev libssl-dev pkg-config libclang-dev installed)".to_owned(),
        ))
    }

    pub fn settings(&self) -> &SamlSettings {
        match *self {}
    }

    pub fn metadata(&self) -> String {
        match *self {}
    }

    pub fn authorize(&self, _relay_state: &str, _request_id: &str) -> Result<String, SsoError> {
        match *self {}
    }

    pub fn consume(&self, _encoded: &str, _request_id: &str) -> Result<Identity, SsoError> {
        match *self {}
    }

    pub fn logout_request(&self, _raw_query: &str) -> Result<LogoutAsked, SsoError> {
        match *self {}
    }

    pub fn logout_response_url(
        &self,
        _in_response_to: &str,
        _relay_state: Option<&str>,
        _response_id: &str,
    ) -> Result<Option<String>, SsoError> {
        match *self {}
    }

    pub fn logout_url(
        &self,
        _name_id: &str,
        _request_id: &str,
    ) -> Result<Option<String>, SsoError> {
        match *self {}
    }
}
