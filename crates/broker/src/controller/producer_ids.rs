//! Producer ids for idempotent producers, handed out from blocks reserved
//! in the metadata log (a `ProducerIdsRecord` per block, as Kafka's
//! controller reserves them), so no id is handed out twice, even across a
//! restart: a restart abandons the rest of its block and reserves the next.

use std::ops::Range;
use std::sync::Mutex;

use krabka_protocol::ProducerIdsRecord;

use crate::metadata::{MetadataError, MetadataImage, MetadataRecord, MetadataStore};

/// Ids per block: one metadata record per this many producers.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

/// The record that reserves the block after `image`'s last one for
/// `node_id`, and that block.
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

/// The block this node hands ids from.
pub struct ProducerIdBlocks {
    node_id: i32,
    /// The ids of the current block not yet handed out (empty at start).
    current: Mutex<Range<i64>>,
}

impl ProducerIdBlocks {
    pub fn new(node_id: i32) -> Self {
        ProducerIdBlocks { node_id, current: Mutex::new(0..0) }
    }

    /// Hands out a producer id, reserving a new block through `metadata`
    /// when the current one is used up.
    pub fn allocate(&self, metadata: &MetadataStore) -> Result<i64, MetadataError> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.is_empty() {
            let (_, block) = metadata.commit(|image| {
                let (record, block) = next_block(image, self.node_id);
                Ok::<_, MetadataError>((vec![record], block))
            })?;
            debug_assert_eq!(metadata.image().next_producer_id_block, block.end, "the block was not committed");
            *current = block;
        }
        let id = current.start;
        current.start += 1;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_across_blocks_and_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let open = || MetadataStore::open(dir.path(), u64::MAX, true, 1).unwrap();
        let store = open();
        let blocks = ProducerIdBlocks::new(1);
        let ids: Vec<i64> = (0..PRODUCER_ID_BLOCK_SIZE + 2).map(|_| blocks.allocate(&store).unwrap()).collect();
        assert_eq!(ids, (0..PRODUCER_ID_BLOCK_SIZE + 2).collect::<Vec<_>>());
        assert_eq!(store.image().next_producer_id_block, 2 * PRODUCER_ID_BLOCK_SIZE);
        store.close().unwrap();
        drop(store);
        // A restart abandons what is left of its block.
        let store = open();
        let blocks = ProducerIdBlocks::new(1);
        assert_eq!(blocks.allocate(&store).unwrap(), 2 * PRODUCER_ID_BLOCK_SIZE);
    }
}
