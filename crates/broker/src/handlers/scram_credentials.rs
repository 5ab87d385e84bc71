//! DescribeUserScramCredentials and AlterUserScramCredentials: SCRAM users
//! as `kafka-configs.sh --entity-type users` manages them. Describe reads
//! the metadata image (Kafka's ScramImage.describe: every user when none
//! is named, DUPLICATE_RESOURCE for a user named twice, RESOURCE_NOT_FOUND
//! for one without credentials); Alter is the controller's
//! `plan_alter_scram_credentials`, committed in one go.

use std::collections::BTreeMap;

use krabka_controller::scram::plan_alter_scram_credentials;
use krabka_controller::ApiError;
use krabka_protocol::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use krabka_protocol::describe_user_scram_credentials_response::{CredentialInfo, DescribeUserScramCredentialsResult};
use krabka_protocol::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse, ErrorCode,
};

use crate::authorization::{allowed_on_cluster, cluster_denied};
use crate::request::RequestContext;
use krabka_security::acl::AclOperation;

pub fn describe(
    ctx: &RequestContext<'_>,
    request: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    if !allowed_on_cluster(ctx, AclOperation::Describe) {
        let (error_code, error_message) = cluster_denied();
        return DescribeUserScramCredentialsResponse { error_code, error_message, ..Default::default() };
    }
    let image = ctx.broker.metadata.image();
    // Each user asked for, and whether it was asked for twice.
    let mut users: BTreeMap<String, bool> = BTreeMap::new();
    match request.users.filter(|asked| !asked.is_empty()) {
        Some(asked) => {
            for user in asked {
                users.entry(user.name).and_modify(|twice| *twice = true).or_insert(false);
            }
        }
        None => users.extend(image.scram_credentials.keys().map(|(user, _)| (user.clone(), false))),
    }
    let results = users
        .into_iter()
        .map(|(user, twice)| {
            let mut result = DescribeUserScramCredentialsResult { user: user.clone(), ..Default::default() };
            let infos: Vec<CredentialInfo> = image
                .scram_credentials
                .range((user.clone(), i8::MIN)..=(user.clone(), i8::MAX))
                .map(|(_, c)| CredentialInfo { mechanism: c.mechanism, iterations: c.iterations, ..Default::default() })
                .collect();
            if twice {
                result.error_code = ErrorCode::DUPLICATE_RESOURCE.code();
                result.error_message = Some(format!(
                    "Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
                ));
            } else if infos.is_empty() {
                result.error_code = ErrorCode::RESOURCE_NOT_FOUND.code();
                result.error_message =
                    Some(format!("Attempt to describe a user credential that does not exist: {user}"));
            } else {
                result.credential_infos = infos;
            }
            result
        })
        .collect();
    DescribeUserScramCredentialsResponse { results, ..Default::default() }
}

pub async fn alter(
    ctx: &RequestContext<'_>,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    if !allowed_on_cluster(ctx, AclOperation::Alter) {
        let (code, message) = cluster_denied();
        return failed(&request, code, &message.unwrap_or_default());
    }
    let planned = ctx
        .broker
        .metadata
        .control(|image| {
            let (records, results) = plan_alter_scram_credentials(image, &request.deletions, &request.upsertions);
            Ok::<_, ApiError>((records, results))
        })
        .await;
    let results = match planned {
        Ok((_, results)) => results
            .into_iter()
            .map(|r| AlterUserScramCredentialsResult {
                user: r.user,
                error_code: r.error.as_ref().map_or(0, |e| e.code),
                // An empty message is Kafka's null (its UNKNOWN_SERVER_ERROR
                // for a salted password no HMAC takes says nothing more).
                error_message: r.error.map(|e| e.message).filter(|message| !message.is_empty()),
                ..Default::default()
            })
            .collect(),
        // The commit failed: every user named is answered with its error.
        Err(e) => return failed(&request, e.code, &e.message),
    };
    AlterUserScramCredentialsResponse { results, ..Default::default() }
}

/// Every user of `request` answered with `code` and `message`, as Kafka's
/// getErrorResponse answers them (deletions, then upsertions).
pub fn failed(
    request: &AlterUserScramCredentialsRequest,
    code: i16,
    message: &str,
) -> AlterUserScramCredentialsResponse {
    let names = request.deletions.iter().map(|d| &d.name).chain(request.upsertions.iter().map(|u| &u.name));
    let results = names
        .map(|user| AlterUserScramCredentialsResult {
            user: user.clone(),
            error_code: code,
            error_message: Some(message.to_string()),
            ..Default::default()
        })
        .collect();
    AlterUserScramCredentialsResponse { results, ..Default::default() }
}
