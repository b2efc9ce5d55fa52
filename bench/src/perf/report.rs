//! Turns the outcomes of several rounds into the markdown table or CSV lines that
//! `perf_runner` prints. Knows nothing about how the numbers were measured.

use core::fmt::Write as _;

use super::{Impl, Outcome, Scenario};

/// The rounds of one (scenario, implementation) cell.
#[derive(Clone, Debug)]
pub struct Cell {
    /// Scenario of this cell.
    pub scenario: Scenario,
    /// Implementation of this cell.
    pub imp: Impl,
    /// One outcome per round that ran; empty when the implementation does not fit the
    /// scenario.
    pub outcomes: Vec<Outcome>,
}

impl Cell {
    /// Median rate over the rounds, if any ran.
    pub fn median_rate(&self) -> Option<f64> {
        let mut rates: Vec<f64> = self.outcomes.iter().map(|o| o.msgs_per_s).collect();
        median(&mut rates)
    }

    /// Lowest and highest rate over the rounds.
    pub fn min_max(&self) -> Option<(f64, f64)> {
        let rates = self.outcomes.iter().map(|o| o.msgs_per_s);
        let min = rates.clone().reduce(f64::min)?;
        let max = rates.reduce(f64::max)?;
        Some((min, max))
    }

    /// Lost deliveries summed over the rounds.
    pub fn lost(&self) -> u64 {
        self.outcomes.iter().map(|o| o.lost).sum()
    }

    /// Expected deliveries summed over the rounds.
    pub fn expected(&self) -> u64 {
        self.outcomes.iter().map(|o| o.expected).sum()
    }
}

/// The median of `values` (mean of the middle two for an even count).
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    })
}

/// A rate with an SI suffix: `41.3M`, `590K`, `29.0`.
pub fn fmt_rate(rate: f64) -> String {
    if rate >= 1e9 {
        format!("{:.2}G", rate / 1e9)
    } else if rate >= 1e6 {
        format!("{:.2}M", rate / 1e6)
    } else if rate >= 1e3 {
        format!("{:.1}K", rate / 1e3)
    } else {
        format!("{rate:.1}")
    }
}

/// A duration in the unit that keeps it readable.
pub fn fmt_nanos(nanos: f64) -> String {
    if nanos >= 1e6 {
        format!("{:.2} ms", nanos / 1e6)
    } else if nanos >= 1e3 {
        format!("{:.1} µs", nanos / 1e3)
    } else {
        format!("{nanos:.0} ns")
    }
}

fn baseline_rate(cells: &[Cell], scenario: Scenario) -> Option<f64> {
    cells
        .iter()
        .find(|c| c.scenario == scenario && c.imp == scenario.baseline())
        .and_then(Cell::median_rate)
}

fn notes(cell: &Cell) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(note) = cell.imp.note(cell.scenario) {
        parts.push(note.to_owned());
    }
    if cell.outcomes.is_empty() {
        return parts.join("; ");
    }
    let mut rtts: Vec<f64> = cell
        .outcomes
        .iter()
        .filter_map(|o| o.median_rtt.map(|d| d.as_nanos() as f64))
        .collect();
    if let Some(rtt) = median(&mut rtts) {
        parts.push(format!("median RTT {}", fmt_nanos(rtt)));
    }
    let lagged: u64 = cell.outcomes.iter().map(|o| o.lag_reported).sum();
    if lagged > 0 {
        parts.push(format!("{lagged} reported lagged"));
    }
    parts.extend(anomalies(cell));
    parts.join("; ")
}

