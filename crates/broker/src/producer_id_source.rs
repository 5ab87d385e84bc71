//! Where this broker's idempotent producers get their ids: the current
//! block (krabka-controller's `ProducerIdBlocks`), refilled by one caller
//! at a time, so a burst of InitProducerIds at the end of a block reserves
//! one new block rather than one each.

use std::future::Future;
use std::ops::Range;

use krabka_controller::producer_ids::ProducerIdBlocks;

pub struct ProducerIdSource {
    blocks: ProducerIdBlocks,
    refill: tokio::sync::Mutex<()>,
}

impl ProducerIdSource {
    pub fn new(node_id: i32) -> Self {
        ProducerIdSource { blocks: ProducerIdBlocks::new(node_id), refill: tokio::sync::Mutex::new(()) }
    }

    /// The next producer id; when the block is used up, `reserve` gets the
    /// next one (committing it locally or asking the active controller).
    pub async fn next_id<E, F>(&self, reserve: impl FnOnce() -> F) -> Result<i64, E>
    where
        F: Future<Output = Result<Range<i64>, E>>,
    {
        if let Some(id) = self.blocks.take() {
            return Ok(id);
        }
        let _refilling = self.refill.lock().await;
        // Whoever held the lock before may have refilled the block.
        if let Some(id) = self.blocks.take() {
            return Ok(id);
        }
        Ok(self.blocks.take_from(reserve().await?))
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
                            Ok::<_, ()>(100..110)
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
    async fn a_failed_reservation_hands_out_nothing_and_the_next_caller_tries_again() {
        let source = ProducerIdSource::new(1);
        assert_eq!(source.next_id(|| async { Err::<Range<i64>, _>("no controller") }).await, Err("no controller"));
        assert_eq!(source.next_id(|| async { Ok::<_, &str>(7..9) }).await, Ok(7));
    }
}
