//! Measures memq against its peers on the scenarios S1–S7, interleaved over
//! several rounds, and prints a markdown table (or CSV with `--csv`).
//!
//! ```text
//! cargo run --release -p memq-bench --bin perf_runner -- [--quick] [--rounds N] [--messages N]
//!     [--scenarios S1,S3,...] [--impls kanal,flume,...] [--timeout SECS] [--workers N]
//!     [--csv]
//! ```
//!
//! Every run counts what arrived by message id: losses and duplicates are counted, never
//! assumed. Each run (one scenario, one implementation, one round) runs in a fresh child
//! process, so that no run is measured in the heap, threads or caches another left behind
//! (`--in-process` runs them all in this one, for tools that do not follow children). Rates are distinct deliveries per second from the first publish to the last
//! delivery (S3 counts each of the 4 subscribers' deliveries; S6 is 1e9 / median round
//! trip in ns). The figures are noisy on a loaded or 2-core machine: compare ratios within
//! one run, and never assert on them.

extern crate alloc;

#[path = "../perf/mod.rs"]
mod perf;

use std::process::ExitCode;
use std::time::Instant;

use perf::report::{self, Cell};
use perf::{Impl, Params, Scenario};

const USAGE: &str = "\
usage: perf_runner [options]
  --quick             small smoke run (CI): 10,000 messages, 1 round, short timeouts
  --rounds N          rounds, interleaved over scenarios and implementations (default 3; quick 1)
  --messages N        messages per scenario (default 1,000,000; quick 10,000)
  --scenarios LIST    only these scenarios, e.g. S1,S3,S5 (default all)
  --impls LIST        only these implementations, e.g. kanal,tokio-mpsc,memq (default all)
  --timeout SECS      wall-clock cap of one run (default 60; quick 3)
  --workers N         Tokio worker threads of the async rows (default 2)
  --csv               print `scenario,impl,median_msgs_per_s,lost` lines instead of a table
  --in-process        run every cell in this process instead of a fresh child process each
  --cell S,IMPL       (used by perf_runner itself) run one cell, print its outcome line
  -h, --help          this text";

#[derive(Debug)]
struct Args {
    quick: bool,
    rounds: Option<usize>,
    messages: Option<u64>,
    scenarios: Vec<Scenario>,
    impls: Vec<Impl>,
    timeout: Option<u64>,
    workers: Option<usize>,
    csv: bool,
    in_process: bool,
    cell: Option<(Scenario, Impl)>,
}

fn parse_args() -> Result<Option<Args>, String> {
    let mut args = Args {
        quick: false,
        rounds: None,
        messages: None,
        scenarios: Scenario::ALL.to_vec(),
        impls: Impl::ALL.to_vec(),
        timeout: None,
        workers: None,
        csv: false,
        in_process: false,
        cell: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--quick" => args.quick = true,
            "--csv" => args.csv = true,
            "--rounds" => args.rounds = Some(parse_num(&value("--rounds")?)?),
            "--messages" => args.messages = Some(parse_num(&value("--messages")?)?),
            "--timeout" => args.timeout = Some(parse_num(&value("--timeout")?)?),
            "--workers" => args.workers = Some(parse_num(&value("--workers")?)?),
            "--scenarios" => args.scenarios = Scenario::parse_list(&value("--scenarios")?)?,
            "--impls" => args.impls = Impl::parse_list(&value("--impls")?)?,
            "--in-process" => args.in_process = true,
            "--cell" => args.cell = Some(parse_cell(&value("--cell")?)?),
            "-h" | "--help" => return Ok(None),
            // `cargo bench` and some wrappers pass this to every target.
            "--bench" => {}
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(Some(args))
}

/// `S1,memq`: one scenario id and one implementation name.
fn parse_cell(text: &str) -> Result<(Scenario, Impl), String> {
    let (s, i) = text
        .split_once(',')
        .ok_or_else(|| format!("--cell wants SCENARIO,IMPL, not `{text}`"))?;
    match (
        Scenario::parse_list(s)?.as_slice(),
        Impl::parse_list(i)?.as_slice(),
    ) {
        ([s], [i]) => Ok((*s, *i)),
        _ => Err(format!(
            "--cell wants one scenario and one implementation: `{text}`"
        )),
    }
}

/// What a child process prints before its outcome.
const OUTCOME: &str = "perf_runner outcome: ";

/// Runs one cell in a fresh child process (this program with `--cell`, and the options
/// that shape a run), and reads back its outcome. `Err` says what went wrong.
fn run_in_child(args: &Args, scenario: Scenario, imp: Impl) -> Result<perf::Outcome, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find perf_runner: {e}"))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("--cell")
        .arg(format!("{},{}", scenario.id(), imp.name()));
    if args.quick {
        cmd.arg("--quick");
    }
    for (flag, value) in [
        ("--messages", args.messages),
        ("--timeout", args.timeout),
        ("--workers", args.workers.map(|w| w as u64)),
    ] {
        if let Some(v) = value {
            cmd.arg(flag).arg(v.to_string());
        }
    }
    let out = cmd
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot start perf_runner: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix(OUTCOME))
        .ok_or_else(|| format!("the run printed no outcome ({})", out.status))?;
    if !out.status.success() {
        return Err(format!("the run ended with {}", out.status));
    }
    perf::Outcome::from_line(line)
}

