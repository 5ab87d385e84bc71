//! How a leader turns a proposal into the log: one batch of the values
//! (one record each, stamped with the time), appended in its epoch and
//! flushed. Both quorums, `SingleVoter` and `RaftNode`, append this way;
//! control records (a new leader's LeaderChange, with its KRaftVoters
//! when it must write them; a voter change) go in a control batch of their
//! own.

use bytes::Bytes;
use krabka_log::{AppendInfo, LogError, ReplicatedLog};
use krabka_protocol::compression::Compression;
use krabka_protocol::records::{control_batch_of, ControlType, NewRecord, RecordBatchBuilder};

pub(crate) fn append_and_flush<L: ReplicatedLog>(
    log: &mut L,
    values: &[Bytes],
    epoch: i32,
    now_ms: i64,
) -> Result<AppendInfo, LogError> {
    debug_assert!(!values.is_empty(), "an empty proposal");
    let mut builder = RecordBatchBuilder::new(Compression::None);
    for value in values {
        builder.append(&NewRecord { timestamp_ms: now_ms, key: None, value: Some(value), headers: &[] })?;
    }
    let batch = builder.build()?;
    let info = log.append_as_leader(batch.as_bytes(), epoch, now_ms)?;
    log.flush(now_ms)?;
    Ok(info)
}

pub(crate) fn append_control_and_flush<L: ReplicatedLog>(
    log: &mut L,
    records: &[(ControlType, &[u8])],
    epoch: i32,
    now_ms: i64,
) -> Result<AppendInfo, LogError> {
    // The leader assigns the offset; the builder's base offset is a placeholder.
    let batch = control_batch_of(0, records, now_ms)?;
    let info = log.append_as_leader(&batch, epoch, now_ms)?;
    log.flush(now_ms)?;
    Ok(info)
}
