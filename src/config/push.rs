//! Settings of the WebSocket push (`/ws`): heartbeat, message size, the
//! per-client send buffer, connection caps per tier and ticket lifetime.

use std::time::Duration;

use super::values::{ConfigError, Vars};

/// What `SERVICE_WS_*` variables say.
#[derive(Debug, Clone)]
pub struct PushSettings {
    /// `SERVICE_WS_HEARTBEAT`: seconds between server pings; a client that
    /// has not answered the previous ping when the next is due is closed.
    /// Default 30.
    pub heartbeat: Duration,
    /// `SERVICE_WS_MAX_MESSAGE_SIZE`: the largest message a client may send,
    /// in bytes. Default 65536.
    pub max_message_size: usize,
    /// `SERVICE_WS_SEND_BUFFER`: frames queued for one client before it is
    /// closed as a slow consumer (close code 4008). Default 256.
    pub send_buffer: usize,
    /// `SERVICE_WS_READ_BUFFER_BYTES`: the buffer each socket reads into,
    /// allocated at the upgrade (larger messages still arrive whole; it
    /// grows for them). Default 2048: an idle socket then costs a few KiB
    /// rather than the WebSocket library's 128 KiB, and clients send small
    /// messages.
    pub read_buffer: usize,
    /// `SERVICE_WS_MAX_CONNECTIONS_FREE` (1), `_PRO` (5, also the starter
    /// tier) and `_ENTERPRISE` (20): open sockets per user (spec §8.1).
    pub max_connections: ConnectionCaps,
    /// `SERVICE_WS_TICKET_TTL_SECONDS`: how long a ticket from
    /// `POST /api/ws/ticket` may wait to be used. Default 30.
    pub ticket_ttl: Duration,
}

/// Open sockets allowed per user, by tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionCaps {
    pub free: u32,
    pub pro: u32,
    pub enterprise: u32,
}

impl PushSettings {
    pub(super) fn read<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Self, ConfigError> {
        Ok(Self {
            heartbeat: Duration::from_secs(vars.within("SERVICE_WS_HEARTBEAT", 1, 3_600, 30)?),
            max_message_size: usize::try_from(vars.within(
                "SERVICE_WS_MAX_MESSAGE_SIZE",
                256,
                16 << 20,
                65_536,
            )?)
            .unwrap_or(65_536),
            send_buffer: usize::try_from(vars.within("SERVICE_WS_SEND_BUFFER", 1, 1 << 20, 256)?)
                .unwrap_or(256),
            read_buffer: usize::try_from(vars.within(
                "SERVICE_WS_READ_BUFFER_BYTES",
                1_024,
                1 << 20,
                2_048,
            )?)
            .unwrap_or(2_048),
            max_connections: ConnectionCaps {
                free: vars.within_u32("SERVICE_WS_MAX_CONNECTIONS_FREE", 1, 100_000, 1)?,
                pro: vars.within_u32("SERVICE_WS_MAX_CONNECTIONS_PRO", 1, 100_000, 5)?,
                enterprise: vars.within_u32(
                    "SERVICE_WS_MAX_CONNECTIONS_ENTERPRISE",
                    1,
                    100_000,
                    20,
                )?,
            },
            ticket_ttl: Duration::from_secs(vars.within(
                "SERVICE_WS_TICKET_TTL_SECONDS",
                1,
                600,
                30,
            )?),
        })
    }
}
