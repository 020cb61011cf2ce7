//! A bounded ring of the latest error responses, served by
//! `GET /api/system/errors`: enough to see what just went wrong without a
//! log search, and bounded so a flood of bad requests costs fixed memory.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::http::Method;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::error::ErrorReport;

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RecordedError {
    pub timestamp: DateTime<Utc>,
    pub trace_id: String,
    pub method: String,
    pub path: String,
    pub status: u16,
    pub code: String,
    pub message: String,
}

impl RecordedError {
    pub fn new(trace_id: &str, method: &Method, path: &str, report: &ErrorReport) -> Self {
        Self {
            timestamp: Utc::now(),
            trace_id: trace_id.to_owned(),
            method: method.to_string(),
            // Paths are caller-chosen; keep the ring's memory bounded.
            path: path.chars().take(256).collect(),
            status: report.status.as_u16(),
            code: report.code.to_owned(),
            message: report.message.chars().take(512).collect(),
        }
    }
}

/// The ring, holding at most `SERVICE_RECENT_ERRORS` errors.
#[derive(Debug, Clone)]
pub struct RecentErrors {
    ring: Arc<Mutex<VecDeque<RecordedError>>>,
    capacity: usize,
}

impl RecentErrors {
    pub fn new(capacity: usize) -> Self {
        Self {
            ring: Arc::default(),
            capacity: capacity.max(1),
        }
    }

    /// How many errors are kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn record(&self, error: RecordedError) {
        let mut ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        while ring.len() >= self.capacity {
            ring.pop_front();
        }
        ring.push_back(error);
    }

    /// The newest `limit` errors, newest first, and how many are held.
    pub fn latest(&self, limit: usize) -> (Vec<RecordedError>, usize) {
        let ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        (ring.iter().rev().take(limit).cloned().collect(), ring.len())
    }
}
