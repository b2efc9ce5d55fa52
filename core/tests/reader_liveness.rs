//! Liveness of readers, by random operations: a reader waiting in `recv` is woken once
//! there is something for it. Publishes (single or batches), subscribers and members of a
//! consumer group coming and going, receives started, served, cancelled (a dropped
//! future, as under a timeout), taken without waiting, or polled once as a `Stream` and
//! then dropped (a registration that nobody withdraws), and in some runs a close. After
//! every operation:
//! - a subscriber still waiting, not woken, has seen no publish since it started to wait;
//! - if a member of the group is waiting and not woken, the group holds no more messages
//!   than the members that were woken and not served yet will take: a probe (a member
//!   not waiting, or a new one) takes one more than that, and must not get it;
//! - once the topic is closed, every waiting subscriber has been woken, and a member of
//!   each group (of the explicit-ack group once no delivery is out, as one may come
//!   back), which wakes the others if it finds the group drained.
//!
//! `PROPTEST_CASES` sets the number of sequences (1,000 by default).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Waker};

use futures_core::Stream;
use memq_core::{
    AckConfig, AckConsumer, Consumer, Delivery, Overflow, StartAt, Subscriber, Topic, TopicConfig,
    TryRecvError,
};
use proptest::prelude::*;

use crate::fuzz_support;
use fuzz_support::{next_values, settle, Wakes};

#[derive(Debug, Clone)]
enum Op {
    /// Publish this many messages (1: `try_publish`, more: `try_publish_batch`).
    Publish(usize),
    /// Serve every woken receive.
    Serve,
    Subscribe,
    DropSubscriber(usize),
    /// Start a receive on the i-th subscriber (if it has none), polled once.
    SubWait(usize),
    SubServe(usize),
    SubCancel(usize),
    SubTry(usize),
    /// Poll the subscriber once as a `Stream`, and never again.
    SubStream(usize),
    Join,
    Leave(usize),
    MemberWait(usize),
    MemberServe(usize),
    MemberCancel(usize),
    MemberTry(usize),
    MemberTryMany(usize, usize),
    MemberStream(usize),
    AckJoin,
    AckLeave(usize),
    AckWait(usize),
    AckServe(usize),
    AckCancel(usize),
    /// A member of the explicit-ack group takes a delivery without waiting, and acks it
    /// (0), nacks it (1), drops it (2) or keeps it (3).
    AckTry(usize, u8),
    /// A kept delivery is acked (0), nacked (1) or dropped (2).
    AckSettle(usize, u8),
}

fn op() -> impl Strategy<Value = Op> {
    let i = 0usize..4;
    prop_oneof![
        6 => (1usize..=4).prop_map(Op::Publish),
        3 => Just(Op::Serve),
        1 => Just(Op::Subscribe),
        1 => i.clone().prop_map(Op::DropSubscriber),
        3 => i.clone().prop_map(Op::SubWait),
        2 => i.clone().prop_map(Op::SubServe),
        1 => i.clone().prop_map(Op::SubCancel),
        2 => i.clone().prop_map(Op::SubTry),
        1 => i.clone().prop_map(Op::SubStream),
        2 => Just(Op::Join),
        1 => i.clone().prop_map(Op::Leave),
        4 => i.clone().prop_map(Op::MemberWait),
        3 => i.clone().prop_map(Op::MemberServe),
        2 => i.clone().prop_map(Op::MemberCancel),
        2 => i.clone().prop_map(Op::MemberTry),
        1 => (i.clone(), 1usize..6).prop_map(|(m, n)| Op::MemberTryMany(m, n)),
        2 => i.clone().prop_map(Op::MemberStream),
        1 => Just(Op::AckJoin),
        1 => i.clone().prop_map(Op::AckLeave),
        3 => i.clone().prop_map(Op::AckWait),
        2 => i.clone().prop_map(Op::AckServe),
        1 => i.clone().prop_map(Op::AckCancel),
        2 => (i.clone(), 0u8..4).prop_map(|(m, h)| Op::AckTry(m, h)),
        2 => (i, 0u8..3).prop_map(|(k, h)| Op::AckSettle(k, h)),
    ]
}

/// A receive future that owns a share of its reader.
type Receiving = Pin<Box<dyn Future<Output = ()>>>;

