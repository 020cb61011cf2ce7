//! The Open Decision Receipt (ODR) v0.2 view of a receipt: the document the
//! independent `aragora-verify` 0.2.0 checks, and its v0.2 signature.
//!
//! ODR's schema is closed, so only members it defines appear here; what it
//! cannot hold (weights, per-vote reasons, costs, proofs, seals) stays in our
//! part of the receipt. The signed message is `JCS({"odr_digest",
//! "odr_signature_input": "0.2", "protected"})`, an object no seal body can
//! equal (a seal body has none of these members).

use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::facts::{Facts, Participant};
use crate::crypto::signing::{SealKey, verify_signature};
use crate::store::canonical;

pub const ODR_VERSION: &str = "0.2";
pub const ODR_PROFILE: &str = "https://aragora.ai/specs/open-decision-receipt/v0.2";
/// The `issuer` our signatures commit to.
pub const ISSUER: &str = "agon";
/// `source.schema` of our documents.
pub const SOURCE_SCHEMA: &str = "agon-decision-receipt";
pub const SOURCE_SCHEMA_VERSION: &str = "1";
/// Family of a participant whose model the events do not name.
pub const UNDISCLOSED: &str = "undisclosed";

/// What the ODR view is made of besides the facts.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    pub receipt_id: &'a str,
    pub issued_at: &'a str,
    /// Hex chain hash of the debate's last event.
    pub artifact_hash: &'a str,
}

/// The model family of a participant: the vendor of the model, never the
/// router that carried the call (OpenRouter names the vendor before `/`).
pub fn model_family(participant: &Participant) -> String {
    let (Some(provider), Some(model)) = (&participant.provider, &participant.model) else {
        return UNDISCLOSED.to_owned();
    };
    let vendor = match provider.as_str() {
        "openrouter" => match model.split_once('/') {
            Some((vendor, _)) if !vendor.is_empty() => vendor,
            _ => return UNDISCLOSED.to_owned(),
        },
        other => other,
    };
    match vendor.to_ascii_lowercase().as_str() {
        "anthropic" => "claude".to_owned(),
        "openai" => "openai".to_owned(),
        "google" | "gemini" => "gemini".to_owned(),
        "mistral" | "mistralai" => "mistral".to_owned(),
        "xai" | "x-ai" => "grok".to_owned(),
        "meta-llama" => "llama".to_owned(),
        other => other.to_owned(),
    }
}

fn absent(reason: &str) -> Value {
    json!({"status": "absent", "reason": reason})
}

/// The unsigned ODR document (`signatures` empty) the facts imply.
pub fn document(facts: &Facts, frame: Frame<'_>) -> Value {
    let family_of = |agent: &str| {
        facts
            .participants
            .iter()
            .find(|p| p.agent == agent)
            .map_or_else(|| UNDISCLOSED.to_owned(), model_family)
    };
    let participants: Vec<Value> = facts
        .participants
        .iter()
        .map(|p| {
            json!({
                "agent": p.agent,
                "model_family": model_family(p),
                "model_id": p.model.clone().unwrap_or_default(),
            })
        })
        .collect();
    let observations: Vec<Value> = facts
        .failures
        .iter()
        .map(|f| {
            json!({
                "kind": if f.code == "timeout" { "timeout" } else { "failure" },
                "family": family_of(&f.agent),
                "detail": format!("{} failed in {} of round {}: {}: {}",
                    f.agent, f.phase, f.round, f.code, f.error),
            })
        })
        .collect();
    let summary = match (&facts.synthesis, &facts.failure_reason) {
        (Some(s), _) if !s.summary.is_empty() => Some(s.summary.clone()),
        (_, Some(reason)) => Some(format!("The debate failed: {reason}")),
        _ => None,
    };
    let reasoning = match summary {
        Some(summary) if observations.is_empty() => {
            json!({"status": "present", "summary": summary})
        }
        Some(summary) => {
            json!({"status": "present", "summary": summary, "observations": observations})
        }
        None => absent("no synthesis was recorded for this debate"),
    };
    let (claim, quorum, confidence) = match &facts.consensus {
        Some(c) => {
            let mut families: Vec<String> = participants
                .iter()
                .filter_map(|p| p["model_family"].as_str())
                .filter(|f| *f != UNDISCLOSED)
                .map(str::to_owned)
                .collect();
            families.sort();
            families.dedup();
            let disclosed = participants
                .iter()
                .all(|p| p["model_family"] != UNDISCLOSED);
            let verdicts: Vec<Value> = c
                .votes
                .iter()
                .map(|ballot| {
                    let model = facts
                        .participants
                        .iter()
                        .find(|p| p.agent == ballot.agent)
                        .and_then(|p| p.model.clone())
                        .unwrap_or_default();
                    json!({
                        "issuer": ballot.agent,
                        "verdict": serde_json::to_value(ballot.choice).unwrap_or(Value::Null),
                        "model_family": family_of(&ballot.agent),
                        "model_id": model,
                    })
                })
                .collect();
            let statement = if c.final_answer.is_empty() {
                absent("the consensus recorded no summary")
            } else {
                json!(c.final_answer)
            };
            (
                json!({"verdict": c.status, "statement": statement}),
                json!({
                    "status": "present",
                    "method": c.mode,
                    "reached": c.reached,
                    "verdicts": verdicts,
                    "supporting_agents": c.supporting_agents,
                    "participants": participants,
                    "independence": {
                        "disclosed": disclosed,
                        "distinct_model_families": families.len(),
                        "model_families": families,
                    },
                    "dissent": {
                        "present": !c.dissenting_agents.is_empty(),
                        "dissenting_agents": c.dissenting_agents,
                        "views": c.consensus.disagreements,
                    },
                }),
                json!({
                    "status": "present",
                    "value": c.confidence.clamp(0.0, 1.0),
                    "scale": "unit_interval",
                    "calibration": absent("the confidence is the votes' arithmetic; it is not calibrated"),
                }),
            )
        }
        None => (
            json!({"verdict": facts.status, "statement": absent("the debate failed before a consensus was computed")}),
            absent("the debate failed before its votes were counted"),
            absent("the debate failed before a consensus was computed"),
        ),
    };
    json!({
        "odr_version": ODR_VERSION,
        "profile": ODR_PROFILE,
        "receipt_id": frame.receipt_id,
        "issued_at": frame.issued_at,
        "subject": {
            "identifier": facts.debate_id,
            "digest": {"status": "present", "alg": "sha-256", "value": frame.artifact_hash},
            "summary": facts.topic,
        },
        "claim": claim,
        "reasoning": reasoning,
        "quorum": quorum,
        "confidence": confidence,
        "cruxes": absent("cruxes are not identified by this service"),
        "attestation": {"disposition": "autonomous"},
        "routing": {"status": "reserved"},
        "source": {
            "system": ISSUER,
            "schema": SOURCE_SCHEMA,
            "schema_version": SOURCE_SCHEMA_VERSION,
            "receipt_id": frame.receipt_id,
            "artifact_hash": frame.artifact_hash,
        },
        "signatures": [],
    })
}

