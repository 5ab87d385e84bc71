//! Topic-level `compression.type`: when a topic names a codec other than
//! `producer`, batches that arrive in a different codec are rewritten in the
//! topic's codec before the append, as Kafka does. Producer id, epoch,
//! sequence, transactional flag and every record's timestamp, key, value and
//! headers are kept. This path allocates per record; it is taken only when
//! the topic and the producer disagree.

use bytes::{Bytes, BytesMut};
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{RecordBatchBuilder, RecordBatches, RecordError};

/// Returns `records` unchanged when every batch already uses `target`,
/// else the batches rewritten in `target`. Invalid input is left for the
/// log's validation to refuse (with Kafka's error), so it is returned as is.
pub fn recompress(records: &Bytes, target: Compression, max_decompressed_bytes: usize) -> Result<Bytes, RecordError> {
    let all_match = RecordBatches::new(records.clone())
        .all(|batch| batch.is_ok_and(|b| b.is_control() || b.compression().is_ok_and(|c| c == target)));
    if all_match {
        return Ok(records.clone());
    }
    let mut out = BytesMut::with_capacity(records.len());
    for batch in RecordBatches::new(records.clone()) {
        let batch = batch?;
        batch.validate()?;
        if batch.is_control() || batch.compression()? == target {
            out.extend_from_slice(batch.as_bytes());
            continue;
        }
        let mut builder = RecordBatchBuilder::like(&batch, target);
        for record in batch.records(max_decompressed_bytes)? {
            builder.append_record(&record?)?;
        }
        out.extend_from_slice(builder.build()?.as_bytes());
    }
    Ok(out.freeze())
}

#[cfg(test)]
mod tests {
    use krabka_protocol::records::{NewHeader, NewRecord};

    use super::*;

    #[test]
    fn rewrites_only_batches_in_another_codec_and_keeps_producer_fields() {
        let header = [NewHeader { key: b"h", value: Some(b"v") }];
        let mut builder = RecordBatchBuilder::new(Compression::Lz4).with_producer(7, 2, 40);
        for i in 0..3u8 {
            let value = [i; 10];
            builder
                .append(&NewRecord {
                    timestamp_ms: 1000 + i64::from(i),
                    key: Some(b"k"),
                    value: Some(&value),
                    headers: &header,
                })
                .unwrap();
        }
        let lz4 = builder.build().unwrap().into_bytes();
        let gzip = recompress(&lz4, Compression::Gzip, 1 << 20).unwrap();
        let batch = RecordBatches::new(gzip.clone()).next().unwrap().unwrap();
        batch.validate().unwrap();
        assert_eq!(batch.compression().unwrap(), Compression::Gzip);
        assert_eq!((batch.producer_id(), batch.producer_epoch(), batch.base_sequence()), (7, 2, 40));
        let records: Vec<_> = batch.records(1 << 20).unwrap().map(Result::unwrap).collect();
        assert_eq!(records.len(), 3);
        assert_eq!(records[2].timestamp, 1002);
        assert_eq!(records[2].value.as_deref(), Some(&[2u8; 10][..]));
        assert_eq!(records[1].headers.iter().next().unwrap().key.as_ref(), b"h");
        // Already in the target codec: the very same bytes.
        assert_eq!(recompress(&gzip, Compression::Gzip, 1 << 20).unwrap(), gzip);
    }
}
