//! Criterion benchmarks of memq against its peers, one group per scenario, running the
//! same scenario code as `perf_runner` (`src/bin/perf_runner.rs`) with fewer messages.
//!
//! Each iteration is one whole run of the scenario (fresh channels, fresh runtime); the
//! time criterion sees is the run's own measured span (first publish to last delivery),
//! so runtime start-up and any idle wait of a peer that cannot signal the end of a stream
//! are left out. Throughput is in distinct deliveries made, as in perf_runner (a run that
//! lost messages has its time stretched in proportion, since criterion divides the
//! expected count). Losses are counted on every iteration and printed at the end of each
//! group, never assumed.
//!
//! ```text
//! cargo bench -p memq-bench --bench peers                 # everything, a few minutes
//! cargo bench -p memq-bench --bench peers -- S1/          # one scenario
//! BENCH_MESSAGES=50000 cargo bench -p memq-bench --bench peers
//! ```

extern crate alloc;

#[allow(dead_code)] // shared with perf_runner and large_object_test; the benches use part of it
#[path = "../src/perf/mod.rs"]
mod perf;

use alloc::collections::BTreeMap;
use core::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

use perf::{Impl, Params, Scenario};

fn bench_params() -> Params {
    let messages = std::env::var("BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    Params {
        // Each S5/S6 iteration stays short.
        large_messages: 50,
        huge_messages: 4,
        round_trips: 2_000,
        pingpong_budget: Duration::from_millis(200),
        // Healthy peers need well under a second here; a stalled one costs this much
        // per iteration (and is reported as lost deliveries).
        deadline: Duration::from_secs(2),
        idle: Duration::from_millis(20),
        ..Params::full(messages)
    }
}

fn scenarios(c: &mut Criterion) {
    let params = bench_params();
    for scenario in Scenario::ALL {
        let mut group = c.benchmark_group(scenario.id());
        group.sample_size(10);
        group.warm_up_time(Duration::from_millis(300));
        group.measurement_time(Duration::from_secs(1));
        group.throughput(Throughput::Elements(params.expected(scenario)));
        let trips = u32::try_from(params.round_trips).unwrap_or(u32::MAX);
        let mut losses: BTreeMap<&'static str, (u64, u64)> = BTreeMap::new();
        for imp in Impl::ALL {
            // Probe once: skips rows that do not apply to this scenario.
            if perf::run(scenario, imp, &params).is_none() {
                continue;
            }
            group.bench_function(BenchmarkId::from_parameter(imp.name()), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let out = perf::run(scenario, imp, &params).expect("ran once already");
                        let entry = losses.entry(imp.name()).or_default();
                        entry.0 += out.lost;
                        entry.1 += out.expected;
                        // S6's unit is the round trip, timed by its median (the run may stop
                        // early at its time budget, so scale to the nominal count).
                        total += match out.median_rtt {
                            Some(rtt) => rtt * trips,
                            // Criterion divides the expected deliveries by this time:
                            // stretched by what was lost, its throughput counts only the
                            // deliveries made.
                            None => out
                                .elapsed
                                .mul_f64(out.expected as f64 / out.delivered.max(1) as f64),
                        };
                    }
                    total
                });
            });
        }
        group.finish();
        for (name, (lost, expected)) in losses {
            if lost > 0 {
                let pct = 100.0 * lost as f64 / expected.max(1) as f64;
                println!(
                    "{}/{name}: lost {lost} of {expected} deliveries ({pct:.2}%)",
                    scenario.id()
                );
            }
        }
    }
}

criterion_group!(benches, scenarios);
criterion_main!(benches);
