//! Crash tests: a child process appends from several threads and reports each record the
//! log acknowledged; the parent kills it with SIGKILL at a random moment, reopens the log,
//! and checks that every acknowledged record is there exactly once, in order, intact.
//!
//! The child is this test binary itself, run with `MEMQ_STORE_CRASH_CHILD` set (see
//! `crash_child`). The loop is bounded in time as well as in rounds, so that a slow or
//! loaded machine runs fewer rounds rather than longer.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use memq_store::{DurableConfig, SegmentLog, SyncPolicy};

const CHILD_ENV: &str = "MEMQ_STORE_CRASH_CHILD";
const POLICY_ENV: &str = "MEMQ_STORE_CRASH_POLICY";
const THREADS: u64 = 4;
/// Kills every crash loop makes, whatever the time budget.
const MIN_ROUNDS: usize = 20;

fn config(policy: &str) -> DurableConfig {
    let sync = match policy {
        "always" => SyncPolicy::Always,
        "never" => SyncPolicy::Never,
        other => panic!("unknown policy {other}"),
    };
    // Small segments: crashes land on rolls too.
    DurableConfig::new(sync).segment_bytes(16 << 10)
}

fn payload(thread: u64, seq: u64) -> Vec<u8> {
    let mut p = format!("t{thread}-s{seq}-").into_bytes();
    p.resize(64 + (seq % 200) as usize, b'a' + (seq % 26) as u8);
    p
}

/// The child: appends until killed; prints `offset thread seq` for every record the log
/// acknowledged (under `Always`: once synced; under `Never`: once written).
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let policy = std::env::var(POLICY_ENV).unwrap();
    let log = std::sync::Arc::new(std::sync::Mutex::new(
        SegmentLog::open(&dir, config(&policy)).unwrap(),
    ));
    let out = std::sync::Arc::new(std::sync::Mutex::new(std::io::stdout()));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (log, out) = (log.clone(), out.clone());
            std::thread::spawn(move || {
                for seq in 0.. {
                    let (offset, durability, wait) = {
                        let mut log = log.lock().unwrap();
                        let off = log.append(Some(seq), None, &payload(t, seq)).unwrap();
                        (off, log.durability().clone(), log.needs_sync_wait())
                    };
                    if wait {
                        durability.wait_synced(offset).unwrap();
                    }
                    let mut out = out.lock().unwrap();
                    writeln!(out, "{offset} {t} {seq}").unwrap();
                    out.flush().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Runs the child on `dir` and kills it after `run`; returns what it acknowledged.
fn run_and_kill(dir: &Path, policy: &str, run: Duration) -> Vec<(u64, u64, u64)> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir)
        .env(POLICY_ENV, policy)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut acks = Vec::new();
        let mut first = Some(tx);
        for line in BufReader::new(stdout).split(b'\n') {
            let Ok(line) = line else { break };
            let Ok(line) = String::from_utf8(line) else {
                continue;
            };
            // The test harness prints "test crash_child ... " with no newline before
            // the child's first line: that line is read after it.
            let line = line
                .rsplit_once("... ")
                .map_or(&line[..], |(_, after)| after);
            let f: Vec<&str> = line.split(' ').collect();
            // The test harness prints its own lines; only complete acknowledgements count
            // (`split` hands over a last line without its newline too, so a torn one is
            // rejected by its field count or its parse).
            if let [o, t, s] = f[..] {
                if let (Ok(o), Ok(t), Ok(s)) = (o.parse(), t.parse(), s.parse()) {
                    acks.push((o, t, s));
                    if let Some(tx) = first.take() {
                        let _ = tx.send(());
                    }
                }
            }
        }
        acks
    });
    // The clock starts at the first acknowledgement, so that the kill lands among the
    // appends rather than during start-up, however slow the machine.
    let _ = rx.recv_timeout(Duration::from_secs(60));
    std::thread::sleep(run);
    child.kill().unwrap();
    child.wait().unwrap();
    let mut acks = reader.join().unwrap();
    // The last line may have been cut by the kill: one without all of its digits parses
    // as a smaller number. A record whose line was cut is one the log still holds (the
    // line is printed after the append), so dropping the last line loses no check.
    acks.pop();
    acks
}

