//! Debate endpoints end to end (written by a helper).
