//! Which of a debate's rounds its page shows: all of them, or, past
//! `SERVICE_UI_DEBATE_CONTRIBUTIONS`, pages of whole rounds (pure: the
//! page in [`super::live`] reads the debate and the address).

/// Which rounds a page shows. A debate longer than
/// `SERVICE_UI_DEBATE_CONTRIBUTIONS` is cut into pages of whole rounds,
/// each a link (`?round=`), so that its page parses and lays out a few
/// rounds, not hundreds of contributions; without a choice the page shows
/// the current round's page and, while the debate runs, every round after
/// it (their empty slots cost little), so that a watching page follows the
/// debate into rounds it did not have when it loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundPages {
    pub first: u32,
    pub last: u32,
    pub of: u32,
    /// Every page's first and last round, when there is more than one.
    pub links: Vec<(u32, u32)>,
}

impl RoundPages {
    /// `per_round`: the contributions a round holds (agents times phases);
    /// `current`: the highest round with a message (0: none yet).
    pub fn choose(
        rounds: u32,
        per_round: u32,
        limit: u32,
        current: u32,
        running: bool,
        asked: Option<u32>,
    ) -> Self {
        let size = (limit / per_round.max(1)).max(1);
        if rounds <= size {
            return Self {
                first: 1,
                last: rounds,
                of: rounds,
                links: Vec::new(),
            };
        }
        let start = |round: u32| (round - 1) / size * size + 1;
        let end = |first: u32| (first + size - 1).min(rounds);
        let (first, last) = match asked.filter(|n| (1..=rounds).contains(n)) {
            Some(n) => (start(n), end(start(n))),
            None => {
                let first = start(current.clamp(1, rounds));
                (first, if running { rounds } else { end(first) })
            }
        };
        Self {
            first,
            last,
            of: rounds,
            links: (1..=rounds)
                .step_by(size as usize)
                .map(|s| (s, end(s)))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_debate_is_one_page_and_a_long_one_a_few_whole_rounds_a_page() {
        // 12 rounds of 9 contributions, 50 to a page: 5 rounds a page.
        let all = RoundPages::choose(5, 9, 50, 3, true, None);
        assert_eq!((all.first, all.last, all.links.len()), (1, 5, 0));
        let ended = RoundPages::choose(12, 9, 50, 12, false, None);
        assert_eq!((ended.first, ended.last), (11, 12));
        assert_eq!(ended.links, vec![(1, 5), (6, 10), (11, 12)]);
        let asked = RoundPages::choose(12, 9, 50, 12, false, Some(7));
        assert_eq!((asked.first, asked.last), (6, 10));
        // Out of range: the current page, as if nothing was asked.
        assert_eq!(RoundPages::choose(12, 9, 50, 12, false, Some(13)), ended);
        // Running: the current round's page and every round after it.
        let running = RoundPages::choose(12, 9, 50, 7, true, None);
        assert_eq!((running.first, running.last), (6, 12));
        let fresh = RoundPages::choose(12, 9, 50, 0, true, None);
        assert_eq!((fresh.first, fresh.last), (1, 12));
        // A round larger than the limit is still shown whole, one a page.
        let big = RoundPages::choose(3, 80, 50, 3, false, Some(2));
        assert_eq!((big.first, big.last, big.links.len()), (2, 2, 3));
    }
}
