//! `/account/mfa/…`: turning the second factor on (a new secret as a QR
//! code and as text, confirmed with a first code; the backup codes shown
//! once) and off (with a current or backup code), from the account's
//! profile page ([`super::account`]).

use askama::Template;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::account::{Part, done, refusal, refused};
use super::{Chrome, Fields, render};
use crate::auth::{Auth, Caller};
use crate::web::error::PageError;
use crate::web::session::SignedIn;

#[derive(Template)]
#[template(path = "account_mfa.html")]
struct MfaPage {
    chrome: Chrome,
    /// The QR code of the otpauth URI, an SVG element (no script, no style).
    qr_svg: Option<String>,
    secret: Option<String>,
    error: Option<String>,
    backup_codes: Vec<String>,
}

/// The QR code of `uri` as an inline SVG element.
fn qr_svg(uri: &str) -> Result<String, PageError> {
    let code = qrcode::QrCode::new(uri.as_bytes()).map_err(PageError::internal)?;
    let svg = code
        .render::<qrcode::render::svg::Color<'_>>()
        .min_dimensions(200, 200)
        .build();
    let svg = svg.split_once("?>").map_or(svg.as_str(), |(_, rest)| rest);
    Ok(svg.replacen(
        "<svg ",
        r#"<svg role="img" aria-label="QR code of the authenticator secret" "#,
        1,
    ))
}

fn mfa_page(caller: &Caller) -> MfaPage {
    MfaPage {
        chrome: Chrome::for_caller(Some(caller), "account"),
        qr_svg: None,
        secret: None,
        error: None,
        backup_codes: Vec::new(),
    }
}

/// `POST /account/mfa/setup`: a new secret, as a QR code and as text.
pub async fn mfa_setup(
    State(auth): State<Auth>,
    SignedIn(caller): SignedIn,
) -> Result<Response, PageError> {
    match auth.begin_mfa(&caller.user_id).await {
        Ok(setup) => render(&MfaPage {
            qr_svg: Some(qr_svg(&setup.otpauth_uri)?),
            secret: Some(setup.secret),
            ..mfa_page(&caller)
        }),
        Err(e) => refusal(&auth, &caller, Part::Profile, e).await,
    }
}

/// `POST /account/mfa/enable`: the first code; the backup codes once.
pub async fn mfa_enable(
    State(auth): State<Auth>,
    SignedIn(caller): SignedIn,
    body: Bytes,
) -> Result<Response, PageError> {
    let fields = Fields::parse(&body);
    match auth
        .enable_mfa(&caller, fields.get("code").unwrap_or_default())
        .await
    {
        Ok(backup_codes) => render(&MfaPage {
            backup_codes,
            ..mfa_page(&caller)
        }),
        Err(e) => {
            let page = MfaPage {
                error: Some(refused(e)?),
                ..mfa_page(&caller)
            };
            Ok((StatusCode::UNPROCESSABLE_ENTITY, render(&page)?).into_response())
        }
    }
}

/// `POST /account/mfa/disable`: needs a current code or a backup code.
pub async fn mfa_disable(
    State(auth): State<Auth>,
    SignedIn(caller): SignedIn,
    body: Bytes,
) -> Result<Response, PageError> {
    let fields = Fields::parse(&body);
    match auth
        .disable_mfa(&caller, fields.get("code").unwrap_or_default())
        .await
    {
        Ok(()) => Ok(done("mfa-off")),
        Err(e) => refusal(&auth, &caller, Part::Profile, e).await,
    }
}
