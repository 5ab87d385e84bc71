//! The replica manager's side of moves between log directories
//! (KIP-113): AlterReplicaLogDirs starts or gives up a move, each round of
//! a mover (`crate::log_dir_events::movers`) copies a step of every move
//! of its own and swaps in the future replicas that caught up, and a move
//! a stop interrupted resumes when the replica opens.

use std::path::Path;

use krabka_log::checkpoint::TopicPartition;
use krabka_log::LogError;
use krabka_protocol::ErrorCode;

use super::future_replica::{FutureReplica, MoveStep, Swap};
use super::manager::ReplicaManager;
use super::partition::Partition;
use crate::clock::now_ms;
use crate::metadata::MetadataImage;
use krabka_replication::fetchers::fetcher_id;

/// The longest directory name a future replica may have (most file
/// systems' limit): longer topic names cannot move (KAFKA-4893).
const MAX_DIR_NAME_LENGTH: usize = 255;
/// How long a move waits for the controller to record its destination
/// before asking again.
const ASK_AGAIN_MS: i64 = 2_000;

/// One of the movers (`num.replica.alter.log.dirs.threads`): it moves the
/// partitions whose fetcher id among `count` is `id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mover {
    pub id: u32,
    pub count: u32,
}

/// What one round of the mover did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MoveRound {
    /// Bytes copied to future replicas.
    pub copied: usize,
    /// Moves still under way.
    pub moving: usize,
}

impl ReplicaManager {
    /// AlterReplicaLogDirs for partition `index` of `topic`: the error code
    /// Kafka's `alterReplicaLogDirs` answers with. A replica not here yet
    /// is created in `dest` when it comes (REPLICA_NOT_AVAILABLE meanwhile:
    /// Kafka's tool asks again); one already in `dest` stays, giving up a
    /// move elsewhere; any other starts moving, unless a directory is
    /// offline (the replica could be in two then).
    pub fn alter_log_dir(&self, topic: &str, index: i32, dest: &Path) -> i16 {
        let tp = TopicPartition::new(topic, index);
        if tp.future_dir_name(&[0; 16]).len() > MAX_DIR_NAME_LENGTH {
            return ErrorCode::INVALID_TOPIC_EXCEPTION.code();
        }
        if !self.log_manager.log_dirs().iter().any(|d| d == dest) {
            return ErrorCode::LOG_DIR_NOT_FOUND.code();
        }
        if self.log_manager.is_offline(dest) {
            return ErrorCode::KAFKA_STORAGE_ERROR.code();
        }
        let hosted = self.topic(topic);
        let slot = hosted.as_ref().and_then(|t| t.partitions.get(usize::try_from(index).ok()?).cloned());
        let partition = match slot {
            Some(Some(partition)) if partition.is_offline() => return ErrorCode::KAFKA_STORAGE_ERROR.code(),
            Some(Some(partition)) => partition,
            Some(None) if hosted.as_ref().is_some_and(|t| t.unopened.contains(&index)) => {
                return ErrorCode::KAFKA_STORAGE_ERROR.code()
            }
            _ => {
                self.log_dir_moves.preferred.lock().unwrap_or_else(|e| e.into_inner()).insert(tp, dest.to_path_buf());
                return ErrorCode::REPLICA_NOT_AVAILABLE.code();
            }
        };
        if partition.future_dir().is_some_and(|d| d != dest) {
            self.give_up_move(&partition);
        }
        if partition.log_dir() == dest || partition.future_dir().is_some() {
            return ErrorCode::NONE.code();
        }
        if self.log_manager.has_offline_dirs() {
            return ErrorCode::KAFKA_STORAGE_ERROR.code();
        }
        if self.start_move(&partition, dest, None).is_err() {
            return ErrorCode::KAFKA_STORAGE_ERROR.code();
        }
        // The topic deleted or the replica moved away meanwhile: nothing
        // else would remove this future replica.
        let still_hosted = self.hosted_partition(topic, index).is_some_and(|p| std::sync::Arc::ptr_eq(&p, &partition));
        if !still_hosted {
            self.give_up_move(&partition);
            return ErrorCode::REPLICA_NOT_AVAILABLE.code();
        }
        ErrorCode::NONE.code()
    }

