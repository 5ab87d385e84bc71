//! The text checkpoints krabka-log reads from disk (`krabka_log::checkpoint`):
//! the per-directory offset checkpoints (`read_offsets`), the per-partition
//! `leader-epoch-checkpoint` (`read_leader_epochs`) and `partition.metadata`
//! (`read_partition_metadata`).
//!
//! Input: byte 0 picks the reader (`% 3`); the rest is the file.
//!
//! Checks, besides never panicking: what a reader accepts, written back with
//! the matching writer, reads back to the same value.
#![no_main]

use krabka_log::checkpoint::{
    read_leader_epochs, read_offsets, read_partition_metadata, write_leader_epochs, write_offsets,
    write_partition_metadata,
};
use krabka_protocol_fuzz::scratch;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, file)) = data.split_first() else { return };
    let path = scratch::write("checkpoint", file);
    let again = scratch::dir().join("checkpoint.rewritten");
    match selector % 3 {
        0 => {
            if let Ok(offsets) = read_offsets(&path) {
                write_offsets(&again, &offsets).expect("write offsets");
                assert_eq!(read_offsets(&again).expect("re-read offsets"), offsets);
            }
        }
        1 => {
            if let Ok(entries) = read_leader_epochs(&path) {
                write_leader_epochs(&again, &entries).expect("write leader epochs");
                assert_eq!(read_leader_epochs(&again).expect("re-read leader epochs"), entries);
            }
        }
        _ => {
            if let Ok(Some(topic_id)) = read_partition_metadata(&path) {
                write_partition_metadata(&again, &topic_id).expect("write partition.metadata");
                assert_eq!(read_partition_metadata(&again).expect("re-read partition.metadata"), Some(topic_id));
            }
        }
    }
});