/// Hex `SHA-256(JCS(document without signatures))`: what signatures cover.
pub fn digest(document: &Value) -> String {
    let mut payload = document.clone();
    if let Some(members) = payload.as_object_mut() {
        members.remove("signatures");
    }
    hex::encode(Sha256::digest(canonical::to_vec(&payload)))
}

/// `ed25519-` and the first 16 hex digits of `SHA-256(public key)`.
pub fn key_id(public_key: &[u8]) -> String {
    format!("ed25519-{}", &hex::encode(Sha256::digest(public_key))[..16])
}

/// The bytes a v0.2 signature entry covers.
pub fn signature_message(digest_hex: &str, protected: &Value) -> Vec<u8> {
    canonical::to_vec(&json!({
        "odr_digest": digest_hex,
        "odr_signature_input": ODR_VERSION,
        "protected": protected,
    }))
}

/// The protected members of our signature entry (the entry without `signature`).
fn protected(public_key: &[u8], signed_at: &str) -> Value {
    json!({
        "alg": "Ed25519",
        "key_id": key_id(public_key),
        "issuer": ISSUER,
        "role": "emitter",
        "signed_at": signed_at,
    })
}

/// `document` with our v0.2 signature as its only entry.
pub fn sign(mut document: Value, key: &SealKey, signed_at: &str) -> Value {
    let digest = digest(&document);
    let mut entry = protected(&key.public_key(), signed_at);
    let signature = key.sign(&signature_message(&digest, &entry));
    entry["signature"] = json!(base64::engine::general_purpose::STANDARD.encode(signature));
    document["signatures"] = json!([entry]);
    document
}

/// Why the signature of an ODR view does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OdrSignatureError {
    #[error("the ODR view must carry exactly one signature entry")]
    Count,
    #[error("the signature entry's key_id is not the public key's ({0})")]
    KeyId(String),
    #[error("the signature entry's members are not the ones this service signs")]
    Members,
    #[error("the Ed25519 signature does not verify over the v0.2 signed message")]
    Invalid,
}

/// Checks our one v0.2 signature of `document` with `public_key`.
pub fn verify(document: &Value, public_key: &[u8]) -> Result<(), OdrSignatureError> {
    let entries = document["signatures"]
        .as_array()
        .ok_or(OdrSignatureError::Count)?;
    let [entry] = entries.as_slice() else {
        return Err(OdrSignatureError::Count);
    };
    let mut protected = entry.clone();
    let signature = protected
        .as_object_mut()
        .and_then(|m| m.remove("signature"))
        .and_then(|s| s.as_str().map(str::to_owned))
        .ok_or(OdrSignatureError::Members)?;
    let expected_id = key_id(public_key);
    if protected["key_id"] != json!(expected_id) {
        return Err(OdrSignatureError::KeyId(expected_id));
    }
    let signed_at = protected["signed_at"].as_str().unwrap_or_default();
    if protected != self::protected(public_key, signed_at) {
        return Err(OdrSignatureError::Members);
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(signature)
        .map_err(|_| OdrSignatureError::Invalid)?;
    let message = signature_message(&digest(document), &protected);
    if verify_signature(public_key, &message, &raw) {
        Ok(())
    } else {
        Err(OdrSignatureError::Invalid)
    }
}
