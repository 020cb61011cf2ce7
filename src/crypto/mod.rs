//! Key material and cryptographic helpers used by the service.

pub mod signing;
