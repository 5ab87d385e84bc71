//! Where this broker's idempotent producers get their ids: the current
//! block (krabka-controller's `ProducerIdBlocks`), refilled by one caller
//! at a time, so a burst of InitProducerIds at the end of a block reserves
//! one new block rather than one each.

use std::future::Future;
use std::ops::Range;
use std::time::Duration;

use krabka_controller::producer_ids::ProducerIdBlocks;
use tokio::time::Instant;

/// After a failed refill, how long callers get its error without asking
/// again (Kafka's broker backs off 50 ms between AllocateProducerIds).
const RETRY_BACKOFF: Duration = Duration::from_millis(50);

pub struct ProducerIdSource {
    blocks: ProducerIdBlocks,
    /// Held by the one caller refilling; the last refill's failure.
    refill: tokio::sync::Mutex<Option<Failure>>,
}

struct Failure {
    at: Instant,
    reason: String,
}

impl ProducerIdSource {
    pub fn new(node_id: i32) -> Self {
        ProducerIdSource { blocks: ProducerIdBlocks::new(node_id), refill: tokio::sync::Mutex::new(None) }
    }

    /// The next producer id of the block at hand, None when it is used up
    /// (the caller refills it with [`next_id`](Self::next_id)).
    pub fn try_next(&self) -> Option<i64> {
        self.blocks.take()
    }

    /// The next producer id; when the block is used up, `reserve` gets the
    /// next one (committing it locally or asking the active controller).
    /// Callers that waited on a refill that failed get its error at once,
    /// as do those within `RETRY_BACKOFF` of it: a controller that cannot
    /// be reached is not asked once per waiting producer in turn.
    pub async fn next_id<F>(&self, reserve: impl FnOnce() -> F) -> Result<i64, String>
    where
        F: Future<Output = Result<Range<i64>, String>>,
    {
        if let Some(id) = self.blocks.take() {
            return Ok(id);
        }
        let asked = Instant::now();
        let mut last_failure = self.refill.lock().await;
        // Whoever held the lock before may have refilled the block.
        if let Some(id) = self.blocks.take() {
            return Ok(id);
        }
        if let Some(failure) = last_failure.as_ref() {
            if failure.at >= asked || failure.at.elapsed() < RETRY_BACKOFF {
                return Err(failure.reason.clone());
            }
        }
        let taken = match reserve().await {
            Ok(block) => self.blocks.take_from(block),
            Err(reason) => Err(reason),
        };
        *last_failure = taken.as_ref().err().map(|reason| Failure { at: Instant::now(), reason: reason.clone() });
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[tokio::test]
    async fn concurrent_callers_at_the_end_of_a_block_reserve_one_block() {
        let source = Arc::new(ProducerIdSource::new(1));
        let reserved = Arc::new(AtomicUsize::new(0));
        let callers: Vec<_> = (0..8)
            .map(|_| {
                let (source, reserved) = (Arc::clone(&source), Arc::clone(&reserved));
                tokio::spawn(async move {
                    source
                        .next_id(|| async {
                            reserved.fetch_add(1, Ordering::SeqCst);
                            tokio::task::yield_now().await;
                            Ok(100..110)
                        })
                        .await
                })
            })
            .collect();
        let mut ids = Vec::new();
        for caller in callers {
            ids.push(caller.await.unwrap().unwrap());
        }
        ids.sort();
        assert_eq!(ids, (100..108).collect::<Vec<_>>());
        assert_eq!(reserved.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_failed_reservation_hands_out_nothing_and_a_caller_after_the_backoff_tries_again() {
        let source = ProducerIdSource::new(1);
        let fail = || async { Err::<Range<i64>, _>("no controller".to_string()) };
        assert_eq!(source.next_id(fail).await, Err("no controller".into()));
        // Within the backoff the failure is the answer; reserve is not called.
        let unasked = || async { unreachable!("asked again within the backoff") };
        assert_eq!(source.next_id(unasked).await, Err("no controller".into()));
        tokio::time::sleep(RETRY_BACKOFF).await;
        assert_eq!(source.next_id(|| async { Ok(7..9) }).await, Ok(7));
        assert_eq!(source.next_id(unasked).await, Ok(8));
    }

    #[tokio::test]
    async fn callers_waiting_on_a_refill_that_fails_share_its_failure() {
        let source = Arc::new(ProducerIdSource::new(1));
        let asked = Arc::new(AtomicUsize::new(0));
        let callers: Vec<_> = (0..8)
            .map(|_| {
                let (source, asked) = (Arc::clone(&source), Arc::clone(&asked));
                tokio::spawn(async move {
                    source
                        .next_id(|| async {
                            asked.fetch_add(1, Ordering::SeqCst);
                            // A controller that does not answer for a while.
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            Err::<Range<i64>, _>("timed out".to_string())
                        })
                        .await
                })
            })
            .collect();
        for caller in callers {
            assert_eq!(caller.await.unwrap(), Err("timed out".into()));
        }
        assert_eq!(asked.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_block_below_one_taken_before_is_refused() {
        let source = ProducerIdSource::new(1);
        assert_eq!(source.next_id(|| async { Ok(10..11) }).await, Ok(10));
        let refused = source.next_id(|| async { Ok(5..20) }).await.unwrap_err();
        assert!(refused.contains("not monotonic"), "{refused}");
    }
}
