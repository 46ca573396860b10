//! Timing for the bench binaries (`harness = false`): each case is run in
//! rounds of a fixed number of iterations until a time budget is spent, and
//! the time of one iteration is reported as the median over rounds, with the
//! fastest and slowest round beside it, so a noisy machine shows as spread
//! rather than as a wrong figure.

use std::time::{Duration, Instant};

/// How long one case is timed, after a warm-up of a tenth of it.
pub const BUDGET: Duration = Duration::from_secs(2);
/// Rounds a case is cut into, at least.
const ROUNDS: usize = 20;

/// Seconds one iteration took: the median over rounds, the fastest and the
/// slowest round, and the iterations timed in all.
pub struct Timing {
    pub median: f64,
    pub fastest: f64,
    pub slowest: f64,
    pub iterations: u64,
}

/// Times `run(n)`, which runs `n` iterations and returns the time they took
/// (so a case can leave untimed set-up out of it).
pub fn time_custom(mut run: impl FnMut(u64) -> Duration) -> Timing {
    // One iteration's rough cost sizes the rounds.
    let mut n = 1u64;
    let warm_up = BUDGET / 10;
    let started = Instant::now();
    let mut one = run(1).as_secs_f64().max(1e-9);
    while started.elapsed() < warm_up {
        one = (run(n).as_secs_f64() / n as f64).max(1e-9);
        n = (n * 2).min(1 << 20);
    }
    let per_round = ((BUDGET.as_secs_f64() / ROUNDS as f64 / one) as u64).max(1);
    let mut seconds = Vec::new();
    let started = Instant::now();
    while seconds.len() < ROUNDS || started.elapsed() < BUDGET {
        seconds.push(run(per_round).as_secs_f64() / per_round as f64);
        if seconds.len() >= 10 * ROUNDS {
            break;
        }
    }
    seconds.sort_by(f64::total_cmp);
    Timing {
        median: seconds[seconds.len() / 2],
        fastest: seconds[0],
        slowest: seconds[seconds.len() - 1],
        iterations: per_round * seconds.len() as u64,
    }
}

/// Times `f`, every call of it.
pub fn time(mut f: impl FnMut()) -> Timing {
    time_custom(|n| {
        let start = Instant::now();
        for _ in 0..n {
            f();
        }
        start.elapsed()
    })
}

/// Prints one case: its name, the median time per iteration (µs) and its
/// range, and `per` items per second where an iteration does `per` items.
pub fn report(name: &str, t: &Timing, per: Option<(u64, &str)>) {
    let us = |s: f64| s * 1e6;
    let mut line = format!(
        "{name:<32} {:>10.2} µs  [{:.2} .. {:.2}]  {} iterations",
        us(t.median),
        us(t.fastest),
        us(t.slowest),
        t.iterations
    );
    if let Some((items, unit)) = per {
        line += &format!("  {:.0} {unit}/s", items as f64 / t.median);
    }
    println!("{line}");
}