/// What went wrong in a cell's runs, beyond losses: duplicates, ids never published,
/// payloads copied, runs that hit the deadline. Empty for a clean cell.
pub fn anomalies(cell: &Cell) -> Vec<String> {
    let mut parts = Vec::new();
    let dup: u64 = cell.outcomes.iter().map(|o| o.duplicated).sum();
    if dup > 0 {
        parts.push(format!("{dup} duplicated"));
    }
    let unknown: u64 = cell.outcomes.iter().map(|o| o.out_of_range).sum();
    if unknown > 0 {
        parts.push(format!("{unknown} with ids never published"));
    }
    let unordered: u64 = cell.outcomes.iter().map(|o| o.out_of_order).sum();
    if unordered > 0 {
        parts.push(format!("{unordered} out of order within their key"));
    }
    let split: u64 = cell.outcomes.iter().map(|o| o.split_keys).sum();
    if split > 0 {
        parts.push(format!("{split} keys split between consumers"));
    }
    let copied: u64 = cell.outcomes.iter().map(|o| o.payload_mismatch).sum();
    if copied > 0 {
        parts.push(format!("{copied} payloads copied/changed"));
    }
    let timeouts = cell.outcomes.iter().filter(|o| o.timed_out).count();
    if timeouts > 0 {
        parts.push(format!("hit the deadline in {timeouts} round(s)"));
    }
    parts
}

fn fmt_lost(cell: &Cell) -> String {
    let lost = cell.lost();
    let expected = cell.expected();
    if lost == 0 {
        "0".to_owned()
    } else {
        let pct = 100.0 * lost as f64 / expected.max(1) as f64;
        format!("{lost} ({pct:.1}%)")
    }
}

/// The markdown table: one row per cell, in the order given.
pub fn markdown(cells: &[Cell]) -> String {
    let mut out = String::new();
    out.push_str(
        "| scenario | impl | median msgs/s | min–max | ratio to tokio mpsc (S3: broadcast) | lost | notes |\n",
    );
    out.push_str("|---|---|---:|---:|---:|---:|---|\n");
    for cell in cells {
        let (median, range, ratio, lost) = match cell.median_rate() {
            None => (
                "–".to_owned(),
                "–".to_owned(),
                "–".to_owned(),
                "–".to_owned(),
            ),
            Some(m) => {
                let (lo, hi) = cell.min_max().unwrap_or((m, m));
                let ratio = baseline_rate(cells, cell.scenario)
                    .filter(|b| *b > 0.0)
                    .map_or("–".to_owned(), |b| format!("{:.2}×", m / b));
                (
                    fmt_rate(m),
                    format!("{}–{}", fmt_rate(lo), fmt_rate(hi)),
                    ratio,
                    fmt_lost(cell),
                )
            }
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            cell.scenario.label(),
            cell.imp.name(),
            median,
            range,
            ratio,
            lost,
            notes(cell)
        );
    }
    out
}

/// CSV lines `scenario,impl,median_msgs_per_s,lost` (with that header), one per cell that
/// ran; `lost` is summed over the rounds.
pub fn csv(cells: &[Cell]) -> String {
    let mut out = String::from("scenario,impl,median_msgs_per_s,lost\n");
    for cell in cells {
        if let Some(m) = cell.median_rate() {
            let _ = writeln!(
                out,
                "{},{},{:.0},{}",
                cell.scenario.id(),
                cell.imp.name(),
                m,
                cell.lost()
            );
        }
    }
    out
}