/// A receive in progress: its future (which borrows its reader while it lives), its
/// wake-up count and waker, and how many messages had been published when it last
/// started to wait.
struct Wait {
    fut: Receiving,
    wakes: Arc<Wakes>,
    waker: Waker,
    published: u64,
}

impl Wait {
    fn woken(&self) -> bool {
        self.wakes.0.load(Ordering::SeqCst) > 0
    }

    /// Polls it: whether it is done.
    fn poll(&mut self) -> bool {
        self.fut
            .as_mut()
            .poll(&mut Context::from_waker(&self.waker))
            .is_ready()
    }
}

/// A subscriber or a group member, and its receive in progress, if any.
struct Reader<R> {
    r: Rc<RefCell<R>>,
    wait: Option<Wait>,
}

impl<R> Reader<R> {
    fn new(r: R) -> Self {
        Self {
            r: Rc::new(RefCell::new(r)),
            wait: None,
        }
    }

    /// Starts a receive made by `recv` (if none is in progress) and polls it once.
    fn start(&mut self, published: u64, recv: fn(Rc<RefCell<R>>) -> Receiving) {
        if self.wait.is_some() {
            return;
        }
        let wakes = Arc::new(Wakes::default());
        let mut wait = Wait {
            fut: recv(self.r.clone()),
            waker: Waker::from(wakes.clone()),
            wakes,
            published,
        };
        if !wait.poll() {
            self.wait = Some(wait);
        }
    }

    /// Polls its receive if it was woken: whether it was.
    fn serve(&mut self, published: u64) -> bool {
        let Some(wait) = self.wait.as_mut() else {
            return false;
        };
        if wait.wakes.0.swap(0, Ordering::SeqCst) == 0 {
            return false;
        }
        if wait.poll() {
            self.wait = None;
        } else {
            wait.published = published;
        }
        true
    }

    /// The reader, if no receive borrows it.
    fn idle(&mut self) -> Option<std::cell::RefMut<'_, R>> {
        self.wait.is_none().then(|| self.r.borrow_mut())
    }
}

// The borrow lasts as long as the receive, as `&mut` does for a `recv()` future: the
// test only touches a reader whose receive is not in progress (`Reader::idle`).
#[allow(clippy::await_holding_refcell_ref)]
fn sub_recv(r: Rc<RefCell<Subscriber<u64>>>) -> Receiving {
    Box::pin(async move {
        let mut s = r.borrow_mut();
        let _ = s.recv().await;
    })
}

#[allow(clippy::await_holding_refcell_ref)]
fn member_recv(r: Rc<RefCell<Consumer<u64>>>) -> Receiving {
    Box::pin(async move {
        let mut m = r.borrow_mut();
        let _ = m.recv().await;
    })
}

#[allow(clippy::await_holding_refcell_ref)]
fn ack_recv(r: Rc<RefCell<AckConsumer<u64>>>) -> Receiving {
    // A delivery taken here is dropped at once: back to the group, for someone else.
    Box::pin(async move {
        let mut m = r.borrow_mut();
        let _ = m.recv().await;
    })
}

/// Polls `s` once as a `Stream`, with a waker nobody looks at.
fn poll_once_as_stream<S: Stream + Unpin>(s: &mut S) {
    let waker = Waker::from(Arc::new(Wakes::default()));
    let _ = Pin::new(s).poll_next(&mut Context::from_waker(&waker));
}