    /// Opens a future replica of `partition` in `dest` (`existing`: the one
    /// a stop left there) and starts copying to it.
    fn start_move(&self, partition: &Partition, dest: &Path, existing: Option<&Path>) -> Result<(), LogError> {
        let tp = TopicPartition::new(&*partition.topic, partition.index);
        let config = partition.lock_log().config().clone();
        let opened = self.log_manager.open_future_log(&tp, &partition.topic_id, dest, existing, config, now_ms());
        let (log, report) = self.log_dirs.check(opened, dest, &partition.topic, partition.index)?;
        if report.recovered_segments > 0 || report.truncated_bytes > 0 {
            tracing::warn!(partition = %tp.dir_name(), ?report, "recovered a future replica");
        }
        tracing::info!(partition = %tp.dir_name(), from = %partition.log_dir().display(), to = %dest.display(), "moving a replica to another log directory");
        if let Some(replaced) = partition.start_future(FutureReplica::new(log, dest, self.log_dirs.id_of(dest))) {
            self.remove_future(replaced);
        }
        self.log_dir_moves.announce();
        Ok(())
    }

    /// Resumes the move a stop interrupted, if `partition` (just opened)
    /// had one.
    pub(super) fn resume_move(&self, partition: &Partition) {
        let tp = TopicPartition::new(&*partition.topic, partition.index);
        let Some(future) = self.log_manager.take_found_future(&tp, &partition.topic_id) else { return };
        let Some(dest) = future.parent().map(Path::to_path_buf) else { return };
        if dest == partition.log_dir() {
            // A copy beside the replica it would replace: nothing to move.
            if let Err(error) = self.log_manager.delete_future_dir(&future) {
                tracing::error!(dir = %future.display(), %error, "could not remove a future replica");
            }
            return;
        }
        if let Err(error) = self.start_move(partition, &dest, Some(&future)) {
            tracing::error!(partition = %tp.dir_name(), %error, "could not resume moving a replica");
        }
    }

    /// Stops `partition`'s move, if any, and removes its future replica
    /// (not from a failed directory: nothing is written there).
    pub(super) fn give_up_move(&self, partition: &Partition) {
        let Some(future) = partition.take_future() else { return };
        tracing::info!(topic = %partition.topic, partition = partition.index, dir = %future.dir.display(), "replica move given up");
        // The controller may have recorded the destination already: it
        // must know where the replica is, even in a failed directory (it
        // then moves leadership away from it).
        if future.assignment_asked_ms.is_some() {
            if let Some(current) = self.log_dirs.id_of(&partition.log_dir()) {
                self.dir_assignments.push((partition.topic_id, partition.index), current);
            }
        }
        self.remove_future(future);
    }

    fn remove_future(&self, future: FutureReplica) {
        let (path, dir) = (future.log.dir().to_path_buf(), future.dir.clone());
        drop(future);
        if self.log_manager.is_offline(&dir) {
            return;
        }
        if let Err(error) = self.log_manager.delete_future_dir(&path) {
            tracing::error!(dir = %path.display(), %error, "could not remove a future replica");
        }
    }

    /// One round of every move, as the only mover.
    pub fn move_round(&self, image: &MetadataImage) -> MoveRound {
        self.move_round_of(image, Mover { id: 0, count: 1 })
    }