fn crash_loop(policy: &str, rounds: usize, budget: Duration) {
    let dir = tempfile::tempdir().unwrap();
    let seed = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("crash loop ({policy}): seed {seed}");
    let mut rng = Rng(seed);
    let mut acked: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    let start = Instant::now();
    let mut done = 0;
    let mut truncations = 0;
    // At least MIN_ROUNDS however slow the machine (a round is short), then more while
    // the time budget lasts: the budget bounds the run, never what it must show.
    while done < MIN_ROUNDS || (done < rounds && start.elapsed() < budget) {
        let run = Duration::from_micros(rng.next() % 20_000);
        for (o, t, s) in run_and_kill(dir.path(), policy, run) {
            assert!(
                acked.insert(o, (t, s)).is_none(),
                "offset {o} acknowledged twice"
            );
        }
        let log = SegmentLog::open(dir.path(), config(policy)).unwrap();
        truncations += usize::from(log.recovery().truncated.is_some());
        // Every record in the log: offsets from 0 without a gap, each one's payload
        // whole, and each thread's records in the order it appended them.
        let all = log.read(0, usize::MAX).unwrap();
        assert_eq!(all.skipped, 0);
        assert_eq!(all.records.len() as u64, log.next_offset());
        let mut last_seq: BTreeMap<u64, u64> = BTreeMap::new();
        for (i, r) in all.records.iter().enumerate() {
            assert_eq!(r.offset, i as u64);
            let seq = r.timestamp.unwrap();
            let text = String::from_utf8_lossy(&r.payload);
            let t: u64 = text[1..text.find('-').unwrap()].parse().unwrap();
            assert_eq!(r.payload, payload(t, seq), "offset {i} damaged");
            // Each run of the child starts its threads' counts at 0 again.
            if let Some(&prev) = last_seq.get(&t) {
                assert!(seq == prev + 1 || seq == 0, "thread {t}: {prev} then {seq}");
            }
            last_seq.insert(t, seq);
        }
        // Every acknowledged record is there, the same one.
        for (&o, &(t, s)) in &acked {
            let r = all.records.get(o as usize).unwrap_or_else(|| {
                panic!(
                    "acknowledged offset {o} lost (log ends at {})",
                    all.records.len()
                )
            });
            assert_eq!(r.payload, payload(t, s), "offset {o}");
        }
        done += 1;
    }
    eprintln!(
        "crash loop ({policy}): {done} kills in {:.1} s, {} acknowledged records checked, \
         {truncations} torn tails cut",
        start.elapsed().as_secs_f64(),
        acked.len()
    );
}

#[test]
fn sigkill_loses_no_record_acknowledged_under_always() {
    if std::env::var(CHILD_ENV).is_ok() || std::env::var(HOLD_ENV).is_ok() {
        return;
    }
    crash_loop("always", 200, Duration::from_secs(60));
}

#[test]
fn sigkill_loses_no_record_written_under_never() {
    if std::env::var(CHILD_ENV).is_ok() || std::env::var(HOLD_ENV).is_ok() {
        return;
    }
    // The page cache outlives the process: what was written survives a kill.
    crash_loop("never", 60, Duration::from_secs(20));
}

#[test]
fn concurrent_appenders_share_fsyncs() {
    if std::env::var(CHILD_ENV).is_ok() || std::env::var(HOLD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = std::sync::Arc::new(std::sync::Mutex::new(
        SegmentLog::open(dir.path(), config("always")).unwrap(),
    ));
    let durability = log.lock().unwrap().durability().clone();
    let (threads, rounds) = (8u64, 50u64);
    // Each round, every thread appends, then all wait together: the first to wait syncs
    // everything written, and the others find their records covered by that one sync
    // (or wait for it to end). Without group commit each would sync its own.
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(threads as usize));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (log, barrier) = (log.clone(), barrier.clone());
            std::thread::spawn(move || {
                for seq in 0..rounds {
                    let (off, d) = {
                        let mut log = log.lock().unwrap();
                        let off = log.append(None, None, &payload(t, seq)).unwrap();
                        (off, log.durability().clone())
                    };
                    barrier.wait();
                    d.wait_synced(off).unwrap();
                    assert!(d.synced() > off);
                    barrier.wait();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let appends = threads * rounds;
    let syncs = durability.syncs();
    eprintln!("{appends} appends waited for {syncs} fsyncs");
    assert_eq!(syncs, rounds, "one fsync per round of {threads} appends");
    assert_eq!(durability.synced(), appends);
}

const HOLD_ENV: &str = "MEMQ_STORE_HOLD_CHILD";

/// A child that opens the log in the directory it is given, says so, and holds it until
/// killed.
#[test]
fn hold_child() {
    let Ok(dir) = std::env::var(HOLD_ENV) else {
        return;
    };
    let _log = SegmentLog::open(&dir, config("never")).unwrap();
    println!("held");
    std::io::stdout().flush().unwrap();
    loop {
        std::thread::park();
    }
}

#[test]
fn another_process_holding_the_directory_is_refused_until_it_dies() {
    if std::env::var(CHILD_ENV).is_ok() || std::env::var(HOLD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "hold_child", "--nocapture", "--test-threads=1"])
        .env(HOLD_ENV, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("held") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the child ended");
    }
    let err = SegmentLog::open(dir.path(), config("never")).unwrap_err();
    assert!(
        matches!(err, memq_store::StoreError::Locked { .. }),
        "{err}"
    );
    // The OS lets go of the lock when its holder dies, however it dies.
    child.kill().unwrap();
    child.wait().unwrap();
    SegmentLog::open(dir.path(), config("never")).unwrap();
}
