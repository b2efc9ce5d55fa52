//! Crash tests of a durable topic and its group: a child process publishes from four
//! threads (under `Always`) and consumes with an explicit-ack group (its state written at
//! every ack); the parent SIGKILLs it at random moments, again and again, and checks after
//! each reopening that
//! - every publish that returned success is in the log exactly once, in order, intact;
//! - the group's committed offsets never move backwards;
//! - no acknowledged message is ever delivered again;
//!
//! and at the end that every message was acknowledged or is still there to be delivered
//! (nothing lost, at least once).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use memq_core::{StartAt, TopicConfig};
use memq_store::{DurableConfig, DurableTopic, GroupConfig, SyncPolicy};

const CHILD_ENV: &str = "MEMQ_STORE_TOPIC_CRASH_CHILD";
const PARTITIONS: u32 = 2;

fn topic_config() -> TopicConfig {
    // A small cache, so that the group reads from disk too.
    TopicConfig::new(16).partitions(PARTITIONS)
}

fn durable() -> DurableConfig {
    DurableConfig::new(SyncPolicy::Always).segment_bytes(8 << 10)
}

fn group() -> GroupConfig {
    GroupConfig::acked(Duration::from_secs(3600)).commit_every(1)
}

fn payload(thread: u64, seq: u64) -> String {
    format!("t{thread}-s{seq}-{}", "p".repeat((seq % 40) as usize))
}

#[test]
fn topic_crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let topic = DurableTopic::open(&dir, topic_config(), durable()).unwrap();
    let out = std::sync::Arc::new(std::sync::Mutex::new(std::io::stdout()));
    let say = move |out: &std::sync::Mutex<std::io::Stdout>, line: String| {
        let mut o = out.lock().unwrap();
        writeln!(o, "{line}").unwrap();
        o.flush().unwrap();
    };
    let mut threads = Vec::new();
    // Four publishers on two partitions: their publishes meet in group writes.
    for t in 0..4u64 {
        let (topic, out) = (topic.clone(), out.clone());
        threads.push(std::thread::spawn(move || {
            for seq in 0.. {
                let r = topic
                    .publish_keyed_blocking(format!("key-{}", seq % 5), payload(t, seq))
                    .unwrap();
                assert!(r.durable);
                say(&out, format!("P {} {} {t} {seq}", r.partition, r.offset));
            }
        }));
    }
    let mut consumer = topic.group("crash", StartAt::Earliest, group()).unwrap();
    loop {
        let d = consumer.recv_delivery_blocking().unwrap();
        let (p, o) = (d.message().partition, d.message().offset);
        say(&out, format!("D {p} {o}"));
        d.ack().unwrap();
        say(&out, format!("A {p} {o}"));
    }
}

enum Line {
    Published(u32, u64, u64, u64),
    Delivered(u32, u64),
    Acked(u32, u64),
}

fn parse(line: &str) -> Option<Line> {
    let f: Vec<&str> = line.split(' ').collect();
    let n = |i: usize| f.get(i)?.parse::<u64>().ok();
    match *f.first()? {
        "P" if f.len() == 5 => Some(Line::Published(n(1)? as u32, n(2)?, n(3)?, n(4)?)),
        "D" if f.len() == 3 => Some(Line::Delivered(n(1)? as u32, n(2)?)),
        "A" if f.len() == 3 => Some(Line::Acked(n(1)? as u32, n(2)?)),
        _ => None,
    }
}

/// What a killed child printed: its complete lines, and the last line apart (the kill
/// may have cut it, and the act it reports may or may not have happened).
fn run_and_kill(dir: &std::path::Path, run: Duration) -> (Vec<Line>, Option<Line>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "topic_crash_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        let mut first = Some(tx);
        for line in BufReader::new(stdout).split(b'\n') {
            let Ok(line) = line else { break };
            // The test harness prints "test topic_crash_child ... " with no newline
            // before the child's first line: that line is read after it.
            let Some(l) = String::from_utf8(line)
                .ok()
                .as_deref()
                .map(|l| l.rsplit_once("... ").map_or(l, |(_, after)| after))
                .and_then(parse)
            else {
                continue;
            };
            lines.push(l);
            if let Some(tx) = first.take() {
                let _ = tx.send(());
            }
        }
        lines
    });
    let _ = rx.recv_timeout(Duration::from_secs(60));
    std::thread::sleep(run);
    child.kill().unwrap();
    child.wait().unwrap();
    let mut lines = reader.join().unwrap();
    let last = lines.pop();
    (lines, last)
}

