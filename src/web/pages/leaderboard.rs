//! `/leaderboard`: the agents by ELO, the same ranking as
//! `GET /api/leaderboard` (the `leaderboard` projection through
//! `Debates::leaderboard`, ELO rounded to one decimal as there).

use askama::Template;
use axum::extract::State;
use axum::response::Response;

use super::{Chrome, render};
use crate::debates::Debates;
use crate::views::leaderboard::{self, Ranked};
use crate::web::error::PageError;
use crate::web::session::SignedIn;

#[derive(Template)]
#[template(path = "leaderboard.html")]
struct LeaderboardPage {
    chrome: Chrome,
    rows: Vec<Ranked>,
}

/// `GET /leaderboard`.
pub async fn show(
    State(debates): State<Debates>,
    SignedIn(caller): SignedIn,
) -> Result<Response, PageError> {
    let view = debates.leaderboard().await.map_err(PageError::internal)?;
    let rows = leaderboard::ranked(&view, 0);
    render(&LeaderboardPage {
        chrome: Chrome::for_caller(Some(&caller), "leaderboard"),
        rows,
    })
}
