//! Producer ids for idempotent producers, handed out from blocks reserved
//! in the metadata log (a `ProducerIdsRecord` per block, as Kafka's
//! controller reserves them), so no id is handed out twice, even across a
//! restart: a restart abandons the rest of its block and reserves the next.

use std::ops::Range;
use std::sync::Mutex;

use krabka_metadata::{MetadataImage, MetadataRecord};
use krabka_protocol::{AllocateProducerIdsRequest, ErrorCode, ProducerIdsRecord};

use crate::brokers::check_broker_epoch;
use crate::error::ApiError;

/// Ids per block: one metadata record per this many producers.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

/// The record that reserves the block after `image`'s last one for
/// `broker_id` (at `broker_epoch`, 0 for a node's own), and that block
/// (AllocateProducerIds' decision); an error once the ids run out.
fn next_block(
    image: &MetadataImage,
    broker_id: i32,
    broker_epoch: i64,
) -> Result<(MetadataRecord, Range<i64>), ApiError> {
    let start = image.next_producer_id_block;
    debug_assert!(start >= 0, "producer id blocks start at 0");
    if start > i64::MAX - PRODUCER_ID_BLOCK_SIZE {
        let message = format!("Exhausted all producer ids: the next block would start at {start}.");
        return Err(ApiError::new(ErrorCode::UNKNOWN_SERVER_ERROR.code(), message));
    }
    let block = start..start + PRODUCER_ID_BLOCK_SIZE;
    let record = MetadataRecord::ProducerIds(ProducerIdsRecord {
        broker_id,
        broker_epoch,
        next_producer_id: block.end,
        ..Default::default()
    });
    Ok((record, block))
}

/// The next block for this node's own producers (a single-node cluster,
/// where no broker registers): the record reserving it, and the block.
pub fn plan_allocate_producer_ids(
    image: &MetadataImage,
    node_id: i32,
) -> Result<(Vec<MetadataRecord>, Range<i64>), ApiError> {
    let (record, block) = next_block(image, node_id, 0)?;
    Ok((vec![record], block))
}

/// AllocateProducerIds from a broker: the next block, for a broker
/// registered with the epoch it sends (else STALE_BROKER_EPOCH).
pub fn plan_allocate_producer_ids_for(
    image: &MetadataImage,
    request: &AllocateProducerIdsRequest,
) -> Result<(Vec<MetadataRecord>, Range<i64>), ApiError> {
    check_broker_epoch(image, request.broker_id, request.broker_epoch)?;
    let (record, block) = next_block(image, request.broker_id, request.broker_epoch)?;
    Ok((vec![record], block))
}

/// The block this node hands ids from (Kafka's `ProducerIdManager`).
pub struct ProducerIdBlocks {
    node_id: i32,
    blocks: Mutex<Blocks>,
}

struct Blocks {
    /// The ids of the current block not yet handed out (empty at start).
    current: Range<i64>,
    /// The end of the newest block taken: a next block must start there
    /// or later, or ids would be handed out twice.
    taken_up_to: i64,
}

impl ProducerIdBlocks {
    pub fn new(node_id: i32) -> Self {
        ProducerIdBlocks { node_id, blocks: Mutex::new(Blocks { current: 0..0, taken_up_to: 0 }) }
    }

    /// The node whose blocks these are.
    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    /// The next id of the current block, or None when it is used up: the
    /// caller then commits the next block (`plan_allocate_producer_ids`)
    /// and hands it to `take_from`.
    pub fn take(&self) -> Option<i64> {
        let mut blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        let id = (!blocks.current.is_empty()).then_some(blocks.current.start)?;
        blocks.current.start += 1;
        Some(id)
    }

    /// Takes an id from a newly reserved `block`. When another caller
    /// refilled the current block meanwhile, it is kept and `block` is
    /// abandoned whole: a wasted block is harmless, a reused id is not. A
    /// block that starts below one taken before is refused, as Kafka's
    /// broker refuses one that is not monotonic.
    pub fn take_from(&self, block: Range<i64>) -> Result<i64, String> {
        debug_assert!(!block.is_empty(), "an empty producer id block");
        let mut blocks = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        if blocks.current.is_empty() {
            if block.start < blocks.taken_up_to {
                return Err(format!(
                    "the producer id block {block:?} is not monotonic: ids up to {} were taken before",
                    blocks.taken_up_to
                ));
            }
            blocks.taken_up_to = block.end;
            blocks.current = block;
        }
        let id = blocks.current.start;
        blocks.current.start += 1;
        Ok(id)
    }

    /// Hands out a producer id, calling `reserve` with this node's id to
    /// commit the next block when the current one is used up.
    pub fn allocate<E: std::fmt::Debug>(
        &self,
        reserve: impl FnOnce(i32) -> Result<Range<i64>, E>,
    ) -> Result<i64, String> {
        match self.take() {
            Some(id) => Ok(id),
            None => self.take_from(reserve(self.node_id).map_err(|e| format!("{e:?}"))?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use krabka_protocol::RegisterBrokerRecord;

    fn image_with_broker(broker_id: i32, broker_epoch: i64) -> MetadataImage {
        let mut image = MetadataImage::default();
        let record = RegisterBrokerRecord { broker_id, broker_epoch, ..Default::default() };
        image.apply(&MetadataRecord::RegisterBroker(record)).unwrap();
        image
    }

    fn request(broker_id: i32, broker_epoch: i64) -> AllocateProducerIdsRequest {
        AllocateProducerIdsRequest { broker_id, broker_epoch, ..Default::default() }
    }

    #[test]
    fn a_registered_broker_gets_the_next_block_recorded_with_its_epoch() {
        let mut image = image_with_broker(2, 17);
        image.next_producer_id_block = 3 * PRODUCER_ID_BLOCK_SIZE;
        let (records, block) = plan_allocate_producer_ids_for(&image, &request(2, 17)).unwrap();
        assert_eq!(block, 3 * PRODUCER_ID_BLOCK_SIZE..4 * PRODUCER_ID_BLOCK_SIZE);
        let MetadataRecord::ProducerIds(record) = &records[0] else { panic!("{records:?}") };
        assert_eq!((record.broker_id, record.broker_epoch, record.next_producer_id), (2, 17, block.end));
    }

    #[test]
    fn an_old_incarnation_or_an_unknown_broker_is_a_stale_broker_epoch() {
        let image = image_with_broker(2, 17);
        for (broker_id, broker_epoch) in [(2, 16), (3, 17)] {
            let e = plan_allocate_producer_ids_for(&image, &request(broker_id, broker_epoch)).unwrap_err();
            assert_eq!(e.code, ErrorCode::STALE_BROKER_EPOCH.code(), "broker {broker_id} epoch {broker_epoch}");
        }
    }

    #[test]
    fn the_last_whole_block_is_handed_out_and_then_the_ids_are_exhausted() {
        let mut image =
            MetadataImage { next_producer_id_block: i64::MAX - PRODUCER_ID_BLOCK_SIZE, ..Default::default() };
        let (_, block) = plan_allocate_producer_ids(&image, 1).unwrap();
        assert_eq!(block.end, i64::MAX);
        image.next_producer_id_block = block.end - PRODUCER_ID_BLOCK_SIZE + 1;
        let e = plan_allocate_producer_ids(&image, 1).unwrap_err();
        assert_eq!(e.code, ErrorCode::UNKNOWN_SERVER_ERROR.code());
    }
}
