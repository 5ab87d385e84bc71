//! Kafka's `DirectoryId` (KIP-858): the reserved ids a replica's log
//! directory may hold in a partition's `directories`, and whether a
//! replica's directory counts as online for its broker.

use krabka_protocol::Uuid;

/// A replica not yet placed in a named directory (its broker has several
/// and has not said which yet).
pub const UNASSIGNED: Uuid = Uuid([0; 16]);
/// A replica whose directory is gone.
pub const LOST: Uuid = Uuid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
/// A replica placed before directories were recorded.
pub const MIGRATING: Uuid = Uuid([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);

/// Kafka's `DirectoryId.isOnline`: whether a replica in `directory` is in
/// a directory its broker, whose registration lists `online`, serves. One
/// not yet in a named directory counts as online; so does any when the
/// broker listed none (registered before metadata.version 3.7).
pub fn is_online(directory: Uuid, online: &[Uuid]) -> bool {
    if directory == UNASSIGNED || directory == MIGRATING {
        return true;
    }
    directory != LOST && (online.is_empty() || online.contains(&directory))
}