#[test]
fn sigkill_of_a_publishing_and_consuming_process_loses_and_resurrects_nothing() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("topic crash loop: seed {rng}");
    let mut published: BTreeMap<(u32, u64), String> = BTreeMap::new();
    let mut acked: BTreeSet<(u32, u64)> = BTreeSet::new();
    let mut committed = vec![0u64; PARTITIONS as usize];
    let (start, budget) = (Instant::now(), Duration::from_secs(45));
    let mut rounds = 0;
    let mut redelivered = 0;
    let mut seen = BTreeSet::new();
    let mut ambiguous = BTreeSet::new();
    // At least 20 kills however slow the machine (a round is short), then more while the
    // time budget lasts: the budget bounds the run, never what it must show.
    while rounds < 20 || (rounds < 150 && start.elapsed() < budget) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let (lines, last) = run_and_kill(dir.path(), Duration::from_micros(rng % 30_000));
        // The consumer delivers, acks and reports one message at a time: if the kill
        // came between its ack and the report, that message is settled unreported. Only
        // the last delivery of a round (or the message of a cut last line) can be so.
        let mut open_delivery = None;
        match last {
            Some(Line::Delivered(p, o)) | Some(Line::Acked(p, o)) => {
                ambiguous.insert((p, o));
            }
            _ => {}
        }
        for line in lines {
            match line {
                Line::Published(p, o, t, s) => {
                    assert!(
                        published.insert((p, o), payload(t, s)).is_none(),
                        "{p}/{o} twice"
                    );
                }
                Line::Delivered(p, o) => {
                    assert!(!acked.contains(&(p, o)), "acked {p}/{o} delivered again");
                    // Settled on disk below the committed offset: never delivered again.
                    assert!(
                        o >= committed[p as usize],
                        "{p}/{o} below the committed offset"
                    );
                    redelivered += usize::from(!seen.insert((p, o)));
                    open_delivery = Some((p, o));
                }
                Line::Acked(p, o) => {
                    acked.insert((p, o));
                    open_delivery = None;
                }
            }
        }
        ambiguous.extend(open_delivery);
        let topic = DurableTopic::open(dir.path(), topic_config(), durable()).unwrap();
        // The log: every acknowledged publish, once, in its partition's order, intact.
        let mut sub = topic.subscribe(StartAt::Earliest).unwrap();
        let mut log: BTreeMap<(u32, u64), Vec<u8>> = BTreeMap::new();
        while let Ok(m) = sub.try_recv() {
            assert!(log
                .insert((m.partition, m.offset), m.payload.to_vec())
                .is_none());
        }
        for p in 0..PARTITIONS {
            let n = topic.next_offset(p).unwrap();
            assert_eq!(
                log.range((p, 0)..(p, u64::MAX)).count() as u64,
                n,
                "gap in {p}"
            );
        }
        for (k, v) in &published {
            assert_eq!(log.get(k).map(Vec::as_slice), Some(v.as_bytes()), "{k:?}");
        }
        // The group: committed offsets only move forward.
        let c = topic.group("crash", StartAt::Earliest, group()).unwrap();
        let now = c.stats().committed;
        for p in 0..PARTITIONS as usize {
            assert!(
                now[p] >= committed[p],
                "partition {p}: {} -> {}",
                committed[p],
                now[p]
            );
        }
        committed = now;
        rounds += 1;
    }
    // At the end: everything published was acked, or is delivered now.
    let topic = DurableTopic::open(dir.path(), topic_config(), durable()).unwrap();
    let mut c = topic.group("crash", StartAt::Earliest, group()).unwrap();
    let mut rest = BTreeSet::new();
    while let Ok(d) = c.recv_delivery_timeout(Duration::ZERO) {
        let k = (d.message().partition, d.message().offset);
        assert!(!acked.contains(&k), "acked {k:?} delivered again");
        rest.insert(k);
        d.ack().unwrap();
    }
    for k in published.keys() {
        assert!(
            acked.contains(k) || rest.contains(k) || ambiguous.contains(k),
            "{k:?} lost by the group"
        );
    }
    eprintln!(
        "topic crash loop: {rounds} kills in {:.1} s; {} publishes and {} acks confirmed; \
         {redelivered} unacked deliveries made again after a kill; {} left at the end, {} acked unreported at a kill",
        start.elapsed().as_secs_f64(),
        published.len(),
        acked.len(),
        rest.len(),
        ambiguous.iter().filter(|k| !rest.contains(k) && !acked.contains(k)).count()
    );
}
