//! Measures memq's durable topics (issue 34) against the disk they write to and against
//! the durable queues users would otherwise pick, in one run on one disk, and checks the
//! issue's targets.
//!
//! ```text
//! cargo run --release -p memq-bench --bin durable_bench -- [--quick] [--dir DIR]
//!     [--seconds S] [--rounds N] [--payloads 100,1024] [--log-mib N] [--csv] [--no-python]
//! ```
//!
//! What it measures, at each payload size (100 B and 1 KiB by default), each cell for a
//! fixed time (2.5 s; `--quick` 0.3 s) and counting every message:
//!
//! 1. the disk: a loop of one record-sized `write` + `fdatasync` (the most a publisher
//!    that waits for each sync can do), and sequential 1 MiB writes with one `fsync` at
//!    the end (the disk's bandwidth);
//! 2. memq durable under `SyncPolicy::Always`, `Interval(10 ms)` and `Never`: one
//!    publisher (`publish_blocking`), 64 publisher threads, 64 async publishers (tasks on
//!    2 Tokio workers), and batches of 100 (`publish_batch_blocking`);
//! 3. recovery: `DurableTopic::open` of a 1 GiB log written under `Never`, with the page
//!    cache as it is, and (as root) after dropping it;
//! 4. replay: a subscriber reading the whole log from `StartAt::Earliest` (cold as root),
//!    every message checked, the count read equal to the count published;
//! 5. the peers: SQLite in WAL mode as a queue table (an INSERT per message, from one
//!    connection, from 64 threads each with its own, and 100 in one transaction;
//!    `synchronous` FULL, NORMAL, OFF beside Always, Interval, Never), and from Python
//!    (`bench/python/durable_peers.py`, in a venv under the target directory):
//!    rst_queue 0.1.6 `AsyncPersistenceQueue` and persist-queue's SQLite and file queues.
//!
//! Then it prints the table (or CSV with `--csv`) and checks the issue's targets, PASS or
//! FAIL each: a measurement, so a FAIL never fails the process. The process fails only on
//! a wrong count (a message lost or read twice) or an error.

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use bytes::Bytes;
use memq::durable::{DurableConfig, DurableRecvError, DurableTopic, SyncPolicy};
use memq::{StartAt, TopicConfig};
use rusqlite::Connection;

const USAGE: &str = "\
usage: durable_bench [options]
  --quick          CI smoke run: 0.3 s per cell, 1 round, a 16 MiB log for recovery
  --dir DIR        where to write (default: a directory under the target directory);
                   must be on the disk to measure, not tmpfs
  --seconds S      time of one cell (default 2.5; quick 0.3)
  --rounds N       rounds, interleaved; medians are printed (default 3; quick 1)
  --payloads LIST  payload sizes in bytes (default 100,1024)
  --threads N      publishers of the concurrent rows (default 64)
  --batch N        messages per batch (default 100)
  --log-mib N      size of the recovery and replay log (default 1024; quick 16)
  --csv            print CSV rows and target lines instead of tables
  --no-python      skip the Python peers
  --venv DIR       the Python venv (default: TARGET/durable-peers-venv, made if missing)
  --only A|B|...   only the cells whose name (printed on stderr as they run) holds A or B...
  -h, --help       this text";

/// Bytes of a record besides its payload: len, crc, offset, timestamp, key_len.
const RECORD_OVERHEAD: usize = 28;
const MIB: f64 = 1024.0 * 1024.0;

#[derive(Debug, Clone)]
struct Opts {
    quick: bool,
    dir: Option<PathBuf>,
    seconds: f64,
    rounds: usize,
    payloads: Vec<usize>,
    threads: usize,
    batch: usize,
    log_mib: u64,
    csv: bool,
    python: bool,
    venv: Option<PathBuf>,
    only: Option<String>,
}

fn parse_args() -> Result<Option<Opts>, String> {
    let all: Vec<String> = std::env::args().skip(1).collect();
    let quick = all.iter().any(|a| a == "--quick");
    let mut o = Opts {
        quick,
        dir: None,
        seconds: if quick { 0.3 } else { 2.5 },
        rounds: if quick { 1 } else { 3 },
        payloads: vec![100, 1024],
        threads: 64,
        batch: 100,
        log_mib: if quick { 16 } else { 1024 },
        csv: false,
        python: true,
        venv: None,
        only: None,
    };
    let mut it = all.into_iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--quick" => {}
            "--csv" => o.csv = true,
            "--no-python" => o.python = false,
            "--dir" => o.dir = Some(PathBuf::from(value("--dir")?)),
            "--venv" => o.venv = Some(PathBuf::from(value("--venv")?)),
            "--only" => o.only = Some(value("--only")?),
            "--seconds" => o.seconds = num(&value("--seconds")?)?,
            "--rounds" => o.rounds = num(&value("--rounds")?)?,
            "--threads" => o.threads = num(&value("--threads")?)?,
            "--batch" => o.batch = num(&value("--batch")?)?,
            "--log-mib" => o.log_mib = num(&value("--log-mib")?)?,
            "--payloads" => {
                o.payloads = value("--payloads")?
                    .split(',')
                    .map(num)
                    .collect::<Result<_, _>>()?
            }
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if o.rounds == 0 || o.threads == 0 || o.batch == 0 || o.payloads.is_empty() {
        return Err("--rounds, --threads, --batch and --payloads must not be 0 or empty".into());
    }
    Ok(Some(o))
}

