//! Accounts end to end, by feature: API keys by name ([`api_keys`]).
//! Sign-in, sessions and the singular key's first tests live in `auth`.

mod api_keys;