fn parse_num<T: core::str::FromStr>(text: &str) -> Result<T, String> {
    text.replace(['_', ','], "")
        .parse()
        .map_err(|_| format!("not a number: `{text}`"))
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("perf_runner: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };

    let mut params = if args.quick {
        Params::quick()
    } else {
        Params::full(1_000_000)
    };
    if let Some(n) = args.messages {
        let tuned = params.clone();
        params = Params {
            pingpong_budget: tuned.pingpong_budget,
            deadline: tuned.deadline,
            idle: tuned.idle,
            ..Params::full(n)
        };
    }
    if let Some(secs) = args.timeout {
        params.deadline = core::time::Duration::from_secs(secs.max(1));
    }
    if let Some(workers) = args.workers {
        params.workers = workers.max(1);
    }
    if let Some((scenario, imp)) = args.cell {
        // A child of perf_runner: one run, its outcome on stdout.
        return match perf::run(scenario, imp, &params) {
            Some(outcome) => {
                println!("{OUTCOME}{}", outcome.to_line());
                ExitCode::SUCCESS
            }
            None => {
                eprintln!("perf_runner: {} does not run {}", imp.name(), scenario.id());
                ExitCode::from(2)
            }
        };
    }
    let rounds = args.rounds.unwrap_or(if args.quick { 1 } else { 3 }).max(1);

    eprintln!(
        "perf_runner: {} messages (S5: {} × 1 MiB, {} × 100 MiB; S6: up to {} round trips), \
         capacity {}, {} round(s), {} tokio workers, {} CPUs",
        params.messages,
        params.large_messages,
        params.huge_messages,
        params.round_trips,
        params.capacity,
        rounds,
        params.workers,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );

    let expected: Vec<String> = args
        .scenarios
        .iter()
        .map(|&s| format!("{} {}", s.id(), params.expected(s)))
        .collect();
    eprintln!("perf_runner: deliveries per run: {}", expected.join(", "));

    let mut cells: Vec<Cell> = args
        .scenarios
        .iter()
        .flat_map(|&scenario| {
            args.impls.iter().map(move |&imp| Cell {
                scenario,
                imp,
                outcomes: Vec::new(),
            })
        })
        .collect();

    let started = Instant::now();
    // Interleave: each round visits every cell once, so drift of the machine over time
    // spreads over all rows instead of favouring whichever ran first; and each round
    // starts one cell further on, so that no row always runs first, or always right after
    // the same neighbour.
    let n = cells.len();
    let mut failed = 0;
    for round in 1..=rounds {
        for k in 0..n {
            let cell = &mut cells[(k + round - 1) % n];
            if !cell.imp.supports(cell.scenario) {
                continue;
            }
            let t = Instant::now();
            let outcome = if args.in_process {
                perf::run(cell.scenario, cell.imp, &params)
                    .expect("runs every scenario it supports")
            } else {
                match run_in_child(&args, cell.scenario, cell.imp) {
                    Ok(outcome) => outcome,
                    Err(e) => {
                        eprintln!(
                            "perf_runner: ERROR round {round} {} {}: {e}",
                            cell.scenario.id(),
                            cell.imp.name()
                        );
                        failed += 1;
                        continue;
                    }
                }
            };
            eprintln!(
                "round {round}/{rounds} {:<10} {:<16} {:>9} msgs/s  lost {:<8} ({:.2?})",
                cell.scenario.id(),
                cell.imp.name(),
                report::fmt_rate(outcome.msgs_per_s),
                outcome.lost,
                t.elapsed(),
            );
            cell.outcomes.push(outcome);
        }
    }
    eprintln!("perf_runner: done in {:.1?}", started.elapsed());

    // The CSV lines carry only losses: say what else went wrong where anyone looks. A peer
    // may lose messages (tokio broadcast drops for slow receivers) or miss the deadline
    // (tokio-memq is slow): a warning. memq's rows run lossless topics, so any loss,
    // duplicate, disorder or hang there is a bug, and fails the run (and the check
    // script, which runs `--quick`).
    let mut broken = 0;
    for cell in &cells {
        let mut bad = report::anomalies(cell);
        let lost = cell.lost();
        if cell.imp.is_memq() && lost > 0 {
            bad.insert(0, format!("{lost} lost"));
        }
        if bad.is_empty() {
            continue;
        }
        let what = if cell.imp.is_memq() {
            broken += 1;
            "ERROR"
        } else {
            "WARNING"
        };
        eprintln!(
            "perf_runner: {what} {} {}: {}",
            cell.scenario.id(),
            cell.imp.name(),
            bad.join("; ")
        );
    }
    if args.csv {
        print!("{}", report::csv(&cells));
    } else {
        println!(
            "Median over {rounds} round(s), {} messages per scenario; rates are distinct \
             deliveries/s (S3: all 4 subscribers; S6: 1e9/median RTT). Ratio is to tokio \
             mpsc (S3: tokio broadcast). `lost` is summed over the rounds; \"–\": does not \
             apply.\n",
            params.messages
        );
        print!("{}", report::markdown(&cells));
        println!("\nThe floors of issue 5, from these medians:\n");
        print!("{}", report::floors(&cells));
    }
    if failed > 0 {
        eprintln!("perf_runner: {failed} run(s) failed (see ERROR above)");
    }
    if broken > 0 {
        eprintln!("perf_runner: {broken} memq cell(s) did not deliver exactly (see ERROR above)");
    }
    if failed > 0 || broken > 0 {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
