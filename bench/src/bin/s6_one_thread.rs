//! What one S6 round trip costs in the queue's own code: the ping-pong of `plain_bench`'s
//! S6 (a message there, the same message back, a shared 1 KiB `Arc<[u8]>` payload,
//! capacity 1024) on a Tokio runtime of **one** thread, so that no round trip waits for
//! another core and the figure is the CPU work of two publishes, two receives that find a
//! message, two that wait, and two wake-ups, plus Tokio's scheduling of the two tasks.
//!
//! ```text
//! cargo run --release -p memq-bench --bin s6_one_thread -- [--round-trips N] [--rounds N]
//!     [--impls LIST]
//! ```
//!
//! Rows: memq (a retaining topic each way), memq-release (`release_on_read`), memq-ring
//! (`ring_engine(true)`) and kanal, each in a process of its own, rounds interleaved;
//! prints the median ns per round trip and the range. Every message is checked: the
//! echo must return each id once, in order. Under `valgrind --tool=callgrind` one round of
//! one row counts the instructions a round trip takes (see docs/PERF-NOTES.md, "S6 on one
//! thread").

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

#[path = "../cells.rs"]
mod cells;

type Msg = (u64, Arc<[u8]>);

const IMPLS: [&str; 4] = ["memq", "memq-release", "memq-ring", "kanal"];

/// Runs `n` round trips through `imp` on a one-thread runtime; ns per round trip, or a
/// description of what went wrong.
fn cell(imp: &str, n: u64) -> Result<f64, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| format!("a runtime: {e}"))?;
    let data: Arc<[u8]> = Arc::from(vec![7u8; 1024]);
    rt.block_on(async move {
        let start = Instant::now();
        match imp {
            "memq" | "memq-release" | "memq-ring" => {
                let config = memq::TopicConfig::new(1024)
                    .release_on_read(imp == "memq-release")
                    .ring_engine(imp == "memq-ring");
                let there = memq::Topic::<Msg>::new(config.clone()).map_err(|e| e.to_string())?;
                let back = memq::Topic::<Msg>::new(config).map_err(|e| e.to_string())?;
                let mut echo_rx = there
                    .subscribe(memq::StartAt::Earliest)
                    .map_err(|e| e.to_string())?;
                let mut rx = back
                    .subscribe(memq::StartAt::Earliest)
                    .map_err(|e| e.to_string())?;
                let echo = tokio::spawn(async move {
                    while let Ok(m) = echo_rx.recv().await {
                        if back.publish(m.into_value()).await.is_err() {
                            break;
                        }
                    }
                });
                for id in 0..n {
                    there
                        .publish((id, data.clone()))
                        .await
                        .map_err(|e| e.to_string())?;
                    let got = rx.recv().await.map_err(|e| e.to_string())?.into_value().0;
                    if got != id {
                        return Err(format!("sent {id}, got {got} back"));
                    }
                }
                drop(there);
                echo.await.map_err(|e| e.to_string())?;
            }
            "kanal" => {
                let (tx, echo_rx) = kanal::bounded_async::<Msg>(1024);
                let (echo_tx, rx) = kanal::bounded_async::<Msg>(1024);
                let echo = tokio::spawn(async move {
                    while let Ok(m) = echo_rx.recv().await {
                        if echo_tx.send(m).await.is_err() {
                            break;
                        }
                    }
                });
                for id in 0..n {
                    tx.send((id, data.clone()))
                        .await
                        .map_err(|e| e.to_string())?;
                    let got = rx.recv().await.map_err(|e| e.to_string())?.0;
                    if got != id {
                        return Err(format!("sent {id}, got {got} back"));
                    }
                }
                drop(tx);
                echo.await.map_err(|e| e.to_string())?;
            }
            other => return Err(format!("unknown implementation {other}")),
        }
        Ok(start.elapsed().as_nanos() as f64 / n as f64)
    })
}

struct Args {
    round_trips: u64,
    rounds: usize,
    impls: Vec<String>,
    cell: Option<String>,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        round_trips: 1_000_000,
        rounds: 5,
        impls: IMPLS.iter().map(|s| s.to_string()).collect(),
        cell: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--round-trips" => {
                a.round_trips = value()?.parse().map_err(|e| format!("{flag}: {e}"))?;
            }
            "--rounds" => a.rounds = value()?.parse().map_err(|e| format!("{flag}: {e}"))?,
            "--impls" => a.impls = value()?.split(',').map(str::to_string).collect(),
            "--cell" => a.cell = Some(value()?),
            "-h" | "--help" => {
                return Err(
                    "usage: s6_one_thread [--round-trips N (1,000,000)] [--rounds N (5)] \
                            [--impls memq,memq-release,memq-ring,kanal]"
                        .into(),
                )
            }
            other => return Err(format!("unknown option {other} (--help lists them)")),
        }
    }
    if a.round_trips == 0 || a.rounds == 0 {
        return Err("--round-trips and --rounds must be at least 1".into());
    }
    if let Some(bad) = a.impls.iter().find(|i| !IMPLS.contains(&i.as_str())) {
        return Err(format!(
            "unknown implementation {bad} (known: {})",
            IMPLS.join(",")
        ));
    }
    Ok(a)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if let Some(imp) = &args.cell {
        return match cell(imp, args.round_trips) {
            Ok(ns) => {
                println!("s6_one_thread cell: {ns}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{imp}: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let cell_args = ["--round-trips".to_string(), args.round_trips.to_string()];
    let mut runs =
        match cells::run_interleaved("s6_one_thread", &args.impls, args.rounds, &cell_args) {
            Ok(runs) => runs,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        };
    println!(
        "s6_one_thread: {} round trips on one Tokio thread, median of {} interleaved rounds",
        args.round_trips, args.rounds
    );
    println!("| | ns per round trip | range | against kanal |");
    println!("|---|---:|---:|---:|");
    let figures: Vec<_> = runs
        .iter_mut()
        .map(|r| cells::median_and_range(r))
        .collect();
    let kanal = args
        .impls
        .iter()
        .position(|i| i == "kanal")
        .map(|k| figures[k].0);
    for (imp, &(median, lo, hi)) in args.impls.iter().zip(&figures) {
        let ratio = kanal.map_or("–".to_string(), |q| format!("{:.2} ×", median / q));
        println!("| {imp} | {median:.1} | {lo:.1}–{hi:.1} | {ratio} |");
    }
    ExitCode::SUCCESS
}
