//! Sends 1 MiB to 100 MiB shared payloads through memq and every peer and
//! checks that each delivered payload is the very allocation that was published: same
//! pointer, same length, so nothing was copied on the way.
//!
//! ```text
//! cargo run --release -p memq-bench --bin large_object_test -- [--messages N]
//! ```
//!
//! Exits with status 1 if any payload arrived copied or changed. Losses are reported,
//! not failed on: tokio-memq is known to lose messages.

extern crate alloc;

#[allow(dead_code)] // shared with perf_runner and the benches; this test uses part of it
#[path = "../perf/mod.rs"]
mod perf;

use alloc::sync::Arc;
use core::time::Duration;
use std::process::ExitCode;
use std::time::Instant;

use perf::report::{fmt_nanos, fmt_rate};
use perf::{Impl, Params, Scenario};

const SIZES_MIB: [usize; 5] = [1, 4, 16, 64, 100];

fn main() -> ExitCode {
    let mut messages: u64 = 32;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--messages" => {
                messages = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(messages)
                    .max(1);
            }
            "--bench" => {}
            "-h" | "--help" => {
                println!("usage: large_object_test [--messages N]  (default 32 per size)");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("large_object_test: unknown argument `{other}`");
                return ExitCode::from(2);
            }
        }
    }

    println!("| payload | impl | messages | per message | msgs/s | pointer/len unchanged | lost |");
    println!("|---:|---|---:|---:|---:|---|---:|");
    let mut copies = 0u64;
    for mib in SIZES_MIB {
        let params = Params {
            messages,
            payload_size: mib << 20,
            deadline: Duration::from_secs(60),
            ..Params::full(100)
        };
        for imp in Impl::ALL {
            // One publisher, one consumer, `messages` clones of one shared payload.
            match perf::run(Scenario::S1OneToOne, imp, &params) {
                Some(o) => {
                    copies += o.payload_mismatch;
                    let per_msg = o.elapsed.as_nanos() as f64 / o.delivered.max(1) as f64;
                    let unchanged = if o.payload_mismatch == 0 {
                        format!("yes ({}/{})", o.delivered, o.expected)
                    } else {
                        format!("NO: {} copied/changed", o.payload_mismatch)
                    };
                    println!(
                        "| {mib} MiB | {} | {messages} | {} | {} | {unchanged} | {} |",
                        imp.name(),
                        fmt_nanos(per_msg),
                        fmt_rate(o.msgs_per_s),
                        o.lost
                    );
                }
                None => {
                    let why = imp.note(Scenario::S1OneToOne).unwrap_or("does not apply");
                    println!("| {mib} MiB | {} | – | – | – | – ({why}) | – |", imp.name());
                }
            }
        }
        let (unchanged, per_msg, lost) = tokio_memq_shared_bytes(mib << 20, messages);
        if unchanged < messages - lost {
            copies += messages - lost - unchanged;
        }
        println!(
            "| {mib} MiB | tokio-memq publish_shared_bytes | {messages} | {} | {} | {} | {lost} |",
            fmt_nanos(per_msg.as_nanos() as f64),
            fmt_rate(1e9 / per_msg.as_nanos().max(1) as f64),
            if unchanged == messages - lost {
                format!("yes ({unchanged}/{messages})")
            } else {
                format!("NO: {} copied/changed", messages - lost - unchanged)
            },
        );
    }
    if copies > 0 {
        eprintln!("large_object_test: {copies} payload(s) arrived copied or changed");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// tokio-memq's own "zero-copy" path: `publish_shared_bytes(Arc<Vec<u8>>)`, one message in
/// flight at a time. Returns (payloads that arrived unchanged, time per message, lost).
fn tokio_memq_shared_bytes(size: usize, messages: u64) -> (u64, Duration, u64) {
    use tokio_memq::mq::{MessageSubscriber, SerializationFormat, TopicOptions};

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("build tokio runtime");
    // ASCII, so its log preview (which slices the payload as text) cannot panic.
    let data: Arc<Vec<u8>> = Arc::new((0..size).map(|i| b'a' + (i % 26) as u8).collect());
    let result = rt.block_on(async {
        let mq = tokio_memq::MessageQueue::new();
        let opts = TopicOptions {
            max_messages: Some(1024),
            ..TopicOptions::default()
        };
        let sub = mq
            .subscriber_with_options("big".to_owned(), opts)
            .await
            .expect("subscribe");
        let publisher = mq.publisher("big".to_owned());
        let (mut unchanged, mut lost) = (0, 0);
        let start = Instant::now();
        for _ in 0..messages {
            publisher
                .publish_shared_bytes(data.clone(), SerializationFormat::Bincode)
                .await
                .expect("publish");
            match sub.recv_timeout(Duration::from_secs(5)).await {
                Ok(Some(msg)) => {
                    let bytes = msg.payload_bytes();
                    if bytes.as_ptr() == data.as_ptr() && bytes.len() == data.len() {
                        unchanged += 1;
                    }
                }
                _ => lost += 1,
            }
        }
        (unchanged, start.elapsed() / messages.max(1) as u32, lost)
    });
    rt.shutdown_background();
    result
}
