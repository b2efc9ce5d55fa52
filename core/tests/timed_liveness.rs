//! Liveness of explicit-ack members under `max_in_flight` when time moves: four members
//! of one group wait, hold deliveries (one at a time or in batches), settle them (ack,
//! nack, drop, touch, nack after a delay, reject), give up waiting, leave and are
//! replaced, while messages are published and a manual clock moves, with a timer that
//! rings exactly when the clock reaches its time. Topics vary: with a TTL, with a small
//! dead-letter topic that fills up (`max_deliveries` 3), with `DropOldest` on 8 slots.
//!
//! After every clock move, and once more at the end (when nothing is published or
//! settled any more and the clock alone runs on for 100 ms), woken members are served
//! until none is left woken; then, if a member still waits, a probe member of the same
//! group (which never waits) must find nothing to take, and its look must wake nobody.
//! A member left asleep next to a message it could take (a lease that ran out, a delay
//! that passed, a slot that opened) fails the case.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::Duration;

use memq_core::{AckConfig, AckConsumer, Delivery, ManualClock, StartAt, Topic, TopicConfig};
use proptest::prelude::*;

use crate::fuzz_support;
use fuzz_support::{next_values, settle, ExactTimer, Wakes};

/// What the case does next.
#[derive(Debug, Clone)]
enum Op {
    /// Publishes 1 to 3 messages.
    Publish(usize),
    /// Member i starts a receive (if it has none) and polls it once.
    Wait(usize),
    /// Polls every receive that was woken.
    Serve,
    /// Member i drops its receive.
    Cancel(usize),
    /// A member takes one without waiting and holds it.
    Hold(usize),
    /// A held delivery: ack 0, nack 1, drop 2, touch 3, nack_after(1..4 ms) 4.
    Settle(usize, u8),
    /// Moves the clock this many milliseconds and rings what is due.
    Advance(u64),
    /// A held delivery is rejected (dead-lettered).
    Reject(usize),
    /// Member i leaves (its receive dropped, then the member) and a new one joins.
    Rejoin(usize),
    /// A member takes a batch without waiting.
    HoldMany(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    let i = 0usize..4;
    prop_oneof![
        3 => (1usize..=3).prop_map(Op::Publish),
        4 => i.clone().prop_map(Op::Wait),
        3 => Just(Op::Serve),
        1 => i.clone().prop_map(Op::Cancel),
        3 => i.clone().prop_map(Op::Hold),
        3 => (0usize..6, 0u8..5).prop_map(|(h, a)| Op::Settle(h, a)),
        3 => (1u64..12).prop_map(Op::Advance),
        1 => (0usize..6).prop_map(Op::Reject),
        1 => i.clone().prop_map(Op::Rejoin),
        1 => (i.clone(), 1usize..4).prop_map(|(a, b)| Op::HoldMany(a, b)),
    ]
}

type Receiving = Pin<Box<dyn Future<Output = ()>>>;
struct Wait {
    fut: Receiving,
    wakes: Arc<Wakes>,
    waker: Waker,
}
struct Member {
    r: Rc<RefCell<AckConsumer<u64>>>,
    wait: Option<Wait>,
}

#[allow(clippy::await_holding_refcell_ref)]
fn recv(r: Rc<RefCell<AckConsumer<u64>>>, held: Rc<RefCell<Vec<Delivery<u64>>>>) -> Receiving {
    Box::pin(async move {
        let mut m = r.borrow_mut();
        if let Ok(d) = m.recv().await {
            held.borrow_mut().push(d);
        }
    })
}

fn run(max_in_flight: usize, variant: u8, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let clock = Arc::new(ManualClock::new());
    let timer = Arc::new(ExactTimer::new(clock.clone()));
    let mut tc = TopicConfig::new(if variant & 4 != 0 { 8 } else { 1024 }).clock(clock.clone());
    if variant & 1 != 0 {
        tc = tc.ttl(Duration::from_millis(25));
    }
    if variant & 4 != 0 {
        tc = tc.overflow(memq_core::Overflow::DropOldest);
    }
    let topic = Topic::<u64>::new(tc).unwrap();
    let dlq = Topic::<memq_core::DeadLetter<u64>>::with_capacity(2).unwrap();
    let cfg = || {
        let c = AckConfig::new()
            .ack_wait(Duration::from_millis(10))
            .max_in_flight(max_in_flight)
            .max_deliveries(3)
            .clock(clock.clone())
            .timer(timer.clone());
        if variant & 2 != 0 {
            c.dead_letter(dlq.clone())
        } else {
            c
        }
    };
    let held: Rc<RefCell<Vec<Delivery<u64>>>> = Rc::new(RefCell::new(Vec::new()));
    let mut members: Vec<Member> = (0..4)
        .map(|_| Member {
            r: Rc::new(RefCell::new(
                topic.group_acked("a", StartAt::Earliest, cfg()).unwrap(),
            )),
            wait: None,
        })
        .collect();
    let mut probe = topic.group_acked("a", StartAt::Earliest, cfg()).unwrap();
    let mut next = 0u64;
    let mut log: Vec<String> = Vec::new();
    for op in ops {
        log.push(format!("{op:?}"));
        match op {
            Op::Publish(n) => {
                for v in next_values(&mut next, n) {
                    let _ = topic.try_publish(v);
                }
            }
            Op::Wait(i) => {
                let m = &mut members[i];
                if m.wait.is_none() {
                    let wakes = Arc::new(Wakes::default());
                    let mut w = Wait {
                        fut: recv(m.r.clone(), held.clone()),
                        waker: Waker::from(wakes.clone()),
                        wakes,
                    };
                    if w.fut
                        .as_mut()
                        .poll(&mut Context::from_waker(&w.waker))
                        .is_pending()
                    {
                        m.wait = Some(w);
                    }
                }
            }
            Op::Serve => {
                serve(&mut members);
            }
            Op::Cancel(i) => members[i].wait = None,
            Op::Hold(i) => {
                if members[i].wait.is_none() {
                    if let Ok(d) = members[i].r.borrow_mut().try_recv() {
                        held.borrow_mut().push(d);
                    }
                }
            }
            Op::Settle(h, how) => {
                let mut hl = held.borrow_mut();
                if h < hl.len() {
                    if how == 3 {
                        let _ = hl[h].touch();
                    } else {
                        let d = hl.remove(h);
                        drop(hl);
                        if how == 4 {
                            let _ = d.nack_after(Duration::from_millis(1 + h as u64 % 4));
                        } else {
                            settle(d, how);
                        }
                    }
                }
            }
            Op::Reject(h) => {
                let mut hl = held.borrow_mut();
                if h < hl.len() {
                    let d = hl.remove(h);
                    drop(hl);
                    let _ = d.reject();
                }
            }
            Op::Rejoin(i) => {
                members[i].wait = None;
                let fresh = topic.group_acked("a", StartAt::Earliest, cfg()).unwrap();
                let old = std::mem::replace(&mut members[i].r, Rc::new(RefCell::new(fresh)));
                drop(old);
            }
            Op::HoldMany(i, n) => {
                if members[i].wait.is_none() {
                    let mut buf = Vec::new();
                    let _ = members[i].r.borrow_mut().try_recv_many(&mut buf, n);
                    held.borrow_mut().extend(buf);
                }
            }
            Op::Advance(ms) => {
                timer.advance(Duration::from_millis(ms));
                nothing_left_beside_sleepers(&mut members, &mut probe, &log)?;
            }
        }
    }
    // No more publishes or settles: the clock alone (and the wake-ups it brings) must get
    // every waiting member to what it can take.
    for _ in 0..100 {
        timer.advance(Duration::from_millis(1));
        serve(&mut members);
    }
    nothing_left_beside_sleepers(&mut members, &mut probe, &log)
}

/// Polls every receive that was woken since it was last polled; returns how many.
fn serve(members: &mut [Member]) -> usize {
    let mut served = 0;
    for m in members {
        if let Some(w) = m.wait.as_mut() {
            if w.wakes.0.swap(0, Ordering::SeqCst) > 0 {
                served += 1;
                if w.fut
                    .as_mut()
                    .poll(&mut Context::from_waker(&w.waker))
                    .is_ready()
                {
                    m.wait = None;
                }
            }
        }
    }
    served
}

/// Serves woken members until none is left woken, then: if some member still waits, a
/// probe member of the group must find nothing to take (a member asleep next to
/// something it could take fails), and its look must wake nobody (the members left
/// waiting had a timer set for every deadline, or a member that took a message would
/// have woken one of them to set it).
fn nothing_left_beside_sleepers(
    members: &mut [Member],
    probe: &mut AckConsumer<u64>,
    log: &[String],
) -> Result<(), TestCaseError> {
    let mut rounds = 0;
    while serve(members) > 0 {
        rounds += 1;
        prop_assert!(rounds < 100, "members woken over and over; ops {:?}", log);
    }
    let asleep = members.iter().filter(|m| m.wait.is_some()).count();
    if asleep == 0 {
        return Ok(());
    }
    let mut got = probe.try_recv();
    if matches!(got, Err(memq_core::TryRecvError::Lagged(_))) {
        got = probe.try_recv();
    }
    prop_assert!(
        got.is_err(),
        "{} members asleep, and the probe took {:?}; ops {:?}",
        asleep,
        got.map(|d| *d.value()),
        log
    );
    let woken = members
        .iter()
        .filter(|m| {
            m.wait
                .as_ref()
                .is_some_and(|w| w.wakes.0.load(Ordering::SeqCst) > 0)
        })
        .count();
    prop_assert!(
        woken == 0,
        "the probe's look woke {} of {} waiting members: none had a timer for a deadline; ops {:?}",
        woken,
        asleep,
        log
    );
    Ok(())
}

proptest! {
    #![proptest_config(fuzz_support::config())]
    #[test]
    fn members_at_the_limit_are_woken_when_something_is_there(
        max_in_flight in 1usize..4,
        variant in 0u8..8,
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        run(max_in_flight, variant, ops)?;
    }
}
