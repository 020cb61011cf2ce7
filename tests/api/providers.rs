//! Debates against a scripted fake AI provider (written by a helper).
