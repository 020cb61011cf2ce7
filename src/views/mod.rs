//! The public JSON forms of domain values, shared by every face that shows
//! them: the HTTP API answers with them and the CLI prints them (`agon
//! debate --json` prints what `GET /api/debates/{id}` would). They depend
//! on domain types only, never on a face.

pub mod debates;
pub mod gallery;
pub mod leaderboard;
pub mod report;

/// The Content-Security-Policy of every HTML page either face serves: only
/// the service's own scripts, styles and connections, no inline code, no
/// framing (the web UI's pages and the API's own pages alike).
pub const PAGE_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";
/// The policy of the gallery's embed card, the one page any site may
/// frame (`PAGE_POLICY` but for `frame-ancestors`).
pub const EMBED_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors *";

/// The web UI's session cookie (the access token), which `/ws` also takes
/// from the service's own pages.
pub const SESSION_COOKIE: &str = "__Host-agon_session";
