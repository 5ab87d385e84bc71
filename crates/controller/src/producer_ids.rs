//! Producer ids for idempotent producers, handed out from blocks reserved
//! in the metadata log (a `ProducerIdsRecord` per block, as Kafka's
//! controller reserves them), so no id is handed out twice, even across a
//! restart: a restart abandons the rest of its block and reserves the next.

use std::ops::Range;
use std::sync::Mutex;

use krabka_metadata::{MetadataImage, MetadataRecord};
use krabka_protocol::ProducerIdsRecord;

use crate::error::MetadataError;

/// Ids per block: one metadata record per this many producers.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

/// The record that reserves the block after `image`'s last one for
/// `node_id`, and that block (AllocateProducerIds' decision).
pub fn next_block(image: &MetadataImage, node_id: i32) -> (MetadataRecord, Range<i64>) {
    let start = image.next_producer_id_block;
    let block = start..start + PRODUCER_ID_BLOCK_SIZE;
    let record = MetadataRecord::ProducerIds(ProducerIdsRecord {
        broker_id: node_id,
        broker_epoch: 0,
        next_producer_id: block.end,
        ..Default::default()
    });
    (record, block)
}

/// AllocateProducerIds as a plan: the record reserving the next block for
/// `node_id`, and the block.
pub fn plan_allocate_producer_ids(
    image: &MetadataImage,
    node_id: i32,
) -> Result<(Vec<MetadataRecord>, Range<i64>), MetadataError> {
    let (record, block) = next_block(image, node_id);
    Ok((vec![record], block))
}

/// The block this node hands ids from (Kafka's `ProducerIdManager`).
pub struct ProducerIdBlocks {
    node_id: i32,
    /// The ids of the current block not yet handed out (empty at start).
    current: Mutex<Range<i64>>,
}

impl ProducerIdBlocks {
    pub fn new(node_id: i32) -> Self {
        ProducerIdBlocks { node_id, current: Mutex::new(0..0) }
    }

    /// The node whose blocks these are.
    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    /// The next id of the current block, or None when it is used up: the
    /// caller then commits the next block (`plan_allocate_producer_ids`)
    /// and hands it to `take_from`.
    pub fn take(&self) -> Option<i64> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let id = (!current.is_empty()).then_some(current.start)?;
        current.start += 1;
        Some(id)
    }

    /// Takes an id from a newly reserved `block`. When another caller
    /// refilled the current block meanwhile, it is kept and `block` is
    /// abandoned whole: a wasted block is harmless, a reused id is not.
    pub fn take_from(&self, block: Range<i64>) -> i64 {
        debug_assert!(!block.is_empty(), "an empty producer id block");
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.is_empty() {
            *current = block;
        }
        let id = current.start;
        current.start += 1;
        id
    }

    /// Hands out a producer id, calling `reserve` with this node's id to
    /// commit the next block when the current one is used up.
    pub fn allocate<E>(&self, reserve: impl FnOnce(i32) -> Result<Range<i64>, E>) -> Result<i64, E> {
        match self.take() {
            Some(id) => Ok(id),
            None => Ok(self.take_from(reserve(self.node_id)?)),
        }
    }
}
