//! A list served under two keys (its own name for existing clients, and
//! `items` for paginating ones such as the upstream SDK's `list_all`)
//! without copying it: clones share the one list.

use std::sync::Arc;

use serde::{Serialize, Serializer};

/// The shared list; it serializes as the list itself.
#[derive(Debug)]
pub struct Shared<T>(Arc<Vec<T>>);

impl<T> Shared<T> {
    pub fn new(items: Vec<T>) -> Self {
        Self(Arc::new(items))
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T: Serialize> Serialize for Shared<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}
