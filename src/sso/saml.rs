//! Enterprise SSO spoken as SAML 2.0 (samael, signatures checked by
//! libxmlsec1): our metadata, SP-initiated sign-in on the HTTP-Redirect
//! binding (signed when we hold a key), the response on the HTTP-POST
//! binding, and SP-initiated single logout.
//!
//! A response is believed only in what its signature covers: the shape is
//! checked first (`saml_shape`), then the signature against the configured
//! certificate alone, and the assertion read from the bytes the signature
//! digested (samael's pre-digest mode), never from the document around them.

use std::io::{Read, Write};
use std::str::FromStr;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::Utc;
use openssl::hash::MessageDigest;
use openssl::pkey::{PKey, Private, Public};
use samael::crypto::{AllowedSignatureAlgorithm, ReduceMode, decode_x509_cert, sign_url};
use samael::metadata::EntityDescriptor;
use samael::schema::{Assertion, LogoutRequest};
use samael::service_provider::{ServiceProvider, ServiceProviderBuilder};
use serde_json::{Map, Value};

use super::saml_shape::{inspect, no_document_type};
use super::{SamlIdentity as Identity, SamlLogout as LogoutAsked, SsoError};
use crate::config::SamlSettings;

const EMAIL_FORMAT: &str = "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress";
const REDIRECT_BINDING: &str = "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect";
const POST_BINDING: &str = "urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST";

pub struct Provider {
    sp: ServiceProvider,
    /// Checks the redirect binding's signatures (logout requests).
    idp_key: PKey<Public>,
    settings: SamlSettings,
    entity_id: String,
    /// Signs our requests, with its certificate (base64 DER) in our metadata.
    signing: Option<(PKey<Private>, String)>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SamlProvider")
            .field("entity_id", &self.entity_id)
            .field("idp", &self.settings.idp_entity_id)
            .finish_non_exhaustive()
    }
}

fn setting(problem: impl std::fmt::Display) -> SsoError {
    SsoError::Provider(problem.to_string())
}

/// The base64 DER inside a PEM certificate (or given bare).
fn certificate_body(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.starts_with("-----"))
        .collect()
}

/// Text for an XML attribute or element.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

impl Provider {
    pub fn new(settings: &SamlSettings, entity_id: &str) -> Result<Self, SsoError> {
        let idp_certificate = certificate_body(&settings.idp_certificate);
        let idp_der = decode_x509_cert(&idp_certificate)
            .map_err(|e| setting(format!("SERVICE_SSO_IDP_CERTIFICATE: {e}")))?;
        let idp_key = openssl::x509::X509::from_der(idp_der.der_data())
            .and_then(|certificate| certificate.public_key())
            .map_err(|e| setting(format!("SERVICE_SSO_IDP_CERTIFICATE: {e}")))?;
        // The provider as samael sees it: its entity id, its signing
        // certificate (the only key a response may be signed with).
        let idp_metadata: EntityDescriptor = format!(
            r#"<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="{entity}"><md:IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol"><md:KeyDescriptor use="signing"><ds:KeyInfo xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:X509Data><ds:X509Certificate>{idp_certificate}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor><md:SingleSignOnService Binding="{REDIRECT_BINDING}" Location="{sso}"/></md:IDPSSODescriptor></md:EntityDescriptor>"#,
            entity = escape(&settings.idp_entity_id),
            sso = escape(&settings.idp_sso_url),
        )
        .parse()
        .map_err(|e| setting(format!("the identity provider's settings: {e}")))?;
        let signing = match &settings.sp_signing {
            None => None,
            Some((key, certificate)) => {
                let key = PKey::private_key_from_pem(key.expose().as_bytes())
                    .map_err(|e| setting(format!("SERVICE_SSO_SP_PRIVATE_KEY: {e}")))?;
                let certificate = certificate_body(certificate);
                decode_x509_cert(&certificate)
                    .map_err(|e| setting(format!("SERVICE_SSO_SP_CERTIFICATE: {e}")))?;
                Some((key, certificate))
            }
        };
        let duration = |d: std::time::Duration| {
            chrono::Duration::from_std(d).unwrap_or(chrono::Duration::seconds(60))
        };
        let sp = ServiceProviderBuilder::default()
            .entity_id(entity_id.to_owned())
            .acs_url(settings.acs_url.clone())
            .slo_url(settings.slo_url.clone())
            .idp_metadata(idp_metadata)
            .authn_name_id_format(EMAIL_FORMAT.to_owned())
            .allow_idp_initiated(false)
            .max_issue_delay(duration(settings.max_age))
            .max_clock_skew(duration(settings.clock_skew))
            // SHA-1 signatures are forgeable in practice; SHA-2 only.
            .allowed_signature_algorithms(vec![
                AllowedSignatureAlgorithm::RsaSha256,
                AllowedSignatureAlgorithm::RsaSha384,
                AllowedSignatureAlgorithm::RsaSha512,
                AllowedSignatureAlgorithm::EcdsaSha256,
                AllowedSignatureAlgorithm::EcdsaSha384,
                AllowedSignatureAlgorithm::EcdsaSha512,
            ])
            .build()
            .map_err(setting)?;
        Ok(Self {
            sp,
            idp_key,
            settings: settings.clone(),
            entity_id: entity_id.to_owned(),
            signing,
        })
    }