fn num<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.trim()
        .replace('_', "")
        .parse()
        .map_err(|_| format!("not a number: {s:?}"))
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// One timed run of one cell: what was published (or written) and how long it took.
#[derive(Debug, Clone, Copy)]
struct Sample {
    msgs: u64,
    /// Payload bytes (for the disk rows: bytes written).
    bytes: u64,
    secs: f64,
}

impl Sample {
    fn rate(&self) -> f64 {
        self.msgs as f64 / self.secs
    }
    fn mib(&self) -> f64 {
        self.bytes as f64 / MIB / self.secs
    }
}

/// A row of the table: (scenario, implementation, payload).
type Key = (String, String, usize);

/// Every sample, per row, in the order rows were first measured.
#[derive(Default)]
struct Results {
    order: Vec<Key>,
    samples: BTreeMap<Key, Vec<Sample>>,
}

impl Results {
    fn add(&mut self, scenario: &str, imp: &str, payload: usize, s: Sample) {
        let key = (scenario.to_string(), imp.to_string(), payload);
        if !self.samples.contains_key(&key) {
            self.order.push(key.clone());
        }
        self.samples.entry(key).or_default().push(s);
    }

    /// Median msgs/s and MiB/s of a row.
    fn median(&self, scenario: &str, imp: &str, payload: usize) -> Option<(f64, f64)> {
        let v = self
            .samples
            .get(&(scenario.to_string(), imp.to_string(), payload))?;
        Some((
            median(v.iter().map(Sample::rate)),
            median(v.iter().map(Sample::mib)),
        ))
    }
}

fn median(it: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = it.collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

// Scenario and implementation names: the table's rows and the targets' look-ups.
const DISK_FSYNC: &str = "disk: write+fdatasync loop";
const DISK_SEQ: &str = "disk: sequential 1 MiB writes + fsync";
const RAW: &str = "raw disk";
const ONE: &str = "1 publisher";

fn many(o: &Opts) -> String {
    format!("{} publishers", o.threads)
}
fn many_async(o: &Opts) -> String {
    format!("{} async publishers", o.threads)
}
fn batch(o: &Opts) -> String {
    format!("batch of {}", o.batch)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Always,
    Interval,
    Never,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::Always, Mode::Interval, Mode::Never];
    fn policy(self) -> SyncPolicy {
        match self {
            Mode::Always => SyncPolicy::Always,
            Mode::Interval => SyncPolicy::Interval(Duration::from_millis(10)),
            Mode::Never => SyncPolicy::Never,
        }
    }
    fn memq(self) -> &'static str {
        match self {
            Mode::Always => "memq Always",
            Mode::Interval => "memq Interval(10ms)",
            Mode::Never => "memq Never",
        }
    }
    /// SQLite's `synchronous` beside this policy.
    fn sqlite_sync(self) -> &'static str {
        match self {
            Mode::Always => "FULL",
            Mode::Interval => "NORMAL",
            Mode::Never => "OFF",
        }
    }
    fn sqlite(self) -> &'static str {
        match self {
            Mode::Always => "SQLite WAL synchronous=FULL",
            Mode::Interval => "SQLite WAL synchronous=NORMAL",
            Mode::Never => "SQLite WAL synchronous=OFF",
        }
    }
}

// The Python peers' names, as durable_peers.py prints them, and the memq policy each is
// compared with: rst_queue and persist-queue's SQLite queue sync every push (Always);
// persist-queue's file queue syncs every 100 puts (Interval).
const PY_PEERS: [(&str, &str, Mode); 4] = [
    (ONE, "rst_queue push (sled)", Mode::Always),
    ("batch", "rst_queue push_batch (sled)", Mode::Always),
    (
        ONE,
        "persist-queue SQLite (WAL; commit per put)",
        Mode::Always,
    ),
    (ONE, "persist-queue file (fsync per 100)", Mode::Interval),
];

// ---------------------------------------------------------------------------------------
// The disk's own limits.

/// A loop of one record-sized append + `fdatasync`, as a publisher under `Always` does.
fn disk_fsync_loop(dir: &Path, payload: usize, secs: f64) -> Res<Sample> {
    let path = dir.join("raw-fsync");
    let mut f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&path)?;
    let rec = vec![0x5a_u8; payload + RECORD_OVERHEAD];
    let (start, limit) = (Instant::now(), Duration::from_secs_f64(secs));
    let mut n = 0u64;
    while start.elapsed() < limit {
        f.write_all(&rec)?;
        f.sync_data()?;
        n += 1;
    }
    let s = Sample {
        msgs: n,
        bytes: n * rec.len() as u64,
        secs: start.elapsed().as_secs_f64(),
    };
    drop(f);
    fs::remove_file(&path)?;
    Ok(s)
}

