//! The controller's request-shaped operations: each validates a request
//! against the current image, builds its records under the budget and
//! commits them (`Controller::commit`). The broker's handlers translate the
//! wire format around them; nothing here knows a socket.

use std::ops::Range;

use krabka_log::ReplicatedLog;
use krabka_protocol::create_partitions_response::CreatePartitionsTopicResult;
use krabka_protocol::delete_topics_response::DeletableTopicResult;
use krabka_protocol::{
    AlterConfigsRequest, CreatePartitionsRequest, CreateTopicsRequest, IncrementalAlterConfigsRequest,
};

use crate::configs::{plan_alter_configs, plan_incremental_alter_configs, ConfigOutcome};
use crate::controller::{Commit, Controller};
use crate::delete_topics::{plan_delete_topics, TopicToDelete};
use crate::error::{ApiError, MetadataError};
use crate::partitions::plan_create_partitions;
use crate::producer_ids::next_block;
use crate::topics::{
    check_total_partitions, plan_auto_create_topics, plan_create_topics, plan_internal_topic, validate_new_topics,
    NewTopic, TopicDefaults,
};

/// Each topic of a CreateTopics by name: the topic created (or, validate
/// only, creatable), or why not. In request order.
pub type CreatedTopics = Vec<(String, Result<NewTopic, ApiError>)>;

impl<L: ReplicatedLog> Controller<L> {
    /// CreateTopics: the total partition count first (over the limit fails
    /// the whole request), then each topic on its own, then against what
    /// exists.
    pub fn create_topics(
        &mut self,
        request: &CreateTopicsRequest,
        defaults: &TopicDefaults,
        now_ms: i64,
    ) -> Result<Commit<CreatedTopics>, ApiError> {
        check_total_partitions(request, defaults.num_partitions)?;
        let planned = validate_new_topics(&request.topics, defaults);
        let commit =
            self.commit(|image| plan_create_topics(image, &planned, request.validate_only, defaults.node_id), now_ms)?;
        let topics = planned
            .into_iter()
            .zip(&commit.result)
            .map(|((name, plan), outcome)| match outcome {
                Ok(()) => (name, plan),
                Err(e) => (name, Err(e.clone())),
            })
            .collect();
        Ok(Commit { update: commit.update, committed: commit.committed, result: topics })
    }

    /// Creates `topic` (an internal one: `__consumer_offsets`) if it does not exist.
    pub fn ensure_topic(&mut self, topic: &NewTopic, node_id: i32, now_ms: i64) -> Result<Commit<()>, ApiError> {
        self.commit(|image| plan_internal_topic(image, topic, node_id), now_ms)
    }

    /// Creates the topics of `names` a Metadata request found missing.
    pub fn auto_create_topics(
        &mut self,
        names: &[String],
        num_partitions: i32,
        node_id: i32,
        now_ms: i64,
    ) -> Result<Commit<()>, ApiError> {
        self.commit(|image| plan_auto_create_topics(image, names, num_partitions, node_id), now_ms)
    }

    pub fn delete_topics(
        &mut self,
        wanted: &[TopicToDelete],
        deletion_enabled: bool,
        now_ms: i64,
    ) -> Result<Commit<Vec<DeletableTopicResult>>, ApiError> {
        self.commit(|image| plan_delete_topics(image, wanted, deletion_enabled), now_ms)
    }

    pub fn create_partitions(
        &mut self,
        request: &CreatePartitionsRequest,
        node_id: i32,
        now_ms: i64,
    ) -> Result<Commit<Vec<CreatePartitionsTopicResult>>, ApiError> {
        self.commit(|image| plan_create_partitions(image, request, node_id), now_ms)
    }

    pub fn alter_configs(
        &mut self,
        request: &AlterConfigsRequest,
        now_ms: i64,
    ) -> Result<Commit<Vec<ConfigOutcome>>, ApiError> {
        self.commit(|image| plan_alter_configs(image, request), now_ms)
    }

    pub fn incremental_alter_configs(
        &mut self,
        request: &IncrementalAlterConfigsRequest,
        now_ms: i64,
    ) -> Result<Commit<Vec<ConfigOutcome>>, ApiError> {
        self.commit(|image| plan_incremental_alter_configs(image, request), now_ms)
    }

    /// AllocateProducerIds: reserves the next block of producer ids for
    /// `node_id` and returns it.
    pub fn allocate_producer_ids(&mut self, node_id: i32, now_ms: i64) -> Result<Commit<Range<i64>>, MetadataError> {
        self.commit(
            |image| {
                let (record, block) = next_block(image, node_id);
                Ok::<_, MetadataError>((vec![record], block))
            },
            now_ms,
        )
    }
}