    pub fn settings(&self) -> &SamlSettings {
        &self.settings
    }

    /// Our service provider metadata (§5.4's values).
    pub fn metadata(&self) -> String {
        let key = self.signing.as_ref().map_or_else(String::new, |(_, certificate)| {
            format!(
                r#"<md:KeyDescriptor use="signing"><ds:KeyInfo xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:X509Data><ds:X509Certificate>{certificate}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>"#
            )
        });
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="{entity}"><md:SPSSODescriptor AuthnRequestsSigned="{signed}" WantAssertionsSigned="true" protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">{key}<md:SingleLogoutService Binding="{REDIRECT_BINDING}" Location="{slo}"/><md:NameIDFormat>{EMAIL_FORMAT}</md:NameIDFormat><md:AssertionConsumerService Binding="{POST_BINDING}" Location="{acs}" index="0" isDefault="true"/></md:SPSSODescriptor></md:EntityDescriptor>
"#,
            entity = escape(&self.entity_id),
            signed = self.signing.is_some(),
            slo = escape(&self.settings.slo_url),
            acs = escape(&self.settings.acs_url),
        )
    }

    /// The provider's address for a sign-in request `request_id`, carrying
    /// `relay_state` (the flow's state token); signed when we hold a key.
    pub fn authorize(&self, relay_state: &str, request_id: &str) -> Result<String, SsoError> {
        let mut request = self
            .sp
            .make_authentication_request(&self.settings.idp_sso_url)
            .map_err(|e| setting(format!("sign-in request: {e}")))?;
        request.id = request_id.to_owned();
        let url = match &self.signing {
            Some((key, _)) => request.signed_redirect(relay_state, key),
            None => request.redirect(relay_state),
        }
        .map_err(|e| setting(format!("sign-in request: {e}")))?;
        url.map(|url| url.to_string())
            .ok_or_else(|| setting("the sign-in request has no destination"))
    }

    /// The identity a posted `SAMLResponse` (base64) vouches for, if it
    /// answers our request `request_id` and every check holds.
    pub fn consume(&self, encoded: &str, request_id: &str) -> Result<Identity, SsoError> {
        let refused = |why: String| SsoError::Assertion(why);
        let compact: String = encoded.split_ascii_whitespace().collect();
        let bytes = STANDARD
            .decode(compact)
            .map_err(|_| refused("SAMLResponse is not base64".to_owned()))?;
        let xml = String::from_utf8(bytes)
            .map_err(|_| refused("SAMLResponse is not UTF-8".to_owned()))?;
        inspect(&xml).map_err(|e| refused(e.to_string()))?;
        // samael's errors are not Send: turned into text here, before any await.
        let assertion = self
            .sp
            .parse_xml_response_with_mode(&xml, Some(&[request_id]), ReduceMode::PreDigest)
            .map_err(|e| match e {
                samael::service_provider::Error::FailedToValidateSignature => refused(
                    "a signature does not verify with the identity provider's certificate"
                        .to_owned(),
                ),
                other => refused(other.to_string()),
            })?;
        self.identity(assertion)
    }

    /// The checks samael leaves to us, then what the assertion says.
    fn identity(&self, assertion: Assertion) -> Result<Identity, SsoError> {
        let refused = |why: &str| SsoError::Assertion(why.to_owned());
        let now = Utc::now();
        let skew = chrono::Duration::from_std(self.settings.clock_skew).unwrap_or_default();
        let max_age = chrono::Duration::from_std(self.settings.max_age).unwrap_or_default();
        if assertion.issue_instant > now + skew {
            return Err(refused("the assertion was issued in the future"));
        }
        // samael checks the audience only when one is named; an assertion
        // for anyone is an assertion for no one.
        let ours = assertion
            .conditions
            .as_ref()
            .and_then(|c| c.audience_restrictions.as_ref())
            .is_some_and(|restrictions| {
                !restrictions.is_empty()
                    && restrictions
                        .iter()
                        .all(|r| r.audience.iter().any(|a| a == &self.entity_id))
            });
        if !ours {
            return Err(refused("the assertion is not restricted to this service"));
        }
        let name_id = assertion
            .subject
            .as_ref()
            .and_then(|subject| subject.name_id.as_ref())
            .map(|name_id| name_id.value.trim().to_owned())
            .filter(|value| !value.is_empty())
            .ok_or_else(|| refused("the assertion names no subject"))?;
        let mut claims = Map::new();
        for attribute in assertion
            .attribute_statements
            .iter()
            .flatten()
            .flat_map(|statement| &statement.attributes)
        {
            let values: Vec<Value> = attribute
                .values
                .iter()
                .filter_map(|value| value.value.clone().map(Value::String))
                .collect();
            for name in [&attribute.name, &attribute.friendly_name]
                .into_iter()
                .flatten()
            {
                claims.insert(name.clone(), Value::Array(values.clone()));
            }
        }
        let first = |names: &[&str]| {
            names.iter().find_map(|name| {
                claims
                    .get(*name)
                    .and_then(|values| values.get(0))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
        };
        // The NameID is the address (format emailAddress); an attribute
        // stands in when the provider sends an opaque NameID.
        let email = if name_id.contains('@') {
            Some(name_id.clone())
        } else {
            first(&["email", "mail", "emailAddress"])
        };
        let name = first(&["name", "displayName", "cn"]);
        Ok(Identity {
            subject: name_id,
            email,
            name,
            claims: Value::Object(claims),
            usable_until: assertion.issue_instant.max(now) + max_age + skew,
            assertion_id: assertion.id,
        })
    }

    /// The provider's single logout address for `name_id`, with a logout
    /// request (signed when we hold a key); `None` when it has none.
    pub fn logout_url(&self, name_id: &str, request_id: &str) -> Result<Option<String>, SsoError> {
        let Some(slo) = &self.settings.idp_slo_url else {
            return Ok(None);
        };
        let request = format!(
            r#"<samlp:LogoutRequest xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="{id}" Version="2.0" IssueInstant="{now}" Destination="{slo}"><saml:Issuer>{entity}</saml:Issuer><saml:NameID Format="{EMAIL_FORMAT}">{name_id}</saml:NameID></samlp:LogoutRequest>"#,
            id = escape(request_id),
            now = now_text(),
            slo = escape(slo),
            entity = escape(&self.entity_id),
            name_id = escape(name_id),
        );
        self.redirect(slo, "SAMLRequest", &request, None).map(Some)
    }

    /// The logout request of a redirect binding's `raw_query` (as received,
    /// percent-encoded), if the provider signed it: an unsigned request
    /// could sign anyone out.
    pub fn logout_request(&self, raw_query: &str) -> Result<LogoutAsked, SsoError> {
        let refused = |why: &str| SsoError::Logout(why.to_owned());
        let raw = |name: &str| {
            raw_query
                .split('&')
                .find(|pair| pair.split('=').next() == Some(name))
        };
        let decoded = |name: &str| {
            raw(name).and_then(|pair| {
                let value = pair.split_once('=').map_or("", |(_, value)| value);
                url::form_urlencoded::parse(format!("v={value}").as_bytes())
                    .next()
                    .map(|(_, value)| value.into_owned())
            })
        };
        let (Some(request), Some(sig_alg), Some(signature)) =
            (raw("SAMLRequest"), decoded("SigAlg"), decoded("Signature"))
        else {
            return Err(refused("unsigned"));
        };
        // SAML bindings §3.4.4.1: the parameters as sent, in this order.
        let signed: Vec<&str> = [Some(request), raw("RelayState"), raw("SigAlg")]
            .into_iter()
            .flatten()
            .collect();
        let digest = match sig_alg.as_str() {
            "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256" => MessageDigest::sha256(),
            "http://www.w3.org/2001/04/xmldsig-more#rsa-sha384" => MessageDigest::sha384(),
            "http://www.w3.org/2001/04/xmldsig-more#rsa-sha512" => MessageDigest::sha512(),
            _ => return Err(refused("the signature algorithm is not RSA with SHA-2")),
        };
        let signature = STANDARD
            .decode(signature.split_ascii_whitespace().collect::<String>())
            .map_err(|_| refused("the signature is not base64"))?;
        let verified = openssl::sign::Verifier::new(digest, &self.idp_key)
            .and_then(|mut verifier| {
                verifier.update(signed.join("&").as_bytes())?;
                verifier.verify(&signature)
            })
            .unwrap_or(false);
        if !verified {
            return Err(refused(
                "the signature does not verify with the identity provider's certificate",
            ));
        }
        let xml = inflate(
            &decoded("SAMLRequest").unwrap_or_default(),
            self.settings.max_message_bytes,
        )
        .ok_or_else(|| refused("SAMLRequest is not deflated base64"))?;
        no_document_type(&xml).map_err(|e| refused(&e.to_string()))?;
        let request = LogoutRequest::from_str(&xml).map_err(|_| refused("not a LogoutRequest"))?;
        let issuer = request.issuer.as_ref().and_then(|i| i.value.as_deref());
        if issuer != Some(self.settings.idp_entity_id.as_str()) {
            return Err(refused("another issuer"));
        }
        if let Some(issued) = request.issue_instant {
            let window =
                chrono::Duration::from_std(self.settings.max_age + self.settings.clock_skew)
                    .unwrap_or_default();
            if Utc::now() - issued > window {
                return Err(refused("too old"));
            }
        }
        let name_id = request
            .name_id
            .map(|name_id| name_id.value.trim().to_owned())
            .filter(|value| !value.is_empty())
            .ok_or_else(|| refused("no NameID"))?;
        Ok(LogoutAsked {
            name_id,
            request_id: request.id.ok_or_else(|| refused("no ID"))?,
            relay_state: decoded("RelayState"),
        })
    }

    /// Our answer to the provider's logout request `in_response_to`, at its
    /// single logout address (`None` when it has none).
    pub fn logout_response_url(
        &self,
        in_response_to: &str,
        relay_state: Option<&str>,
        response_id: &str,
    ) -> Result<Option<String>, SsoError> {
        let Some(slo) = &self.settings.idp_slo_url else {
            return Ok(None);
        };
        let response = format!(
            r#"<samlp:LogoutResponse xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="{id}" Version="2.0" IssueInstant="{now}" Destination="{slo}" InResponseTo="{answer}"><saml:Issuer>{entity}</saml:Issuer><samlp:Status><samlp:StatusCode Value="urn:oasis:names:tc:SAML:2.0:status:Success"/></samlp:Status></samlp:LogoutResponse>"#,
            id = escape(response_id),
            now = now_text(),
            slo = escape(slo),
            answer = escape(in_response_to),
            entity = escape(&self.entity_id),
        );
        self.redirect(slo, "SAMLResponse", &response, relay_state)
            .map(Some)
    }

    /// `to` with `message` deflated into `parameter` (redirect binding),
    /// signed when we hold a key.
    fn redirect(
        &self,
        to: &str,
        parameter: &str,
        message: &str,
        relay_state: Option<&str>,
    ) -> Result<String, SsoError> {
        let mut deflated = Vec::new();
        {
            let mut encoder =
                flate2::write::DeflateEncoder::new(&mut deflated, flate2::Compression::default());
            encoder
                .write_all(message.as_bytes())
                .and_then(|()| encoder.try_finish())
                .map_err(|e| setting(format!("{parameter}: {e}")))?;
        }
        let mut url = url::Url::parse(to).map_err(setting)?;
        url.query_pairs_mut()
            .append_pair(parameter, &STANDARD.encode(deflated));
        if let Some(relay_state) = relay_state {
            url.query_pairs_mut().append_pair("RelayState", relay_state);
        }
        if let Some((key, _)) = &self.signing {
            url = sign_url(url, key).map_err(|e| setting(format!("{parameter}: {e}")))?;
        }
        Ok(url.to_string())
    }
}

fn now_text() -> String {
    Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The text of a deflated, base64 redirect-binding message, if it inflates
/// to at most `limit` bytes.
fn inflate(encoded: &str, limit: u64) -> Option<String> {
    let compact: String = encoded.split_ascii_whitespace().collect();
    let bytes = STANDARD.decode(compact).ok()?;
    let mut text = String::new();
    flate2::read::DeflateDecoder::new(bytes.as_slice())
        .take(limit.saturating_add(1))
        .read_to_string(&mut text)
        .ok()?;
    (text.len() as u64 <= limit).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deflated(text: &str) -> String {
        let mut out = Vec::new();
        let mut encoder = flate2::write::DeflateEncoder::new(&mut out, flate2::Compression::best());
        encoder.write_all(text.as_bytes()).unwrap();
        encoder.finish().unwrap();
        STANDARD.encode(out)
    }

    #[test]
    fn a_message_inflates_only_up_to_the_limit() {
        let message = "x".repeat(2_000);
        let encoded = deflated(&message);
        assert!(encoded.len() < 100, "it compresses well");
        assert_eq!(inflate(&encoded, 2_000).as_deref(), Some(message.as_str()));
        assert_eq!(inflate(&encoded, 1_999), None);
        assert_eq!(inflate("not base64!", 2_000), None);
    }
}
