//! Unit tests of the wait lists (`super`): notification order, extras, alarms.

use super::*;
use alloc::sync::Arc;
use alloc::task::Wake;
use alloc::vec;
use core::sync::atomic::{AtomicUsize, Ordering};

/// A waker that counts its wake-ups.
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn waiter() -> (Arc<Count>, Waker, Option<WaitKey>) {
    let count = Arc::new(Count(AtomicUsize::new(0)));
    let waker = Waker::from(count.clone());
    (count, waker, None)
}

fn woken(c: &Count) -> usize {
    c.0.load(Ordering::Relaxed)
}

/// `notify_uncovered` after `by`: how many it took.
fn uncovered(list: &mut WaiterList, by: u64) -> usize {
    let mut wl = WakeList::new();
    let n = list.notify_uncovered(usize::MAX, by, &mut wl);
    wl.wake_all();
    n
}

/// The counts, wakers and (unused) keys of [`waiter`].
type Waiters = Vec<(Arc<Count>, Waker, Option<WaitKey>)>;

/// A list where three waiters wait (without alarms), in order, with their keys.
fn three_waiting() -> (WaiterList, Waiters, Vec<Option<WaitKey>>) {
    let mut list = WaiterList::new();
    let ws: Waiters = (0..3).map(|_| waiter()).collect();
    let mut keys: Vec<Option<WaitKey>> = vec![None; 3];
    for (k, (_, w, _)) in keys.iter_mut().zip(&ws) {
        list.register(k, w, &mut SpentWakers::new());
    }
    (list, ws, keys)
}

/// How often each of `ws` was woken.
fn counts(ws: &Waiters) -> Vec<usize> {
    ws.iter().map(|(c, _, _)| woken(c)).collect()
}

/// `notify_one` into a fresh wake list, woken at once: whether it took a turn.
fn one(list: &mut WaiterList) -> bool {
    let mut wl = WakeList::new();
    let taken = list.notify_one(&mut wl);
    wl.wake_all();
    taken
}

#[test]
fn notify_one_passes_over_stale_entries_and_wakes_in_line() {
    let (mut list, ws, mut keys) = three_waiting();
    // The first leaves its entry behind, stale; the second waits again, keeping its
    // place; the first comes back behind the third.
    assert!(!list.settle(keys[0], &mut SpentWakers::new()));
    list.register(&mut keys[1], &ws[1].1, &mut SpentWakers::new());
    list.register(&mut keys[0], &ws[0].1, &mut SpentWakers::new());
    assert!(one(&mut list));
    assert_eq!(counts(&ws), [0, 1, 0]);
    assert!(one(&mut list));
    assert_eq!(counts(&ws), [0, 1, 1]);
    assert!(one(&mut list));
    assert_eq!(counts(&ws), [1, 1, 1]);
    assert!(!one(&mut list));
    assert_eq!(list.waiting(), 0);
    assert_eq!(list.promised(), 3);
}

#[test]
fn notify_one_wakes_extras_in_front_and_takes_the_turn_behind_them() {
    let mut list = WaiterList::new();
    let (x, wx, mut kx) = waiter();
    let (a, wa, mut ka) = waiter();
    let (b, wb, mut kb) = waiter();
    list.register_extra(&mut kx, &wx, &mut SpentWakers::new());
    list.register(&mut ka, &wa, &mut SpentWakers::new());
    list.register(&mut kb, &wb, &mut SpentWakers::new());
    // The extra is woken with the first in line, and takes nobody's turn.
    assert!(one(&mut list));
    assert_eq!((woken(&x), woken(&a), woken(&b)), (1, 1, 0));
    assert!(one(&mut list));
    assert_eq!((woken(&x), woken(&a), woken(&b)), (1, 1, 1));
    // An extra alone in line is woken, and no turn is taken.
    list.register_extra(&mut kx, &wx, &mut SpentWakers::new());
    assert!(!one(&mut list));
    assert_eq!(woken(&x), 2);
    assert_eq!(list.waiting(), 0);
}

