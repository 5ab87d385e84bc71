//! Where parked requests wait for partitions to change: the seed of Kafka's
//! delayed-operation purgatory (today long-polling fetches; later acks=all
//! produces and fetches waiting on a follower-moved high watermark).
//!
//! A parked request holds one [`Waiter`] and registers it with the
//! [`WatchList`] of every partition it waits on. Whatever may let it
//! complete (an append, the partition removed, its log start moved) wakes
//! that partition's list only, so a fetch on A sleeps through any number of
//! appends to B. A wake is a hint, not a completion: the request re-checks
//! its own condition (`fetch.min.bytes`) and parks again if it is not met.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::Notify;

/// A dead registration is pruned when the list has grown to twice what it
/// held at the last prune (and at least this), so a partition that is never
/// appended to keeps no more than about twice its live waiters.
const MIN_PRUNE_AT: usize = 16;

/// One parked request. Dropping it (the request completed) unregisters it
/// from every list, lazily.
#[derive(Debug, Default)]
pub struct Waiter {
    notify: Notify,
    wakeups: AtomicU64,
}

impl Waiter {
    pub fn new() -> Arc<Self> {
        Arc::new(Waiter::default())
    }

    /// Resolves at the next wake, or at once if one came since the last
    /// call: a change that lands between a read and the park is not lost.
    pub async fn woken(&self) {
        self.notify.notified().await;
    }

    /// How many times a watched partition woke this waiter.
    pub fn wakeups(&self) -> u64 {
        self.wakeups.load(Ordering::Relaxed)
    }

    fn wake(&self) {
        self.wakeups.fetch_add(1, Ordering::Relaxed);
        // One permit at most: several wakes before the waiter runs are one.
        self.notify.notify_one();
    }
}

/// The waiters of one partition.
#[derive(Debug, Default)]
pub struct WatchList {
    watchers: Mutex<Watchers>,
}

#[derive(Debug, Default)]
struct Watchers {
    waiters: Vec<Weak<Waiter>>,
    prune_at: usize,
}

impl WatchList {
    /// Registers `waiter` until it is dropped. Registering one waiter twice
    /// wakes it twice per change (harmless, but the caller avoids it).
    pub fn watch(&self, waiter: &Arc<Waiter>) {
        let mut watchers = self.lock();
        if watchers.waiters.len() >= watchers.prune_at {
            watchers.waiters.retain(|w| w.strong_count() > 0);
            watchers.prune_at = (2 * watchers.waiters.len()).max(MIN_PRUNE_AT);
        }
        watchers.waiters.push(Arc::downgrade(waiter));
    }

    /// Wakes every live waiter and forgets the dropped ones.
    pub fn wake_all(&self) {
        let mut watchers = self.lock();
        watchers.waiters.retain(|w| match w.upgrade() {
            Some(waiter) => {
                waiter.wake();
                true
            }
            None => false,
        });
    }

    /// Registrations held, dropped waiters not yet pruned included.
    pub fn registrations(&self) -> usize {
        self.lock().waiters.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Watchers> {
        self.watchers.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    fn is_woken(waiter: &Waiter) -> bool {
        let mut woken = pin!(waiter.woken());
        matches!(woken.as_mut().poll(&mut Context::from_waker(Waker::noop())), Poll::Ready(()))
    }

    #[test]
    fn a_waiter_on_a_sleeps_through_wakes_of_b_and_wakes_on_a() {
        let (a, b) = (WatchList::default(), WatchList::default());
        let waiter = Waiter::new();
        a.watch(&waiter);
        for _ in 0..1_000 {
            b.wake_all();
        }
        assert_eq!(waiter.wakeups(), 0);
        assert!(!is_woken(&waiter));
        a.wake_all();
        assert_eq!(waiter.wakeups(), 1);
        assert!(is_woken(&waiter), "a wake before the wait is kept");
        assert!(!is_woken(&waiter), "and used once");
    }

    #[test]
    fn one_waiter_watches_many_partitions_and_every_waiter_of_one_is_woken() {
        let lists: Vec<WatchList> = (0..3).map(|_| WatchList::default()).collect();
        let (first, second) = (Waiter::new(), Waiter::new());
        lists.iter().for_each(|list| list.watch(&first));
        lists[2].watch(&second);
        lists[1].wake_all();
        assert_eq!((first.wakeups(), second.wakeups()), (1, 0));
        lists[2].wake_all();
        assert_eq!((first.wakeups(), second.wakeups()), (2, 1));
    }

    #[test]
    fn dropped_waiters_are_pruned() {
        let list = WatchList::default();
        for _ in 0..10_000 {
            list.watch(&Waiter::new());
        }
        assert!(list.registrations() <= 2 * MIN_PRUNE_AT, "{} registrations kept", list.registrations());
        let live = Waiter::new();
        list.watch(&live);
        list.wake_all();
        assert_eq!(list.registrations(), 1);
        assert_eq!(live.wakeups(), 1);
    }
}
