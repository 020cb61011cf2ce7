//! Placeholder replaced by the sign-up tests.