/// Sequential 1 MiB writes for `secs` (at most `cap` bytes), then one `fsync`: the disk's
/// bandwidth, the fsync counted in the time.
fn disk_sequential(dir: &Path, secs: f64, cap: u64) -> Res<Sample> {
    let path = dir.join("raw-seq");
    let mut f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&path)?;
    let chunk = vec![0xa5_u8; 1 << 20];
    let (start, limit) = (Instant::now(), Duration::from_secs_f64(secs));
    let mut bytes = 0u64;
    while start.elapsed() < limit && bytes < cap {
        f.write_all(&chunk)?;
        bytes += chunk.len() as u64;
    }
    f.sync_all()?;
    let s = Sample {
        msgs: 0,
        bytes,
        secs: start.elapsed().as_secs_f64(),
    };
    drop(f);
    fs::remove_file(&path)?;
    Ok(s)
}

// ---------------------------------------------------------------------------------------
// memq.

fn topic_config() -> TopicConfig {
    TopicConfig::new(1024)
}

/// Runs `threads` publishers on `topic` for `secs`; checks that the log holds exactly
/// what they published.
fn memq_publishers(
    dir: &Path,
    mode: Mode,
    payload: usize,
    threads: usize,
    secs: f64,
) -> Res<Sample> {
    let topic = DurableTopic::open(dir, topic_config(), DurableConfig::new(mode.policy()))?;
    let body = bytes_of(payload);
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (topic, body, stop, count, barrier) = (
                topic.clone(),
                body.clone(),
                stop.clone(),
                count.clone(),
                barrier.clone(),
            );
            std::thread::spawn(move || -> Result<(), String> {
                barrier.wait();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let r = topic
                        .publish_blocking(body.clone())
                        .map_err(|e| e.to_string())?;
                    if r.durable != (mode == Mode::Always) {
                        return Err("receipt's `durable` does not match the policy".into());
                    }
                    n += 1;
                }
                count.fetch_add(n, Ordering::Relaxed);
                Ok(())
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().map_err(|_| "a publisher panicked")??;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let n = count.load(Ordering::Relaxed);
    let logged = topic.next_offset(0).unwrap_or(0);
    if logged != n {
        return Err(format!("{} published {n} but the log holds {logged}", mode.memq()).into());
    }
    Ok(Sample {
        msgs: n,
        bytes: n * payload as u64,
        secs: elapsed,
    })
}

/// `tasks` async publishers (`DurableTopic::publish(..).await`) on a Tokio runtime of 2
/// workers, for `secs`: concurrent publishers without a thread each, so that what group
/// commit gains is not spent on waking threads. Checks the log holds what they published.
fn memq_async_publishers(
    dir: &Path,
    mode: Mode,
    payload: usize,
    tasks: usize,
    secs: f64,
) -> Res<Sample> {
    let topic = DurableTopic::open(dir, topic_config(), DurableConfig::new(mode.policy()))?;
    let body = bytes_of(payload);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()?;
    let stop = Arc::new(AtomicBool::new(false));
    let (n, elapsed) = rt.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let (topic, body, stop) = (topic.clone(), body.clone(), stop.clone());
                tokio::spawn(async move {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let r = topic
                            .publish(body.clone())
                            .await
                            .map_err(|e| e.to_string())?;
                        if r.durable != (mode == Mode::Always) {
                            return Err("receipt's `durable` does not match the policy".to_string());
                        }
                        n += 1;
                        // Under Interval and Never a publish is ready at once; memq-store
                        // yields every 32nd in a row on a thread, so that these tasks give
                        // their workers back without help.
                    }
                    Ok::<u64, String>(n)
                })
            })
            .collect();
        let start = Instant::now();
        // The stop comes from a thread of its own, not from the runtime's timer: it must
        // come even if the tasks kept both workers busy.
        let stopper = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs_f64(secs));
                stop.store(true, Ordering::Relaxed);
            })
        };
        let mut n = 0;
        for h in handles {
            n += h.await.map_err(|e| e.to_string())??;
        }
        let elapsed = start.elapsed().as_secs_f64();
        stopper
            .join()
            .map_err(|_| "the stopper thread panicked".to_string())?;
        Ok::<(u64, f64), String>((n, elapsed))
    })?;
    let logged = topic.next_offset(0).unwrap_or(0);
    if logged != n {
        return Err(format!("{} published {n} but the log holds {logged}", mode.memq()).into());
    }
    Ok(Sample {
        msgs: n,
        bytes: n * payload as u64,
        secs: elapsed,
    })
}

