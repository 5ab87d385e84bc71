//! DeleteTopics: which topics a request names (by name or by id), whether
//! they may go, and the `RemoveTopicRecord`s that delete them.

use std::collections::HashSet;

use krabka_metadata::{MetadataImage, MetadataRecord};
use krabka_protocol::delete_topics_response::DeletableTopicResult;
use krabka_protocol::{ErrorCode, RemoveTopicRecord, Uuid};

use crate::error::{ApiError, MutationQuota, THROTTLED};

/// A topic a DeleteTopics names: by name (v0-v5, or v6 with a name), else by id.
pub type TopicToDelete = (Option<String>, Uuid);

/// The records deleting the topics of `wanted` that exist (each once,
/// however often it is named), and each one's result in request order,
/// with the name and id the image knows it by. With `delete.topic.enable`
/// off every topic fails and nothing is deleted.
pub fn plan_delete_topics(
    image: &MetadataImage,
    wanted: &[TopicToDelete],
    deletion_enabled: bool,
    quota: MutationQuota<'_>,
) -> Result<(Vec<MetadataRecord>, Vec<DeletableTopicResult>), ApiError> {
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(wanted.len());
    let mut removed = HashSet::new();
    for (name, id) in wanted {
        let found = match name {
            Some(name) => image.topic(name),
            None => image.topic_by_id(id),
        };
        let mut result = DeletableTopicResult { name: name.clone(), topic_id: *id, ..Default::default() };
        let (error, message) = match found {
            _ if !deletion_enabled => (ErrorCode::TOPIC_DELETION_DISABLED, "Topic deletion is disabled."),
            Some(topic) if !removed.contains(&topic.id) && quota(topic.partitions.len()).is_err() => {
                result.name = Some(topic.name.clone());
                result.topic_id = topic.id;
                (ErrorCode::THROTTLING_QUOTA_EXCEEDED, THROTTLED)
            }
            Some(topic) => {
                result.name = Some(topic.name.clone());
                result.topic_id = topic.id;
                if removed.insert(topic.id) {
                    records.push(MetadataRecord::RemoveTopic(RemoveTopicRecord {
                        topic_id: topic.id,
                        ..Default::default()
                    }));
                }
                (ErrorCode::NONE, "")
            }
            None if name.is_some() => {
                (ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
            }
            None => (ErrorCode::UNKNOWN_TOPIC_ID, "This server does not host this topic ID."),
        };
        if error != ErrorCode::NONE {
            result.error_code = error.code();
            result.error_message = Some(message.into());
        }
        results.push(result);
    }
    Ok((records, results))
}
