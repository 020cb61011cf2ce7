//! The public JSON forms of domain values, shared by every face that shows
//! them: the HTTP API answers with them and the CLI prints them (`agon
//! debate --json` prints what `GET /api/debates/{id}` would). They depend
//! on domain types only, never on a face.

pub mod debates;
