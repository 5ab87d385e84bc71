//! `MetadataLoader`: builds the image from what the metadata log committed,
//! as Kafka's metadata loader does on every node (the active controller
//! replaying at start, standby controllers and brokers following the
//! leader). It takes whole batches in offset order and turns them into
//! images with what each chunk changed; what they mean is the image's.

use std::sync::Arc;

use bytes::Bytes;

use crate::delta::MetadataDelta;
use crate::image::MetadataImage;
use crate::publisher::MetadataUpdate;
use crate::records::{decode_batches, CorruptRecord};
use krabka_protocol::records::RecordBatches;

pub struct MetadataLoader {
    image: Arc<MetadataImage>,
    /// One past the last offset applied: where the next batches start.
    next_offset: i64,
}

impl MetadataLoader {
    /// A loader whose image holds everything before `next_offset` (an
    /// empty image at 0, or a snapshot's image at its end offset).
    pub fn new(mut image: MetadataImage, next_offset: i64) -> Self {
        image.offset = next_offset - 1;
        MetadataLoader { image: Arc::new(image), next_offset }
    }

    pub fn image(&self) -> &Arc<MetadataImage> {
        &self.image
    }

    /// One past the last offset applied.
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    /// Applies `batches`, committed batches read from `next_offset()` on,
    /// to a copy of the image, and returns it with what changed. A record
    /// the image refuses is logged and skipped (a damaged log must not stop
    /// the node); one that does not decode stops the chunk with nothing
    /// applied. The image's offset is the last offset applied, control
    /// batches (which change nothing) included, so that a reader can tell
    /// the image has caught up with the log.
    pub fn apply(&mut self, batches: Bytes) -> Result<MetadataUpdate, CorruptRecord> {
        // The chunk must go on from where the image ends: a gap would leave
        // the image without what it skipped.
        if let Some(Ok(first)) = RecordBatches::new(batches.clone()).next() {
            if first.base_offset() > self.next_offset || first.next_offset() <= self.next_offset {
                let reason = format!("a chunk from offset {} after {}", first.base_offset(), self.next_offset);
                return Err(CorruptRecord { offset: self.next_offset, reason });
            }
        }
        let (records, next_offset) = decode_batches(batches, self.next_offset)?;
        debug_assert!(next_offset >= self.next_offset, "a chunk that goes back");
        let mut image = (*self.image).clone();
        let mut delta = MetadataDelta::default();
        for (offset, record) in records {
            if let Err(reason) = delta.apply(&mut image, &record) {
                tracing::error!(offset, %reason, "skipping metadata record");
            }
        }
        image.offset = next_offset - 1;
        debug_assert!(image.is_consistent(), "an image that lost a topic's name or id");
        self.image = Arc::new(image);
        self.next_offset = next_offset;
        Ok(MetadataUpdate { image: self.image.clone(), delta: Arc::new(delta) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::MetadataRecord;
    use krabka_protocol::compression::Compression;
    use krabka_protocol::records::{control_batch, ControlType, NewRecord, RecordBatchBuilder};
    use krabka_protocol::TopicRecord;
    use krabka_protocol::Uuid;

    fn batch(base_offset: i64, records: &[MetadataRecord]) -> Bytes {
        let mut builder = RecordBatchBuilder::new(Compression::None).with_base_offset(base_offset);
        for record in records {
            let value = record.encode();
            builder.append(&NewRecord { timestamp_ms: 0, key: None, value: Some(&value), headers: &[] }).unwrap();
        }
        builder.build().unwrap().into_bytes()
    }

    fn topic(name: &str, id: u8) -> MetadataRecord {
        MetadataRecord::Topic(TopicRecord { name: name.into(), topic_id: Uuid([id; 16]), ..Default::default() })
    }

    #[test]
    fn a_chunk_builds_the_image_and_names_what_changed() {
        let mut loader = MetadataLoader::new(MetadataImage::default(), 0);
        let mut chunk = batch(0, &[topic("a", 1), topic("b", 2)]).to_vec();
        chunk.extend_from_slice(&control_batch(2, ControlType::LeaderChange, &[0], 0).unwrap());
        let update = loader.apply(Bytes::from(chunk)).unwrap();
        assert_eq!(update.image.topics.len(), 2);
        assert_eq!(update.delta.created_topics.len(), 2);
        // The control batch at offset 2 counts: the image has caught up to 3.
        assert_eq!((loader.next_offset(), update.image.offset), (3, 2));
        let update = loader.apply(batch(3, &[topic("c", 3)])).unwrap();
        assert_eq!(update.delta.created_topics.len(), 1);
        assert_eq!((loader.next_offset(), update.image.topics.len()), (4, 3));
    }

    #[test]
    fn a_refused_record_is_skipped_and_a_corrupt_chunk_applies_nothing() {
        let mut loader = MetadataLoader::new(MetadataImage::default(), 0);
        // The same name under a second id is refused; the rest applies.
        let update = loader.apply(batch(0, &[topic("a", 1), topic("a", 2), topic("b", 3)])).unwrap();
        assert_eq!(update.image.topics.len(), 2);
        let mut corrupt = batch(3, &[topic("c", 4)]).to_vec();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xff;
        assert!(loader.apply(Bytes::from(corrupt)).is_err());
        assert_eq!((loader.next_offset(), loader.image().topics.len()), (3, 2));
        // A chunk that skips offsets, or one it has applied already, is refused.
        assert!(loader.apply(batch(5, &[topic("c", 4)])).is_err());
        assert!(loader.apply(batch(0, &[topic("c", 4)])).is_err());
        // One cut short after a whole batch applies the whole one.
        let mut cut = batch(3, &[topic("c", 4)]).to_vec();
        cut.extend_from_slice(&batch(4, &[topic("d", 5)])[..20]);
        let update = loader.apply(Bytes::from(cut)).unwrap();
        assert_eq!((loader.next_offset(), update.image.topics.len()), (4, 3));
    }
}