#[test]
fn notify_one_into_a_full_wake_list_takes_nothing() {
    let mut list = WaiterList::new();
    let (a, wa, mut ka) = waiter();
    list.register(&mut ka, &wa, &mut SpentWakers::new());
    let mut wl = WakeList::new();
    let filler = Waker::from(Arc::new(Count(AtomicUsize::new(0))));
    for _ in 0..WAKE_LIST {
        wl.push(filler.clone());
    }
    assert!(!list.notify_one(&mut wl));
    assert!(list.is_waiting(ka));
    wl.wake_all();
    assert_eq!(woken(&a), 0);
    assert!(one(&mut list));
    assert_eq!(woken(&a), 1);
}

#[test]
fn notify_uncovered_wakes_exactly_the_waiters_whose_timers_come_too_late() {
    let mut list = WaiterList::new();
    let (a, wa, mut ka) = waiter();
    let (b, wb, mut kb) = waiter();
    list.register_timed(&mut ka, &wa, Some(10), &mut SpentWakers::new());
    list.register_timed(&mut kb, &wb, Some(20), &mut SpentWakers::new());
    // Both timers ring by 20: nobody is woken, however often it is asked.
    for _ in 0..3 {
        assert_eq!(uncovered(&mut list, 20), 0);
    }
    assert_eq!((woken(&a), woken(&b)), (0, 0));
    // By 15, b's timer is too late.
    assert_eq!(uncovered(&mut list, 15), 1);
    assert_eq!((woken(&a), woken(&b)), (0, 1));
    // That scan saw everyone, so the bound is a's 10 now. b comes back with a later
    // timer, and a without one: each raises it, and each is woken.
    assert!(list.settle(kb, &mut SpentWakers::new()));
    list.register_timed(&mut kb, &wb, Some(30), &mut SpentWakers::new());
    assert_eq!(uncovered(&mut list, 25), 1);
    assert_eq!((woken(&a), woken(&b)), (0, 2));
    list.register_timed(&mut ka, &wa, None, &mut SpentWakers::new());
    assert_eq!(uncovered(&mut list, u64::MAX - 1), 1);
    assert_eq!((woken(&a), woken(&b)), (1, 2));
    assert_eq!(list.waiting(), 0);
    assert_eq!(uncovered(&mut list, 0), 0);
    // A waiter that leaves takes nothing with it: the bound only ever errs high.
    list.settle(ka, &mut SpentWakers::new());
    list.settle(kb, &mut SpentWakers::new());
    list.register_timed(&mut ka, &wa, Some(5), &mut SpentWakers::new());
    list.register_timed(&mut kb, &wb, Some(50), &mut SpentWakers::new());
    list.remove(&mut kb);
    assert_eq!(uncovered(&mut list, 10), 0);
    assert_eq!(uncovered(&mut list, 4), 1);
    assert_eq!((woken(&a), woken(&b)), (2, 2));
}

#[test]
fn a_waiter_without_an_alarm_is_uncovered_even_by_the_last_deadline() {
    let mut list = WaiterList::new();
    let (a, wa, mut ka) = waiter();
    let (b, wb, mut kb) = waiter();
    list.register_timed(&mut ka, &wa, Some(u64::MAX), &mut SpentWakers::new());
    list.register_timed(&mut kb, &wb, None, &mut SpentWakers::new());
    assert_eq!(uncovered(&mut list, u64::MAX), 1);
    assert_eq!((woken(&a), woken(&b)), (0, 1));
}

#[test]
fn notify_uncovered_stopped_early_keeps_its_bound() {
    let (mut list, ws, _) = three_waiting();
    // Asked for one: the scan stops before it has seen the others.
    let mut wl = WakeList::new();
    assert_eq!(list.notify_uncovered(1, 0, &mut wl), 1);
    wl.wake_all();
    assert_eq!(uncovered(&mut list, 0), 2);
    assert_eq!(counts(&ws), [1, 1, 1]);
}