/// Runs `ops` on a one-partition `DropOldest` topic of `capacity` slots, closing it after
/// operation `close_at` (if any).
fn run(
    capacity: usize,
    release: bool,
    close_at: Option<usize>,
    ops: Vec<Op>,
) -> Result<(), TestCaseError> {
    let topic = Topic::<u64>::new(
        TopicConfig::new(capacity)
            .overflow(Overflow::DropOldest)
            .release_on_read(release),
    )
    .unwrap();
    let mut subs: Vec<Reader<Subscriber<u64>>> = Vec::new();
    let mut members: Vec<Reader<Consumer<u64>>> = Vec::new();
    let mut acked: Vec<Reader<AckConsumer<u64>>> = Vec::new();
    let mut kept: Vec<Delivery<u64>> = Vec::new();
    let mut published = 0u64;
    let mut next = 0u64;
    for (k, op) in ops.into_iter().enumerate() {
        let last = format!("{op:?}");
        match op {
            Op::Publish(n) => {
                let values = next_values(&mut next, n);
                let ok = if n == 1 {
                    topic.try_publish(values[0]).is_ok()
                } else {
                    topic.try_publish_batch(values).is_ok()
                };
                if ok {
                    published += n as u64;
                }
            }
            Op::Serve => {
                subs.iter_mut().for_each(|s| {
                    s.serve(published);
                });
                members.iter_mut().for_each(|m| {
                    m.serve(published);
                });
                acked.iter_mut().for_each(|m| {
                    m.serve(published);
                });
            }
            Op::Subscribe => {
                if let Ok(s) = topic.subscribe(StartAt::Earliest) {
                    subs.push(Reader::new(s));
                }
            }
            Op::DropSubscriber(i) => {
                if i < subs.len() {
                    subs.remove(i);
                }
            }
            Op::SubWait(i) => {
                if let Some(s) = subs.get_mut(i) {
                    s.start(published, sub_recv);
                }
            }
            Op::SubServe(i) => {
                if let Some(s) = subs.get_mut(i) {
                    s.serve(published);
                }
            }
            Op::SubCancel(i) => {
                if let Some(s) = subs.get_mut(i) {
                    s.wait = None;
                }
            }
            Op::SubTry(i) => {
                if let Some(mut s) = subs.get_mut(i).and_then(Reader::idle) {
                    let _ = s.try_recv();
                }
            }
            Op::SubStream(i) => {
                if let Some(mut s) = subs.get_mut(i).and_then(Reader::idle) {
                    poll_once_as_stream(&mut *s);
                }
            }
            Op::Join => {
                if let Ok(m) = topic.group("g", StartAt::Earliest) {
                    members.push(Reader::new(m));
                }
            }
            Op::Leave(i) => {
                if i < members.len() {
                    members.remove(i);
                }
            }
            Op::MemberWait(i) => {
                if let Some(m) = members.get_mut(i) {
                    m.start(published, member_recv);
                }
            }
            Op::MemberServe(i) => {
                if let Some(m) = members.get_mut(i) {
                    m.serve(published);
                }
            }
            Op::MemberCancel(i) => {
                if let Some(m) = members.get_mut(i) {
                    m.wait = None;
                }
            }
            Op::MemberTry(i) => {
                if let Some(mut m) = members.get_mut(i).and_then(Reader::idle) {
                    let _ = m.try_recv();
                }
            }
            Op::MemberTryMany(i, n) => {
                if let Some(mut m) = members.get_mut(i).and_then(Reader::idle) {
                    let _ = m.try_recv_many(&mut Vec::new(), n);
                }
            }
            Op::MemberStream(i) => {
                if let Some(mut m) = members.get_mut(i).and_then(Reader::idle) {
                    poll_once_as_stream(&mut *m);
                }
            }
            Op::AckJoin => {
                if let Ok(m) =
                    topic.group_acked("a", StartAt::Earliest, AckConfig::new().max_in_flight(2))
                {
                    acked.push(Reader::new(m));
                }
            }
            Op::AckLeave(i) => {
                if i < acked.len() {
                    acked.remove(i);
                }
            }
            Op::AckWait(i) => {
                if let Some(m) = acked.get_mut(i) {
                    m.start(published, ack_recv);
                }
            }
            Op::AckServe(i) => {
                if let Some(m) = acked.get_mut(i) {
                    m.serve(published);
                }
            }
            Op::AckCancel(i) => {
                if let Some(m) = acked.get_mut(i) {
                    m.wait = None;
                }
            }
            Op::AckTry(i, how) => {
                if let Some(mut m) = acked.get_mut(i).and_then(Reader::idle) {
                    if let Ok(d) = m.try_recv() {
                        if how == 3 {
                            kept.push(d);
                        } else {
                            settle(d, how);
                        }
                    }
                }
            }
            Op::AckSettle(k, how) => {
                if k < kept.len() {
                    settle(kept.remove(k), how);
                }
            }
        }
        if close_at == Some(k) {
            topic.close();
        }
        readers_are_woken(
            &topic,
            &mut subs,
            &mut members,
            &mut acked,
            !kept.is_empty(),
            published,
            &last,
        )?;
    }
    Ok(())
}

