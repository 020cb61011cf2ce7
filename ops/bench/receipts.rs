//! Decision receipts verified per second offline: the whole check of
//! `agon receipt verify` (canonical form, event hashes, seal signatures,
//! inclusion proofs, the fold of the events and the ODR view, the ODR
//! signature) on the golden sample receipt (nine events, two seals) with its
//! public key, on one thread. `cargo bench --bench receipts`, or
//! `ops/bench/run.sh receipts`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use agon::receipts::check::verify;

const ROUNDS: usize = 3;
const PER_ROUND: Duration = Duration::from_secs(3);

fn main() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/event-schemas/receipts/");
    let receipt = std::fs::read(format!("{root}Receipt.v1.sample.json")).unwrap();
    let key = std::fs::read_to_string(format!("{root}public-key.sample.txt")).unwrap();
    let key: [u8; 32] = hex::decode(key.trim()).unwrap().try_into().unwrap();
    assert!(
        verify(&receipt, &key).valid,
        "the sample receipt must verify"
    );
    let mut best = 0.0_f64;
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let mut verified = 0u64;
        while start.elapsed() < PER_ROUND {
            assert!(verify(&receipt, &key).valid);
            verified += 1;
        }
        best = best.max(verified as f64 / start.elapsed().as_secs_f64());
    }
    println!(
        "receipts verified offline: {best:.0}/s (best of {ROUNDS} rounds, {} bytes each)",
        receipt.len()
    );
}
