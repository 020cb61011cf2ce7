//! A scripted fake AI provider on loopback (written by a helper).