/// The checks listed at the top, after operation `last`.
fn readers_are_woken(
    topic: &Topic<u64>,
    subs: &mut [Reader<Subscriber<u64>>],
    members: &mut Vec<Reader<Consumer<u64>>>,
    acked: &mut Vec<Reader<AckConsumer<u64>>>,
    in_flight: bool,
    published: u64,
    last: &str,
) -> Result<(), TestCaseError> {
    let closed = topic.is_closed();
    for (i, s) in subs.iter().enumerate() {
        if let Some(w) = &s.wait {
            prop_assert!(
                w.woken() || (w.published == published && !closed),
                "after {}: subscriber {} waits since {} messages were published, now {} \
                 (closed: {}), and was not woken",
                last,
                i,
                w.published,
                published,
                closed
            );
        }
    }
    let join = || topic.group("g", StartAt::Earliest).ok();
    let take = |m: &mut Consumer<u64>| match m.try_recv() {
        Ok(_) => Some(true),
        Err(TryRecvError::Lagged(_)) => Some(false),
        Err(_) => None,
    };
    group_is_served("g", members, closed, false, join, take, last)?;
    // The probe holds what it takes until the check is over, then drops it (back to the
    // group, which wakes a member for it).
    let taken = RefCell::new(Vec::new());
    let join = || {
        topic
            .group_acked("a", StartAt::Earliest, AckConfig::new().max_in_flight(2))
            .ok()
    };
    let take = |m: &mut AckConsumer<u64>| match m.try_recv() {
        Ok(d) => {
            taken.borrow_mut().push(d);
            Some(true)
        }
        Err(TryRecvError::Lagged(_)) => Some(false),
        Err(_) => None,
    };
    group_is_served("a", acked, closed, in_flight, join, take, last)?;
    drop(taken);
    Ok(())
}

/// The check of group `name` (see the top): if a member waits unwoken, a probe (a member
/// not waiting, or one made by `join`) gets no more messages from the group, by `take`
/// (`Some(true)` for a message, `Some(false)` for a lag report, `None` for nothing), than
/// there are woken members not served yet. On a closed topic some member must have been
/// woken, unless a delivery is `in_flight` (it may come back).
fn group_is_served<C>(
    name: &str,
    members: &mut Vec<Reader<C>>,
    closed: bool,
    in_flight: bool,
    join: impl FnOnce() -> Option<C>,
    mut take: impl FnMut(&mut C) -> Option<bool>,
    last: &str,
) -> Result<(), TestCaseError> {
    let waiting = |m: &Reader<C>, woken: bool| m.wait.as_ref().is_some_and(|w| w.woken() == woken);
    let asleep = members.iter().filter(|m| waiting(m, false)).count();
    if asleep == 0 {
        return Ok(());
    }
    let woken = members.iter().filter(|m| waiting(m, true)).count();
    if closed {
        // A delivery still out may come back, and members wait for it; a member woken
        // and not served yet (say for a nacked message whose value the log no longer
        // holds) may be the one to find the group drained, and then wakes the others.
        prop_assert!(
            in_flight || woken > 0,
            "after {}: {} members of {} wait on a closed topic, none woken",
            last,
            asleep,
            name
        );
        return Ok(());
    }
    if members.iter().all(|m| m.wait.is_some()) {
        let Some(m) = join() else {
            return Ok(());
        };
        members.push(Reader::new(m));
    }
    let Some(probe) = members.iter_mut().find(|m| m.wait.is_none()) else {
        return Ok(());
    };
    let mut probe = probe.r.borrow_mut();
    let mut got = 0;
    for _ in 0..=woken + 64 {
        match take(&mut probe) {
            Some(true) => got += 1,
            Some(false) => continue,
            None => break,
        }
        if got > woken {
            break;
        }
    }
    prop_assert!(
        got <= woken,
        "after {}: {} members of {} wait unwoken and {} woken, yet the group had {} messages \
         for a probe",
        last,
        asleep,
        name,
        woken,
        got
    );
    Ok(())
}

proptest! {
    #![proptest_config(fuzz_support::config())]

    #[test]
    fn waiting_readers_are_woken_once_there_is_something_for_them(
        capacity in prop_oneof![1usize..6, 30usize..40],
        release in any::<bool>(),
        close_at in proptest::option::weighted(0.3, 0usize..150),
        ops in proptest::collection::vec(op(), 1..150),
    ) {
        run(capacity, release, close_at, ops)?;
    }
}