/// The floors issue 5 set memq, checked against this run's medians: one markdown row per
/// floor whose cells ran. memq's side is its better async row on Tokio (memq or
/// memq-release, run as the async peers are) that lost nothing and showed no anomaly; a
/// floor with no such row is not met. memq-threads (plain threads) is left out, so that a
/// row of another execution model cannot carry a floor against an async peer. "S7 ≥ S2"
/// compares each row with itself.
pub fn floors(cells: &[Cell]) -> String {
    use Impl::{AsyncChannel, Crossbeam, Kanal, TokioBroadcast, TokioMemq, TokioMpsc};
    use Scenario::{
        S1OneToOne, S2Competing, S3Fanout, S4Batches, S5Large100MiB, S5Large1MiB, S7Partitioned,
    };
    let mut out =
        String::from("| floor | memq row | against | ratio | met |\n|---|---|---|---:|---|\n");
    let mut row =
        |floor: String, ours: Option<(Impl, f64)>, theirs: String, ratio: f64, need: f64| {
            let (mine, ratio, met) = match ours {
                Some((imp, rate)) => (
                    format!("{} {}", imp.name(), fmt_rate(rate)),
                    format!("{ratio:.2} ×"),
                    if ratio >= need { "yes" } else { "**no**" },
                ),
                None => ("none lossless".to_owned(), "–".to_owned(), "**no**"),
            };
            let _ = writeln!(out, "| {floor} | {mine} | {theirs} | {ratio} | {met} |");
        };
    let peers = [
        (S1OneToOne, AsyncChannel, 1.0),
        (S2Competing, Crossbeam, 1.0),
        (S3Fanout, TokioBroadcast, 1.5),
        (S4Batches, Kanal, 1.0),
        (S5Large1MiB, TokioMpsc, 1.0),
        (S5Large100MiB, TokioMpsc, 1.0),
    ];
    for (scenario, peer, need) in peers {
        let (Some(theirs), true) = (rate_of(cells, scenario, peer), ran_memq(cells, scenario))
        else {
            continue;
        };
        let ours = best_memq(cells, scenario);
        let times = if need == 1.0 {
            String::new()
        } else {
            format!("{need} × ")
        };
        row(
            format!("{} ≥ {times}{}", scenario.id(), peer.name()),
            ours,
            format!("{} {}", peer.name(), fmt_rate(theirs)),
            ours.map_or(0.0, |(_, r)| r / theirs),
            need,
        );
    }
    if ran_memq(cells, S7Partitioned) {
        // Each row against its own S2; the best ratio of the rows clean in both.
        let best = FLOOR_ROWS
            .iter()
            .filter_map(|&imp| {
                let s7 = clean_rate(cells, S7Partitioned, imp)?;
                let s2 = clean_rate(cells, S2Competing, imp)?;
                Some((imp, s7, s2))
            })
            .max_by(|a, b| (a.1 / a.2).total_cmp(&(b.1 / b.2)));
        match best {
            Some((imp, s7, s2)) => row(
                "S7 ≥ S2".to_owned(),
                Some((imp, s7)),
                format!("S2 {} {}", imp.name(), fmt_rate(s2)),
                s7 / s2,
                1.0,
            ),
            None => row(
                "S7 ≥ S2".to_owned(),
                None,
                "no row lossless in both".to_owned(),
                0.0,
                1.0,
            ),
        }
    }
    for scenario in Scenario::ALL {
        let (Some(theirs), true) = (
            rate_of(cells, scenario, TokioMemq),
            ran_memq(cells, scenario),
        ) else {
            continue;
        };
        let ours = best_memq(cells, scenario);
        row(
            format!("{} ≥ 20 × tokio-memq", scenario.id()),
            ours,
            format!("tokio-memq {}", fmt_rate(theirs)),
            ours.map_or(0.0, |(_, r)| r / theirs),
            20.0,
        );
    }
    out
}

/// The median rate of `imp` in `scenario`, if it ran.
fn rate_of(cells: &[Cell], scenario: Scenario, imp: Impl) -> Option<f64> {
    cells
        .iter()
        .find(|c| c.scenario == scenario && c.imp == imp)
        .and_then(Cell::median_rate)
}

/// Whether any memq floor row ran `scenario`.
fn ran_memq(cells: &[Cell], scenario: Scenario) -> bool {
    cells
        .iter()
        .any(|c| c.scenario == scenario && FLOOR_ROWS.contains(&c.imp) && !c.outcomes.is_empty())
}

/// The memq rows the floors are checked with: async on Tokio, as the async peers run.
const FLOOR_ROWS: [Impl; 2] = [Impl::Memq, Impl::MemqRelease];

/// The median rate of memq row `imp` in `scenario`, if it ran, lost nothing and showed no
/// anomaly.
fn clean_rate(cells: &[Cell], scenario: Scenario, imp: Impl) -> Option<f64> {
    cells
        .iter()
        .find(|c| c.scenario == scenario && c.imp == imp)
        .filter(|c| c.lost() == 0 && anomalies(c).is_empty())
        .and_then(Cell::median_rate)
}

/// memq's fastest floor row ([`FLOOR_ROWS`]) in `scenario` among those that lost nothing
/// and showed no anomaly.
fn best_memq(cells: &[Cell], scenario: Scenario) -> Option<(Impl, f64)> {
    FLOOR_ROWS
        .iter()
        .filter_map(|&imp| Some((imp, clean_rate(cells, scenario, imp)?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}