/// Batches through the topic: `DurableTopic::publish_batch_blocking` of `batch` (one
/// write, and under `Always` one sync, per batch).
fn memq_batches(dir: &Path, mode: Mode, payload: usize, batch: usize, secs: f64) -> Res<Sample> {
    let topic = DurableTopic::open(dir, topic_config(), DurableConfig::new(mode.policy()))?;
    let body = bytes_of(payload);
    let (start, limit) = (Instant::now(), Duration::from_secs_f64(secs));
    let mut n = 0u64;
    while start.elapsed() < limit {
        let r = topic
            .publish_batch_blocking(vec![body.clone(); batch])
            .map_err(|e| e.to_string())?;
        if r.durable != (mode == Mode::Always) {
            return Err("receipt's `durable` does not match the policy".into());
        }
        n += u64::from(r.count);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let logged = topic.next_offset(0).unwrap_or(0);
    if logged != n {
        return Err(format!("published {n} in batches but the log holds {logged}").into());
    }
    Ok(Sample {
        msgs: n,
        bytes: n * payload as u64,
        secs: elapsed,
    })
}

/// A shared payload, cloned by reference count for each publish.
fn bytes_of(payload: usize) -> Bytes {
    Bytes::from(vec![0x42_u8; payload])
}

// ---------------------------------------------------------------------------------------
// SQLite in WAL mode, used as a queue table.

fn sqlite_open(path: &Path, mode: Mode) -> Res<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(30))?;
    let journal: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    if !journal.eq_ignore_ascii_case("wal") {
        return Err(format!("SQLite refused WAL mode ({journal})").into());
    }
    // Per connection, like the busy timeout.
    conn.execute_batch(&format!("PRAGMA synchronous={}", mode.sqlite_sync()))?;
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS queue (id INTEGER PRIMARY KEY, payload BLOB NOT NULL)",
    )?;
    Ok(conn)
}

const INSERT: &str = "INSERT INTO queue (payload) VALUES (?1)";

/// An INSERT per message (each its own transaction) from `threads` connections, or
/// `batch` INSERTs per transaction from one; checks the table's count after.
fn sqlite_run(
    dir: &Path,
    mode: Mode,
    payload: usize,
    threads: usize,
    batch: usize,
    secs: f64,
) -> Res<Sample> {
    fs::create_dir_all(dir)?;
    let path = dir.join("queue.db");
    let main = sqlite_open(&path, mode)?;
    let body = vec![0x42_u8; payload];
    let stop = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (path, body, stop, barrier) =
                (path.clone(), body.clone(), stop.clone(), barrier.clone());
            std::thread::spawn(move || -> Result<u64, String> {
                let mut conn = sqlite_open(&path, mode).map_err(|e| e.to_string())?;
                barrier.wait();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    if batch > 1 {
                        let tx = conn.transaction().map_err(|e| e.to_string())?;
                        {
                            let mut st = tx.prepare_cached(INSERT).map_err(|e| e.to_string())?;
                            for _ in 0..batch {
                                st.execute([&body]).map_err(|e| e.to_string())?;
                            }
                        }
                        tx.commit().map_err(|e| e.to_string())?;
                        n += batch as u64;
                    } else {
                        let mut st = conn.prepare_cached(INSERT).map_err(|e| e.to_string())?;
                        st.execute([&body]).map_err(|e| e.to_string())?;
                        n += 1;
                    }
                }
                Ok(n)
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    let mut n = 0;
    for h in handles {
        n += h.join().map_err(|_| "a SQLite thread panicked")??;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let rows: i64 = main.query_row("SELECT count(*) FROM queue", [], |r| r.get(0))?;
    if rows as u64 != n {
        return Err(format!("SQLite: inserted {n} but the table holds {rows}").into());
    }
    Ok(Sample {
        msgs: n,
        bytes: n * payload as u64,
        secs: elapsed,
    })
}

// ---------------------------------------------------------------------------------------
// The Python peers.

/// The venv's python with rst_queue 0.1.6 and persist-queue installed, made if missing;
/// `Err` says why not.
fn python_venv(o: &Opts, target: &Path) -> Result<PathBuf, String> {
    let venv = o
        .venv
        .clone()
        .unwrap_or_else(|| target.join("durable-peers-venv"));
    let python = venv.join("bin").join("python");
    let ready = |python: &Path| {
        Command::new(python)
            .args([
                "-c",
                "import rst_queue, persistqueue, importlib.metadata as m; \
                   assert m.version('rst_queue') == '0.1.6'",
            ])
            .output()
            .is_ok_and(|out| out.status.success())
    };
    if ready(&python) {
        return Ok(python);
    }
    let run = |cmd: &mut Command, what: &str| -> Result<(), String> {
        let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = err.lines().rev().take(3).collect();
            Err(format!("{what} failed: {}", tail.join(" / ")))
        }
    };
    run(
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
        "python3 -m venv",
    )?;
    run(
        Command::new(venv.join("bin").join("pip")).args([
            "install",
            "-q",
            "--disable-pip-version-check",
            "rst_queue==0.1.6",
            "persist-queue",
        ]),
        "pip install rst_queue==0.1.6 persist-queue",
    )?;
    if ready(&python) {
        Ok(python)
    } else {
        Err("the venv still cannot import rst_queue 0.1.6 and persistqueue".into())
    }
}

/// One pass of durable_peers.py over its cells.
fn python_round(python: &Path, dir: &Path, o: &Opts, res: &mut Results) -> Res<()> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/durable_peers.py");
    fs::create_dir_all(dir)?;
    let payloads: Vec<String> = o.payloads.iter().map(|p| p.to_string()).collect();
    let out = Command::new(python)
        .arg(&script)
        .arg("--dir")
        .arg(dir)
        .args(["--seconds", &o.seconds.to_string()])
        .args(["--payloads", &payloads.join(",")])
        .args(["--batch", &o.batch.to_string()])
        .output()?;
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        return Err(format!("{} exited with {}", script.display(), out.status).into());
    }
    for line in String::from_utf8_lossy(&out.stdout).lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let [scenario, imp, payload, msgs, secs, verified] = f[..] else {
            return Err(format!("durable_peers.py printed {line:?}").into());
        };
        if verified != "True" {
            return Err(format!("{imp}: the queue's own count differs from the pushes").into());
        }
        let (payload, msgs, secs): (usize, u64, f64) = (num(payload)?, num(msgs)?, num(secs)?);
        res.add(
            scenario,
            imp,
            payload,
            Sample {
                msgs,
                bytes: msgs * payload as u64,
                secs,
            },
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Recovery and replay of a large log.

/// What the recovery and replay of one log measured.
#[derive(Debug)]
struct Recovery {
    payload: usize,
    msgs: u64,
    log_bytes: u64,
    create: Sample,
    open_warm: Duration,
    /// `None` when the page cache could not be dropped.
    open_cold: Option<Duration>,
    replay: Sample,
    replay_cold: bool,
}

fn is_root() -> bool {
    fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
            .unwrap_or(false)
    })
}