    /// One round of every move of `mover`: up to `replica.fetch.max.bytes`
    /// copied for each, and a future replica that caught up swapped in once
    /// `image` records its directory (the controller is asked to, once).
    pub fn move_round_of(&self, image: &MetadataImage, mover: Mover) -> MoveRound {
        debug_assert!(mover.id < mover.count, "{mover:?}");
        let max_bytes = self.config.number("replica.fetch.max.bytes", 1 << 20).clamp(1, i64::from(i32::MAX)) as u32;
        let mut round = MoveRound::default();
        let mine = |p: &Partition| fetcher_id(&p.topic, p.index, mover.count) == mover.id;
        let moving: Vec<_> =
            self.all_partitions().into_iter().filter(|p| p.future_dir().is_some() && mine(p)).collect();
        let quota = &self.throttles.alter_log_dirs;
        for partition in moving {
            // Over `replica.alter.log.dirs.io.max.bytes.per.second`: no copy
            // this round (a caught-up move still swaps).
            let throttled = quota.lock().unwrap_or_else(|e| e.into_inner()).is_exceeded(now_ms());
            // The log's lock taken for the lag only when it matters.
            let behind = || partition.future_state().is_some_and(|(_, _, lag)| lag > 0);
            let step =
                if throttled && behind() { MoveStep::Throttled } else { partition.copy_to_future(max_bytes, now_ms()) };
            match step {
                MoveStep::Copied(bytes) => {
                    quota.lock().unwrap_or_else(|e| e.into_inner()).record(bytes as u64, now_ms());
                    round.copied += bytes;
                    round.moving += 1;
                }
                MoveStep::CaughtUp if self.destination_recorded(image, &partition) => {
                    let swap = partition.promote_future(&self.log_manager, now_ms());
                    if swap == Swap::GivenUp && self.records_directories(image) {
                        // The controller recorded the destination: it
                        // must learn the replica stayed.
                        if let Some(current) = self.log_dirs.id_of(&partition.log_dir()) {
                            self.dir_assignments.push((partition.topic_id, partition.index), current);
                        }
                    }
                    round.moving += usize::from(swap == Swap::NotYet && partition.future_dir().is_some());
                }
                MoveStep::CaughtUp | MoveStep::Throttled => round.moving += 1,
                MoveStep::Idle | MoveStep::Stopped => {}
            }
        }
        round
    }

