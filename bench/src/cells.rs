//! Runs a benchmark's cells, each in a fresh process of its own, rounds interleaved: the
//! runner of the small benchmark binaries (`s6_one_thread`, `ack_bench`). A cell is this
//! same program started with `--cell NAME` and the given arguments; it prints one line,
//! `<program> cell: <figure>`.

use std::process::Command;

/// Runs every cell of `names` once per round, `rounds` times, in turn; each started as
/// this program with `--cell NAME` followed by `args`, and read back from the line
/// `"{program} cell: <figure>"` it prints. Returns each cell's figures in order, or
/// which cell failed.
pub fn run_interleaved(
    program: &str,
    names: &[String],
    rounds: usize,
    args: &[String],
) -> Result<Vec<Vec<f64>>, String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot find this program to run its cells: {e}"))?;
    let prefix = format!("{program} cell: ");
    let mut runs: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for _ in 0..rounds {
        for (k, name) in names.iter().enumerate() {
            let out = Command::new(&exe)
                .arg("--cell")
                .arg(name)
                .args(args)
                .output();
            let figure = out.ok().filter(|o| o.status.success()).and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .find_map(|l| l.strip_prefix(prefix.as_str())?.parse().ok())
            });
            runs[k].push(figure.ok_or_else(|| format!("{name}: the cell failed"))?);
        }
    }
    Ok(runs)
}

/// The median of `v` (sorted in place), and its range.
pub fn median_and_range(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}