/// Writes everything dirty back (`sync`), so that one cell's writeback does not slow
/// the next.
fn settle() {
    let _ = Command::new("sync").status();
}

/// Deletes a cell's directory and lets the disk settle before the next cell.
fn clean(dir: &Path) {
    let _ = fs::remove_dir_all(dir);
    settle();
}

/// Drops the page cache (root only); whether it did.
fn drop_caches() -> bool {
    settle();
    is_root()
        && OpenOptions::new()
            .write(true)
            .open("/proc/sys/vm/drop_caches")
            .and_then(|mut f| f.write_all(b"3\n"))
            .is_ok()
}

fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => total += dir_bytes(&e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

fn recovery(dir: &Path, payload: usize, log_bytes: u64) -> Res<Recovery> {
    // Create: one publisher under `Never` until the records fill `log_bytes`.
    let msgs = log_bytes.div_ceil((payload + RECORD_OVERHEAD) as u64);
    let body = bytes_of(payload);
    let start = Instant::now();
    {
        let topic = DurableTopic::open(dir, topic_config(), DurableConfig::new(SyncPolicy::Never))?;
        for _ in 0..msgs {
            topic
                .publish_blocking(body.clone())
                .map_err(|e| e.to_string())?;
        }
    }
    let create = Sample {
        msgs,
        bytes: msgs * payload as u64,
        secs: start.elapsed().as_secs_f64(),
    };
    settle();
    let on_disk = dir_bytes(dir);

    let open = || -> Res<(DurableTopic, Duration)> {
        let t = Instant::now();
        let topic = DurableTopic::open(dir, topic_config(), DurableConfig::new(SyncPolicy::Never))?;
        let took = t.elapsed();
        if topic.next_offset(0) != Some(msgs) {
            return Err(format!(
                "reopened log ends at {:?}, not {msgs}",
                topic.next_offset(0)
            )
            .into());
        }
        Ok((topic, took))
    };
    let open_warm = open()?.1;
    let open_cold = if drop_caches() { Some(open()?.1) } else { None };

    // Replay from Earliest, cold if the cache can be dropped.
    let replay_cold = drop_caches();
    let (topic, _) = open()?;
    let mut sub = topic.subscribe(StartAt::Earliest)?;
    let start = Instant::now();
    let mut n = 0u64;
    let mut bytes = 0u64;
    while n < msgs {
        match sub.try_recv() {
            Ok(m) => {
                if m.offset != n || m.payload.len() != payload {
                    return Err(format!(
                        "replay: message {n} came as offset {} of {} bytes",
                        m.offset,
                        m.payload.len()
                    )
                    .into());
                }
                bytes += m.payload.len() as u64;
                n += 1;
            }
            Err(DurableRecvError::Empty) => break,
            Err(e) => return Err(format!("replay at {n}: {e}").into()),
        }
    }
    let replay = Sample {
        msgs: n,
        bytes,
        secs: start.elapsed().as_secs_f64(),
    };
    if n != msgs || !matches!(sub.try_recv(), Err(DurableRecvError::Empty)) {
        return Err(format!("replay read {n} messages, {msgs} were published").into());
    }
    Ok(Recovery {
        payload,
        msgs,
        log_bytes: on_disk,
        create,
        open_warm,
        open_cold,
        replay,
        replay_cold,
    })
}

// ---------------------------------------------------------------------------------------
// The report.

fn fmt_rate(r: f64) -> String {
    if !r.is_finite() {
        "-".into()
    } else if r >= 1e6 {
        format!("{:.2}M", r / 1e6)
    } else if r >= 1e3 {
        format!("{:.1}K", r / 1e3)
    } else {
        format!("{r:.0}")
    }
}

/// What a row is compared with: the bar's name, its value, and whether the comparison is
/// in MiB/s (else msgs/s).
fn bar_of(o: &Opts, res: &Results, key: &Key) -> Option<(String, f64, bool)> {
    let (scenario, imp, p) = (key.0.as_str(), key.1.as_str(), key.2);
    let memq_mode = Mode::ALL.into_iter().find(|m| m.memq() == imp);
    let sqlite_mode = Mode::ALL.into_iter().find(|m| m.sqlite() == imp);
    let py = PY_PEERS.iter().find(|(_, name, _)| *name == imp);
    if let Some(m) = memq_mode {
        return match m {
            Mode::Always if scenario == ONE || scenario == batch(o) => {
                let raw = res.median(DISK_FSYNC, RAW, p)?.0;
                Some(("raw write+fdatasync loop".into(), raw, false))
            }
            Mode::Always => {
                let one = res.median(ONE, m.memq(), p)?.0;
                Some(("memq Always, 1 publisher".into(), one, false))
            }
            _ => {
                let seq = res.median(DISK_SEQ, RAW, 0)?.1;
                Some(("raw sequential MiB/s".into(), seq, true))
            }
        };
    }
    let (mode, scen) = match (sqlite_mode, py) {
        (Some(m), _) => (m, scenario.to_string()),
        (None, Some((s, _, m))) => (
            *m,
            if *s == "batch" {
                batch(o)
            } else {
                s.to_string()
            },
        ),
        _ => return None,
    };
    let memq = res.median(&scen, mode.memq(), p)?.0;
    Some((format!("{}, {scen}", mode.memq()), memq, false))
}

fn print_table(o: &Opts, res: &Results) {
    if o.csv {
        println!("scenario,impl,payload,msgs_per_s,mib_per_s,bar,ratio");
    } else {
        println!("| scenario | impl | payload | msgs/s | MiB/s | bar | × bar |");
        println!("|---|---|---:|---:|---:|---|---:|");
    }
    for key in &res.order {
        let (rate, mib) = res.median(&key.0, &key.1, key.2).expect("measured");
        let bar = bar_of(o, res, key);
        let ratio = bar
            .as_ref()
            .map(|(_, v, in_mib)| if *in_mib { mib / v } else { rate / v });
        let payload = if key.2 == 0 {
            "-".to_string()
        } else {
            format!("{} B", key.2)
        };
        let rate_s = if key.0 == DISK_SEQ {
            "-".to_string()
        } else {
            fmt_rate(rate)
        };
        let (bar_s, ratio_s) = match (&bar, ratio) {
            (Some((name, _, _)), Some(r)) => (name.clone(), format!("{r:.2}")),
            _ => ("-".into(), "-".into()),
        };
        if o.csv {
            println!(
                "{},{},{},{:.0},{:.2},{},{}",
                key.0,
                key.1,
                key.2,
                rate,
                mib,
                bar_s.replace(',', ";"),
                ratio_s
            );
        } else {
            println!(
                "| {} | {} | {payload} | {rate_s} | {mib:.1} | {bar_s} | {ratio_s} |",
                key.0, key.1
            );
        }
    }
}

fn print_recovery(o: &Opts, recs: &[Recovery]) {
    if recs.is_empty() {
        return;
    }
    let cold = |d: Option<Duration>| {
        d.map_or("not measured (page cache not dropped)".into(), |d| {
            format!("{:.1}", d.as_secs_f64() * 1e3)
        })
    };
    if o.csv {
        println!();
        println!("payload,messages,log_mib,create_msgs_per_s,open_warm_ms,open_cold_ms,replay_msgs_per_s,replay_mib_per_s,replay_cold,read_back");
        for r in recs {
            println!(
                "{},{},{:.0},{:.0},{:.1},{},{:.0},{:.1},{},{}",
                r.payload,
                r.msgs,
                r.log_bytes as f64 / MIB,
                r.create.rate(),
                r.open_warm.as_secs_f64() * 1e3,
                cold(r.open_cold),
                r.replay.rate(),
                r.replay.mib(),
                r.replay_cold,
                r.replay.msgs
            );
        }
        return;
    }
    println!();
    println!("| payload | messages | log on disk | written (Never, 1 publisher) | open, cache as is | open, cache dropped | replay from Earliest | replay MiB/s | read back |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in recs {
        println!(
            "| {} B | {} | {:.0} MiB | {} msgs/s | {:.1} ms | {} ms | {} msgs/s ({}) | {:.1} | {} of {} |",
            r.payload,
            r.msgs,
            r.log_bytes as f64 / MIB,
            fmt_rate(r.create.rate()),
            r.open_warm.as_secs_f64() * 1e3,
            cold(r.open_cold),
            fmt_rate(r.replay.rate()),
            if r.replay_cold { "cold: page cache dropped" } else { "warm: page cache as is" },
            r.replay.mib(),
            r.replay.msgs,
            r.msgs
        );
    }
}

/// Checks the issue's targets against the medians; prints PASS/FAIL for each.
fn check_targets(o: &Opts, res: &Results) -> (usize, usize) {
    let mut lines: Vec<(bool, String)> = Vec::new();
    let many = many(o);
    let batch_s = batch(o);
    for &p in &o.payloads {
        if let (Some(raw), Some(one)) = (
            res.median(DISK_FSYNC, RAW, p),
            res.median(ONE, Mode::Always.memq(), p),
        ) {
            lines.push((
                one.0 >= 0.9 * raw.0,
                format!(
                    "{p} B: Always, 1 publisher within 10% of the raw write+fdatasync loop: {} vs {} msgs/s ({:.2}x; needs >= 0.90)",
                    fmt_rate(one.0), fmt_rate(raw.0), one.0 / raw.0
                ),
            ));
        }
        for scen in [many.clone(), many_async(o)] {
            if let (Some(one), Some(m)) = (
                res.median(ONE, Mode::Always.memq(), p),
                res.median(&scen, Mode::Always.memq(), p),
            ) {
                lines.push((
                    m.0 >= 50.0 * one.0,
                    format!(
                        "{p} B: Always, {scen} at least 50x 1 publisher (group commit): {} vs {} msgs/s ({:.1}x)",
                        fmt_rate(m.0), fmt_rate(one.0), m.0 / one.0
                    ),
                ));
            }
        }
        for mode in [Mode::Interval, Mode::Never] {
            for scen in [ONE, many.as_str(), batch_s.as_str()] {
                if let (Some(seq), Some(r)) = (
                    res.median(DISK_SEQ, RAW, 0),
                    res.median(scen, mode.memq(), p),
                ) {
                    let record_mib = r.1 * (p + RECORD_OVERHEAD) as f64 / p as f64;
                    lines.push((
                        r.1 >= 0.8 * seq.1,
                        format!(
                            "{p} B: {}, {scen} at >= 80% of raw sequential bandwidth: {:.1} MiB/s of payload ({:.1} MiB/s of records) vs {:.1} MiB/s ({:.2}x)",
                            mode.memq(), r.1, record_mib, seq.1, r.1 / seq.1
                        ),
                    ));
                }
            }
        }
    }
    for key in &res.order {
        let is_peer = Mode::ALL.iter().any(|m| m.sqlite() == key.1)
            || PY_PEERS.iter().any(|(_, n, _)| *n == key.1);
        if !is_peer {
            continue;
        }
        if let Some((bar, memq, _)) = bar_of(o, res, key) {
            let peer = res.median(&key.0, &key.1, key.2).expect("measured").0;
            lines.push((
                memq > peer,
                format!(
                    "{} B: {bar} ahead of {} ({}): {} vs {} msgs/s ({:.1}x)",
                    key.2,
                    key.1,
                    key.0,
                    fmt_rate(memq),
                    fmt_rate(peer),
                    memq / peer
                ),
            ));
        }
    }
    println!();
    if !o.csv {
        println!("Targets of issue 34 (measurements: a FAIL does not fail the run):");
    }
    for (ok, text) in &lines {
        let verdict = if *ok { "PASS" } else { "FAIL" };
        if o.csv {
            println!("target,{verdict},{}", text.replace(',', ";"));
        } else {
            println!("- {verdict} {text}");
        }
    }
    let passed = lines.iter().filter(|(ok, _)| *ok).count();
    (passed, lines.len() - passed)
}

// ---------------------------------------------------------------------------------------

fn sh(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(Some(o)) => o,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("durable_bench: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&o) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("durable_bench: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Names the cells as they run, and gives each a fresh directory (`None`: left out by
/// `--only`).
struct Cells {
    dir: PathBuf,
    count: usize,
    only: Option<String>,
}

impl Cells {
    fn next(&mut self, name: &str) -> Option<PathBuf> {
        if self
            .only
            .as_ref()
            .is_some_and(|only| !only.split('|').any(|o| name.contains(o)))
        {
            return None;
        }
        self.count += 1;
        eprintln!("durable_bench: {name}");
        Some(self.dir.join(format!("cell-{}", self.count)))
    }
}

fn run(o: &Opts) -> Res<()> {
    // target/<profile>/durable_bench -> target
    let exe = std::env::current_exe()?;
    let target = exe
        .parent()
        .and_then(Path::parent)
        .map_or_else(|| PathBuf::from("target"), Path::to_path_buf);
    let base = o
        .dir
        .clone()
        .unwrap_or_else(|| target.join("durable-bench"));
    let dir = base.join(format!("run-{}", std::process::id()));
    fs::create_dir_all(&dir)?;
    let dir = dir.canonicalize()?;
    let fs_type = sh("stat", &["-f", "-c", "%T", &dir.to_string_lossy()]);
    let df = sh("df", &["-h", &dir.to_string_lossy()]);
    let cpu = sh(
        "sh",
        &[
            "-c",
            "lscpu | grep -E '^(Model name|CPU\\(s\\)):' | tr -s ' '",
        ],
    );
    let say = |s: &str| {
        if o.csv {
            for l in s.lines() {
                println!("# {l}");
            }
        } else {
            println!("{s}");
        }
    };
    say(&format!(
        "durable_bench{}: {} s per cell, {} round(s), payloads {:?}, {} publishers, batches of {}",
        if o.quick { " --quick" } else { "" },
        o.seconds,
        o.rounds,
        o.payloads,
        o.threads,
        o.batch
    ));
    say(&format!(
        "date: {}",
        sh("date", &["-u", "+%Y-%m-%d %H:%M UTC"])
    ));
    say(&format!(
        "directory: {} (filesystem {fs_type})",
        dir.display()
    ));
    say(&df);
    say(&cpu.replace('\n', "; "));
    if fs_type.contains("tmpfs") || fs_type.contains("ramfs") {
        say("WARNING: the directory is in memory (tmpfs), not on a disk: every figure below is meaningless for durability; pass --dir on a disk");
    }
    let root = is_root();
    say(&format!(
        "page cache: {}",
        if root {
            "dropped (echo 3 > /proc/sys/vm/drop_caches) for the cold figures, as root"
        } else {
            "cannot be dropped (not root): recovery and replay are measured with the cache as it is"
        }
    ));
    say("batches: DurableTopic::publish_batch_blocking (one write, and under Always one sync, per batch); async publishers: DurableTopic::publish(..).await from tasks on 2 Tokio workers");

    let python = if o.python {
        match python_venv(o, &target) {
            Ok(p) => Some(p),
            Err(why) => {
                eprintln!(
                    "durable_bench: SKIPPING the Python peers (rst_queue, persist-queue): {why}"
                );
                say(&format!("Python peers: SKIPPED ({why})"));
                None
            }
        }
    } else {
        say("Python peers: skipped (--no-python)");
        None
    };

    let mut res = Results::default();
    let cap = if o.quick { 64 << 20 } else { 1 << 30 };
    let many_s = many(o);
    let many_async_s = many_async(o);
    let batch_s = batch(o);
    let mut cells = Cells {
        dir: dir.clone(),
        count: 0,
        only: o.only.clone(),
    };
    for round in 0..o.rounds {
        eprintln!("durable_bench: round {}/{}", round + 1, o.rounds);
        if let Some(d) = cells.next("raw sequential") {
            fs::create_dir_all(&d)?;
            res.add(DISK_SEQ, RAW, 0, disk_sequential(&d, o.seconds, cap)?);
            clean(&d);
        }
        for &p in &o.payloads {
            if let Some(d) = cells.next(&format!("raw fsync loop, {p} B")) {
                fs::create_dir_all(&d)?;
                res.add(DISK_FSYNC, RAW, p, disk_fsync_loop(&d, p, o.seconds)?);
                clean(&d);
            }
            for mode in Mode::ALL {
                let (memq, sqlite) = (mode.memq(), mode.sqlite());
                if let Some(d) = cells.next(&format!("{memq}, 1 publisher, {p} B")) {
                    let s = memq_publishers(&d, mode, p, 1, o.seconds)?;
                    res.add(ONE, memq, p, s);
                    clean(&d);
                }
                if let Some(d) = cells.next(&format!("{memq}, {many_s}, {p} B")) {
                    let s = memq_publishers(&d, mode, p, o.threads, o.seconds)?;
                    res.add(&many_s, memq, p, s);
                    clean(&d);
                }
                if let Some(d) = cells.next(&format!("{memq}, {many_async_s}, {p} B")) {
                    let s = memq_async_publishers(&d, mode, p, o.threads, o.seconds)?;
                    res.add(&many_async_s, memq, p, s);
                    clean(&d);
                }
                if let Some(d) = cells.next(&format!("{memq}, {batch_s}, {p} B")) {
                    let s = memq_batches(&d, mode, p, o.batch, o.seconds)?;
                    res.add(&batch_s, memq, p, s);
                    clean(&d);
                }
                if let Some(d) = cells.next(&format!("{sqlite}, 1 publisher, {p} B")) {
                    let s = sqlite_run(&d, mode, p, 1, 1, o.seconds)?;
                    res.add(ONE, sqlite, p, s);
                    clean(&d);
                }
                if let Some(d) = cells.next(&format!("{sqlite}, {many_s}, {p} B")) {
                    let s = sqlite_run(&d, mode, p, o.threads, 1, o.seconds)?;
                    res.add(&many_s, sqlite, p, s);
                    clean(&d);
                }
                if let Some(d) = cells.next(&format!("{sqlite}, {batch_s}, {p} B")) {
                    let s = sqlite_run(&d, mode, p, 1, o.batch, o.seconds)?;
                    res.add(&batch_s, sqlite, p, s);
                    clean(&d);
                }
            }
        }
        if let Some(py) = &python {
            if let Some(d) = cells.next("Python peers") {
                python_round(py, &d, o, &mut res)?;
                clean(&d);
            }
        }
    }
    let mut recs = Vec::new();
    for &p in &o.payloads {
        let name = format!("recovery and replay of a {} MiB log, {p} B", o.log_mib);
        if let Some(d) = cells.next(&name) {
            recs.push(recovery(&d, p, o.log_mib << 20)?);
            clean(&d);
        }
    }
    let _ = fs::remove_dir(&dir);

    println!();
    print_table(o, &res);
    print_recovery(o, &recs);
    let (passed, failed) = check_targets(o, &res);
    say(&format!("\n{passed} targets passed, {failed} failed; every count checked (log, table and queue counts, replay read back in full)"));
    Ok(())
}