    /// Whether the controller has recorded the destination of `partition`'s
    /// move (always, where it records no directories); if not, asks it to
    /// (again every `ASK_AGAIN_MS`).
    fn destination_recorded(&self, image: &MetadataImage, partition: &Partition) -> bool {
        if !self.records_directories(image) {
            return true;
        }
        let mut future = partition.lock_future();
        let Some(future) = future.as_mut() else { return false };
        let Some(dest) = future.dir_id else { return true };
        let placed = image.topic_by_id(&partition.topic_id).and_then(|t| t.partitions.get(partition.index as usize));
        if placed.and_then(|p| p.directory_of(self.config.node_id)) == Some(dest) {
            return true;
        }
        // Asked again now and then: a word about the current directory
        // queued meanwhile would have replaced it.
        let now = now_ms();
        if future.assignment_asked_ms.is_none_or(|asked| now - asked >= ASK_AGAIN_MS) {
            future.assignment_asked_ms = Some(now);
            self.dir_assignments.push((partition.topic_id, partition.index), dest);
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::{PartitionImage, TopicImage};
    use crate::replica::manager::Hosting;
    use bytes::Bytes;
    use krabka_protocol::compression::Compression;
    use krabka_protocol::records::{NewRecord, RecordBatchBuilder};
    use krabka_protocol::Uuid;
    use std::collections::BTreeMap;
    use std::path::PathBuf;
    use std::sync::Arc;

    /// Small copy steps: a move takes several rounds.
    fn replica_manager(dirs: &[PathBuf]) -> ReplicaManager {
        crate::replica::manager::tests::replica_manager_in(dirs, &[("replica.fetch.max.bytes", "1000")])
    }

    fn image(topics: &[&str]) -> MetadataImage {
        let mut image = MetadataImage::default();
        for name in topics {
            let partition = PartitionImage { leader: 1, replicas: vec![1], isr: vec![1], ..Default::default() };
            let id = Uuid([name.as_bytes()[0]; 16]);
            let topic =
                TopicImage { name: name.to_string(), id, partitions: vec![partition], configs: BTreeMap::new() };
            image.topic_names_by_id.insert(id, topic.name.clone());
            image.topics.insert(topic.name.clone(), Arc::new(topic));
        }
        image
    }

    /// Two directories, and a single node hosting `t` with `batches`
    /// batches of ten records in one of them.
    fn hosting_t(batches: usize) -> (Vec<PathBuf>, ReplicaManager, MetadataImage, Arc<Partition>) {
        let dirs: Vec<PathBuf> = (0..2).map(|_| tempfile::tempdir().unwrap().keep()).collect();
        let replicas = replica_manager(&dirs);
        let image = image(&["t"]);
        replicas.sync_with_image(&image).unwrap();
        let partition = replicas.partition("t", 0).unwrap();
        for _ in 0..batches {
            partition.append(&records(10), now_ms()).unwrap();
        }
        (dirs, replicas, image, partition)
    }

    /// An image of topic "t" whose metadata records its replica in `dir`.
    fn placed_in(replicas: &ReplicaManager, dir: &Path) -> MetadataImage {
        use krabka_metadata::features::{DIRECTORY_ASSIGNMENT_LEVEL, METADATA_VERSION};
        let mut image = image(&["t"]);
        image.features.insert(METADATA_VERSION.to_string(), DIRECTORY_ASSIGNMENT_LEVEL);
        let mut topic = (*image.topics["t"]).clone();
        topic.partitions[0].directories = vec![replicas.log_dirs.id_of(dir).unwrap()];
        image.topics.insert("t".into(), Arc::new(topic));
        image
    }

    /// The directory of `dirs` the partition is not in.
    fn the_other(dirs: &[PathBuf], partition: &Partition) -> PathBuf {
        dirs.iter().find(|d| **d != partition.log_dir()).unwrap().clone()
    }

    /// Rounds of the mover until `partition` has moved.
    fn finish_move(replicas: &ReplicaManager, image: &MetadataImage, partition: &Partition) {
        for _ in 0..1_000 {
            if partition.future_dir().is_none() {
                return;
            }
            replicas.move_round(image);
        }
        panic!("the move never ends");
    }

    /// Puts `dir` away and a file in its place (ENOTDIR, as root too); the
    /// place it went.
    fn make_unreadable(dir: &Path) -> PathBuf {
        let away = dir.with_extension("away");
        std::fs::rename(dir, &away).unwrap();
        std::fs::write(dir, b"not a directory").unwrap();
        away
    }

    fn make_readable(dir: &Path, away: &Path) {
        std::fs::remove_file(dir).unwrap();
        std::fs::rename(away, dir).unwrap();
    }

    fn remove_all(dirs: Vec<PathBuf>) {
        for dir in dirs {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }

    fn records(count: usize) -> Bytes {
        let mut builder = RecordBatchBuilder::new(Compression::None);
        for _ in 0..count {
            builder.append(&NewRecord { timestamp_ms: 1, key: None, value: Some(&[7; 100]), headers: &[] }).unwrap();
        }
        builder.build().unwrap().into_bytes()
    }

    #[test]
    fn alter_replica_log_dirs_answers_as_kafka() {
        let dirs: Vec<PathBuf> = (0..2).map(|_| tempfile::tempdir().unwrap().keep()).collect();
        let replicas = replica_manager(&dirs);
        replicas.sync_with_image(&image(&["t"])).unwrap();
        let here = replicas.hosted_partition("t", 0).unwrap().log_dir();
        let code = |topic: &str, dir: &Path| replicas.alter_log_dir(topic, 0, dir);
        assert_eq!(code("t", Path::new("/nowhere")), ErrorCode::LOG_DIR_NOT_FOUND.code());
        assert_eq!(code(&"x".repeat(249), &here), ErrorCode::INVALID_TOPIC_EXCEPTION.code());
        assert_eq!(code("t", &here), ErrorCode::NONE.code(), "already there");
        assert!(replicas.hosted_partition("t", 0).unwrap().future_dir().is_none(), "no move started");
        // Not here yet: created in the named directory when it comes.
        let other = dirs.iter().find(|d| **d != here).unwrap();
        assert_eq!(code("later", other), ErrorCode::REPLICA_NOT_AVAILABLE.code());
        replicas.sync_with_image(&image(&["t", "later"])).unwrap();
        assert_eq!(replicas.hosted_partition("later", 0).unwrap().log_dir(), *other);
        replicas.log_manager().mark_offline(other);
        assert_eq!(code("t", other), ErrorCode::KAFKA_STORAGE_ERROR.code(), "an offline destination");
        remove_all(dirs);
    }

    /// `num.replica.alter.log.dirs.threads`: each mover copies only the
    /// moves of the partitions Kafka's fetcher id gives it; together they
    /// finish every move.
    #[test]
    fn each_mover_moves_only_its_partitions() {
        let dirs: Vec<PathBuf> = (0..2).map(|_| tempfile::tempdir().unwrap().keep()).collect();
        let replicas = replica_manager(&dirs);
        let image = image(&["t", "u"]);
        replicas.sync_with_image(&image).unwrap();
        let (first, second) = (Mover { id: 0, count: 2 }, Mover { id: 1, count: 2 });
        assert_eq!((fetcher_id("t", 0, 2), fetcher_id("u", 0, 2)), (0, 1));
        let moving: Vec<Arc<Partition>> = ["t", "u"].map(|name| replicas.partition(name, 0).unwrap()).into();
        for partition in &moving {
            for _ in 0..20 {
                partition.append(&records(10), now_ms()).unwrap();
            }
            let to = the_other(&dirs, partition);
            assert_eq!(replicas.alter_log_dir(&partition.topic, 0, &to), ErrorCode::NONE.code());
        }
        let lag = |p: &Partition| p.future_state().map(|(_, _, lag)| lag);
        assert!(replicas.move_round_of(&image, first).copied > 0);
        assert!(lag(&moving[0]) < Some(200), "the first mover's partition copied");
        assert_eq!(lag(&moving[1]), Some(200), "the second's untouched");
        for _ in 0..1_000 {
            if moving[1].future_dir().is_none() {
                break;
            }
            replicas.move_round_of(&image, second);
        }
        assert!(moving[1].future_dir().is_none(), "the second mover finished its move");
        assert!(moving[0].future_dir().is_some(), "and left the first's alone");
        finish_move(&replicas, &image, &moving[0]);
        for partition in &moving {
            assert_eq!(partition.lock_log().log_end_offset(), 200);
        }
        remove_all(dirs);
    }

    /// A move copies the replica in steps while it is written, swaps it in
    /// once caught up, and a restart opens it in its new directory.
    #[test]
    fn a_moved_replica_keeps_every_record_and_reopens_in_its_new_directory() {
        let (dirs, replicas, image, partition) = hosting_t(20);
        let (from, to) = (partition.log_dir(), the_other(&dirs, &partition));
        assert_eq!(replicas.alter_log_dir("t", 0, &to), ErrorCode::NONE.code());
        assert_eq!(partition.future_dir(), Some(to.clone()));
        let mut rounds = 0;
        while partition.future_dir().is_some() {
            let round = replicas.move_round(&image);
            rounds += 1;
            assert!(rounds < 1_000, "the move never ends: {round:?}");
            if rounds == 3 {
                // Written while moving: copied too.
                partition.append(&records(10), now_ms()).unwrap();
                let (dir, _, lag) = partition.future_state().unwrap();
                assert!(dir == to && lag > 0, "{lag}");
            }
        }
        assert!(rounds > 3, "several copy steps: {rounds}");
        assert_eq!(partition.log_dir(), to);
        assert_eq!(partition.lock_log().log_end_offset(), 210);
        assert!(!from.join("t-0").exists() && to.join("t-0").exists());
        partition.append(&records(10), now_ms()).unwrap();
        replicas.shutdown().unwrap();
        replicas.log_manager().mark_clean_shutdown(1).unwrap();
        drop((partition, replicas));

        let reopened = replica_manager(&dirs);
        reopened.sync_with_image(&image).unwrap();
        let partition = reopened.partition("t", 0).unwrap();
        assert_eq!((partition.log_dir(), partition.lock_log().log_end_offset()), (to, 220));
        remove_all(dirs);
    }

    /// `replica.alter.log.dirs.io.max.bytes.per.second` holds a move back
    /// (its rate measured over ten seconds at least, as Kafka's).
    #[test]
    fn a_move_copies_no_faster_than_its_throttle() {
        let (dirs, replicas, image, partition) = hosting_t(20);
        let size = partition.lock_log().size_bytes() as usize;
        replicas.throttles.alter_log_dirs.lock().unwrap().set_bound(Some(1_000));
        let to = the_other(&dirs, &partition);
        assert_eq!(replicas.alter_log_dir("t", 0, &to), ErrorCode::NONE.code());
        let copied: usize = (0..100).map(|_| replicas.move_round(&image).copied).sum();
        assert!(copied > 0 && copied < size / 2, "{copied} of {size} bytes copied at 1,000 bytes/s");
        assert!(partition.future_dir().is_some(), "still moving");
        replicas.throttles.alter_log_dirs.lock().unwrap().set_bound(None);
        finish_move(&replicas, &image, &partition);
        assert_eq!((partition.log_dir(), partition.lock_log().log_end_offset()), (to, 200));
        remove_all(dirs);
    }

    /// A stop during a move, and the source directory unreadable at the
    /// next start: the caught-up future replica is not taken for the
    /// replica (the metadata does not say it is), nor is an empty one
    /// created beside it; the replica stays closed until its directory
    /// is back, and the move then resumes and ends.
    #[test]
    fn a_future_replica_whose_source_directory_is_offline_at_start_is_left_alone() {
        let dirs: Vec<PathBuf> = (0..2).map(|_| tempfile::tempdir().unwrap().keep()).collect();
        let image = image(&["t"]);
        let replicas = replica_manager(&dirs);
        replicas.sync_with_image(&image).unwrap();
        let partition = replicas.partition("t", 0).unwrap();
        partition.append(&records(10), now_ms()).unwrap();
        let (from, to) = (partition.log_dir(), dirs.iter().find(|d| **d != partition.log_dir()).unwrap().clone());
        assert_eq!(replicas.alter_log_dir("t", 0, &to), ErrorCode::NONE.code());
        while partition.copy_to_future(1_000, now_ms()) != MoveStep::CaughtUp {}
        drop((partition, replicas));

        let away = make_unreadable(&from);
        let replicas = replica_manager(&dirs);
        replicas.sync_with_image(&image).unwrap();
        assert!(replicas.hosted_partition("t", 0).is_none(), "left closed");
        assert!(replicas.topic("t").unwrap().unopened.contains(&0));
        assert!(!to.join("t-0").exists(), "neither promoted nor created empty");
        drop(replicas);

        make_readable(&from, &away);
        let replicas = replica_manager(&dirs);
        replicas.sync_with_image(&image).unwrap();
        let partition = replicas.partition("t", 0).unwrap();
        assert_eq!((partition.log_dir(), partition.future_dir()), (from, Some(to.clone())), "the move resumes");
        finish_move(&replicas, &image, &partition);
        assert_eq!((partition.log_dir(), partition.lock_log().log_end_offset()), (to, 10));
        remove_all(dirs);
    }

    /// Where the metadata records directories: a future replica found
    /// without its current one (its directory unreadable at start) is the
    /// replica when the metadata names the future's directory (the
    /// controller recorded it once the copy caught up), else left closed.
    #[test]
    fn a_future_replica_found_alone_is_the_replica_only_where_the_metadata_names_its_directory() {
        let dirs: Vec<PathBuf> = (0..2).map(|_| tempfile::tempdir().unwrap().keep()).collect();
        let start = |dirs: &[PathBuf]| {
            let mut replicas = replica_manager(dirs);
            replicas.hosting = Hosting::ReplicasOf(1);
            replicas
        };
        let replicas = start(&dirs);
        let (from, to) = (dirs[0].clone(), dirs[1].clone());
        replicas.sync_with_image(&placed_in(&replicas, &from)).unwrap();
        let partition = replicas.partition("t", 0).expect("led here");
        partition.append(&records(10), now_ms()).unwrap();
        assert_eq!(replicas.alter_log_dir("t", 0, &to), ErrorCode::NONE.code());
        while partition.copy_to_future(1_000, now_ms()) != MoveStep::CaughtUp {}
        drop((partition, replicas));
        let away = make_unreadable(&from);

        // The metadata still names the source: left closed.
        let replicas = start(&dirs);
        replicas.sync_with_image(&placed_in(&replicas, &from)).unwrap();
        assert!(replicas.hosted_partition("t", 0).is_none() && !to.join("t-0").exists());
        drop(replicas);
        // It names the destination: the future replica is the replica.
        let replicas = start(&dirs);
        replicas.sync_with_image(&placed_in(&replicas, &to)).unwrap();
        let partition = replicas.hosted_partition("t", 0).expect("opened");
        assert_eq!((partition.log_dir(), partition.lock_log().log_end_offset()), (to, 10));
        drop((partition, replicas));
        make_readable(&from, &away);
        remove_all(dirs);
    }

    /// The controller recorded the destination, then the swap failed in
    /// it: the controller is told the replica stayed where it was.
    #[test]
    fn a_swap_that_fails_in_the_destination_tells_the_controller_the_replica_stayed() {
        let (dirs, mut replicas, _, partition) = hosting_t(3);
        replicas.hosting = Hosting::ReplicasOf(1);
        let (from, to) = (partition.log_dir(), the_other(&dirs, &partition));
        let placed_in = |dir: &Path| placed_in(&replicas, dir);
        assert_eq!(replicas.alter_log_dir("t", 0, &to), ErrorCode::NONE.code());
        while partition.copy_to_future(1_000, now_ms()) != MoveStep::CaughtUp {}
        let key = (partition.topic_id, 0);
        replicas.move_round(&placed_in(&from));
        assert_eq!(replicas.dir_assignments.queued().get(&key), replicas.log_dirs.id_of(&to).as_ref(), "asked");
        // The swap's rename into the destination fails: its name is taken.
        std::fs::create_dir(to.join("t-0")).unwrap();
        std::fs::write(to.join("t-0").join("x"), b"x").unwrap();
        replicas.move_round(&placed_in(&to));
        assert_eq!((partition.log_dir(), partition.future_dir()), (from.clone(), None), "given up");
        assert!(replicas.log_manager.is_offline(&to), "the destination failed");
        assert_eq!(replicas.dir_assignments.queued().get(&key), replicas.log_dirs.id_of(&from).as_ref(), "told");
        drop((partition, replicas));
        remove_all(dirs);
    }

    /// A move stopped cleanly: its future replica is flushed and
    /// checkpointed with the rest (in its own directory's checkpoints), and
    /// the next start opens it from there without recovering it; after an
    /// unclean stop it is recovered whole. Either way the move then
    /// completes with every record.
    #[test]
    fn a_move_stopped_cleanly_resumes_from_its_checkpoints() {
        use krabka_log::checkpoint::{read_offsets, RECOVERY_POINT_CHECKPOINT};
        let (dirs, replicas, image, partition) = hosting_t(30);
        let to = the_other(&dirs, &partition);
        assert_eq!(replicas.alter_log_dir("t", 0, &to), ErrorCode::NONE.code());
        for _ in 0..3 {
            assert!(matches!(partition.copy_to_future(1_000, now_ms()), MoveStep::Copied(_)));
        }
        let (_, _, lag) = partition.future_state().unwrap();
        let copied = 300 - lag;
        assert!(lag > 0 && copied > 0, "partly copied: {copied}");
        let mut entries = std::fs::read_dir(&to).unwrap().flatten().map(|e| e.path());
        let future_dir = entries.find(|p| p.to_string_lossy().ends_with("-future")).unwrap();
        drop(partition);
        replicas.shutdown().unwrap();
        replicas.log_manager().mark_clean_shutdown(1).unwrap();
        drop(replicas);
        let tp = TopicPartition::new("t", 0);
        let recovery = read_offsets(&to.join(RECOVERY_POINT_CHECKPOINT)).unwrap();
        assert_eq!(recovery.get(&tp), Some(&copied), "flushed to its end, checkpointed in its own directory");

        let open_future = |manager: &krabka_log::LogManager| {
            let config = krabka_log::LogConfig::default();
            let id = image.topics["t"].id;
            let (log, report) = manager.open_future_log(&tp, &id, &to, Some(&future_dir), config, now_ms()).unwrap();
            (log.log_end_offset(), report.recovered_segments)
        };
        // Opening the manager takes the markers away: the second is unclean.
        let clean = krabka_log::LogManager::open(&dirs, &[], &[]).unwrap();
        assert_eq!(open_future(&clean), (copied, 0), "after a clean shutdown: not recovered");
        drop(clean);
        let unclean = krabka_log::LogManager::open(&dirs, &[], &[]).unwrap();
        let (end, recovered) = open_future(&unclean);
        assert!(end == copied && recovered > 0, "after an unclean stop: recovered whole ({recovered} segments)");
        drop(unclean);

        let replicas = replica_manager(&dirs);
        replicas.sync_with_image(&image).unwrap();
        let partition = replicas.partition("t", 0).unwrap();
        assert_eq!(partition.future_dir(), Some(to.clone()), "the move resumes");
        finish_move(&replicas, &image, &partition);
        assert_eq!((partition.log_dir(), partition.lock_log().log_end_offset()), (to, 300));
        drop((partition, replicas));
        remove_all(dirs);
    }
}
