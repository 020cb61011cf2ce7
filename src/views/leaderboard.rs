//! A leaderboard row as both faces show it: the API's rankings and the
//! leaderboard page.

use agon_projections::leaderboard::LeaderboardView;
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Debug, Serialize, ToSchema)]
pub struct Ranked {
    pub rank: usize,
    pub name: String,
    /// Rounded to one decimal place.
    pub elo: f64,
    pub debates: u64,
    pub wins: u64,
    pub losses: u64,
    pub draws: u64,
    /// Debates in which the agent failed.
    pub failures: u64,
}

/// Every agent with at least `min_debates`, best first, ranked from 1.
pub fn ranked(board: &LeaderboardView, min_debates: u64) -> Vec<Ranked> {
    board
        .ranked()
        .into_iter()
        .filter(|(_, r)| r.debates >= min_debates)
        .enumerate()
        .map(|(i, (name, r))| Ranked {
            rank: i + 1,
            name: name.clone(),
            elo: (r.elo * 10.0).round() / 10.0,
            debates: r.debates,
            wins: r.wins,
            losses: r.losses,
            draws: r.draws,
            failures: r.failures,
        })
        .collect()
}
