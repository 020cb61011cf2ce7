//! The UI's static files (htmx, its WebSocket extension, the one style
//! sheet), compiled into the binary and served under names that carry a
//! hash of their bytes, so that a browser may keep them for a year: a
//! changed file is a new name.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::error::PageError;

/// One file as it is served.
#[derive(Debug)]
pub struct Asset {
    /// `htmx.0123abcd.js`: the name under `/assets/`.
    pub file: String,
    /// `/assets/htmx.0123abcd.js`.
    pub url: String,
    pub bytes: &'static [u8],
    pub content_type: &'static str,
}

impl Asset {
    fn new(stem: &str, ext: &str, bytes: &'static [u8], content_type: &'static str) -> Self {
        let hash = hex::encode(Sha256::digest(bytes));
        let file = format!("{stem}.{}.{ext}", &hash[..8]);
        Self {
            url: format!("/assets/{file}"),
            file,
            bytes,
            content_type,
        }
    }
}

/// The files, by what they are.
#[derive(Debug)]
pub struct Assets {
    pub htmx: Asset,
    pub htmx_ws: Asset,
    pub css: Asset,
}

pub static ASSETS: LazyLock<Assets> = LazyLock::new(|| Assets {
    htmx: Asset::new(
        "htmx",
        "js",
        include_bytes!("../../assets/ui/htmx.min.js"),
        "text/javascript; charset=utf-8",
    ),
    htmx_ws: Asset::new(
        "hx-ws",
        "js",
        include_bytes!("../../assets/ui/hx-ws.min.js"),
        "text/javascript; charset=utf-8",
    ),
    css: Asset::new(
        "agon",
        "css",
        include_bytes!("../../assets/ui/agon.css"),
        "text/css; charset=utf-8",
    ),
});

/// `GET /assets/{file}`: a file by its hashed name, cacheable for good.
pub async fn serve(Path(file): Path<String>) -> Result<Response, PageError> {
    let assets = &*ASSETS;
    let asset = [&assets.htmx, &assets.htmx_ws, &assets.css]
        .into_iter()
        .find(|a| a.file == file)
        .ok_or(PageError::NotFound)?;
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            ),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=31536000, immutable"),
            ),
        ],
        asset.bytes,
    )
        .into_response())
}
