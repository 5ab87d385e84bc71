//! Producer ids for idempotent producers, handed out from blocks reserved
//! in the metadata log (a `ProducerIdsRecord` per block, as Kafka's
//! controller reserves them), so no id is handed out twice, even across a
//! restart: a restart abandons the rest of its block and reserves the next.

use std::ops::Range;
use std::sync::Mutex;

use krabka_metadata::{MetadataImage, MetadataRecord};
use krabka_protocol::ProducerIdsRecord;

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

    /// Hands out a producer id. When the current block is used up,
    /// `reserve` is called with this node's id to commit the next block
    /// (`Controller::allocate_producer_ids`) and return it.
    pub fn allocate<E>(&self, reserve: impl FnOnce(i32) -> Result<Range<i64>, E>) -> Result<i64, E> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.is_empty() {
            *current = reserve(self.node_id)?;
        }
        let id = current.start;
        current.start += 1;
        Ok(id)
    }
}
