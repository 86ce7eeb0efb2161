//! Latency samples as the benchmarks print them.

use std::time::Duration;

/// Prints `what` with the count, p50, p99 and max of `samples`.
pub fn report(what: &str, samples: &mut [Duration]) {
    samples.sort();
    let pct = |p: f64| samples[((samples.len() as f64 * p).ceil() as usize).saturating_sub(1)];
    println!(
        "{what}: n={} p50={:.2} ms p99={:.2} ms max={:.2} ms",
        samples.len(),
        pct(0.50).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        samples[samples.len() - 1].as_secs_f64() * 1e3
    );
}
