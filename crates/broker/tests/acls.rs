//! ACLs as Kafka 4.3.1's StandardAuthorizer applies them, managed with
//! `kafka-acls.sh` and checked with Kafka's Java tools: SASL users that may
//! only do what their ACLs allow (WRITE to produce, READ on the topic and
//! the group to consume, prefixed and DENY ACLs, topics hidden from
//! Metadata), super users, ACLs kept across a restart, and Kafka's
//! SECURITY_DISABLED without an authorizer.

mod support;

use krabka_protocol::{ApiKey, CreateAclsRequest, CreateAclsResponse, DescribeAclsRequest, DescribeAclsResponse};
use support::tools::{kafka_cli, run, venv_python};
use support::{free_port, BrokerProcess, RawClient};

const PLAIN_JAAS: &str = concat!(
    r#"org.apache.kafka.common.security.plain.PlainLoginModule required "#,
    r#"user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";"#
);

/// A broker with StandardAuthorizer: the harness's PLAINTEXT listener
/// (ANONYMOUS, a super user, as operators let their brokers' own
/// listener be) and a SASL_PLAINTEXT one for alice and bob.
struct AclBroker {
    broker: BrokerProcess,
    sasl_port: u16,
    dir: tempfile::TempDir,
}

impl AclBroker {
    fn start() -> Self {
        let sasl_port = free_port();
        let listeners = format!(
            "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port},CONTROLLER://127.0.0.1:0"
        );
        let jaas = format!("listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}");
        let keys = [
            listeners.as_str(),
            "sasl.enabled.mechanisms=PLAIN",
            &jaas,
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:ANONYMOUS;User:admin",
        ];
        let dir = tempfile::tempdir().expect("temp dir");
        AclBroker { broker: BrokerProcess::start(&keys), sasl_port, dir }
    }

    fn sasl(&self) -> String {
        format!("127.0.0.1:{}", self.sasl_port)
    }

    /// A Java client config logging in as `user`.
    fn login(&self, user: &str) -> String {
        let path = self.dir.path().join(format!("{user}.properties"));
        let text = format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=\
             org.apache.kafka.common.security.plain.PlainLoginModule required username=\"{user}\" password=\"{user}-secret\";\n"
        );
        std::fs::write(&path, text).expect("write client config");
        path.to_str().expect("utf-8 path").to_string()
    }

    /// `kafka-acls` through the PLAINTEXT listener (a super user) with `args`.
    fn acls(&self, args: &[&str]) -> String {
        let bootstrap = self.broker.bootstrap();
        let (ok, out) = kafka_cli(&[&["kafka-acls", "--bootstrap-server", &bootstrap][..], args].concat(), "");
        assert!(ok, "kafka-acls {args:?}: {out}");
        out
    }

    fn create_topic(&self, topic: &str) {
        let bootstrap = self.broker.bootstrap();
        let (ok, out) =
            kafka_cli(&["kafka-topics", "--bootstrap-server", &bootstrap, "--create", "--topic", topic], "");
        assert!(ok, "kafka-topics --create {topic}: {out}");
    }

    /// The console producer as `user`: (whether every record was sent,
    /// output). It exits 0 whatever happened to the records; failed
    /// sends are in its log.
    fn produce(&self, user: &str, topic: &str) -> (bool, String) {
        let sasl = self.sasl();
        let producer = ["kafka-console-producer", "--bootstrap-server", &sasl, "--topic", topic];
        let config = self.login(user);
        let props = ["--producer.config", &config, "--producer-property", "max.block.ms=10000"];
        let (ok, out) = kafka_cli(&[&producer[..], &props[..]].concat(), &format!("{user}-1\n{user}-2\n"));
        (ok && !out.contains("Exception"), out)
    }

    /// The console consumer as `user` in `group`: (success, output).
    fn consume(&self, user: &str, topic: &str, group: &str, count: usize) -> (bool, String) {
        let sasl = self.sasl();
        let config = self.login(user);
        let consumer = ["kafka-console-consumer", "--bootstrap-server", &sasl, "--topic", topic, "--group", group];
        let count = count.to_string();
        let more =
            ["--from-beginning", "--max-messages", &count, "--timeout-ms", "20000", "--consumer.config", &config];
        kafka_cli(&[&consumer[..], &more[..]].concat(), "")
    }

    fn list_topics(&self, user: &str) -> Vec<String> {
        let (sasl, config) = (self.sasl(), self.login(user));
        let (ok, out) =
            kafka_cli(&["kafka-topics", "--bootstrap-server", &sasl, "--list", "--command-config", &config], "");
        assert!(ok, "kafka-topics --list as {user}: {out}");
        out.lines().filter(|l| !l.contains(' ') && !l.is_empty()).map(str::to_string).collect()
    }
}

#[test]
fn principals_may_do_what_their_acls_allow_and_nothing_else() {
    let mut acl = AclBroker::start();
    for topic in ["orders", "pay-1", "pay-secret"] {
        acl.create_topic(topic);
    }
    // No ACL on a resource: nobody but super users (allow.everyone.if.no.acl.found=false).
    let (ok, out) = acl.produce("alice", "orders");
    assert!(!ok && out.contains("TopicAuthorizationException"), "alice without ACLs: {out}");
    acl.acls(&["--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders"]);
    let (ok, out) = acl.produce("alice", "orders");
    assert!(ok, "alice with WRITE on orders: {out}");

    // READ on the topic is not enough to consume in a group: READ on it too.
    acl.acls(&["--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders"]);
    let (ok, out) = acl.consume("alice", "orders", "billing", 2);
    // (The console consumer exits 0 whatever happened; its log says.)
    assert!(out.contains("GroupAuthorizationException"), "alice without READ on the group: {ok} {out}");
    acl.acls(&["--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", "billing"]);
    let (ok, out) = acl.consume("alice", "orders", "billing", 2);
    assert!(ok && out.contains("alice-1") && out.contains("alice-2"), "alice consuming: {out}");

    // Deleting a group's offsets takes DELETE on the group and READ on each topic.
    let delete_offsets = |topics: &[&str]| {
        let (sasl, config) = (acl.sasl(), acl.login("alice"));
        let delete = ["kafka-consumer-groups", "--bootstrap-server", &sasl, "--command-config", &config];
        let topics: Vec<&str> = topics.iter().flat_map(|t| ["--topic", *t]).collect();
        kafka_cli(&[&delete[..], &["--delete-offsets", "--group", "billing"], &topics[..]].concat(), "").1
    };
    let out = delete_offsets(&["orders"]);
    assert!(out.contains("GroupAuthorizationException"), "alice without DELETE on the group: {out}");
    acl.acls(&["--add", "--allow-principal", "User:alice", "--operation", "Delete", "--group", "billing"]);
    let out = delete_offsets(&["orders", "pay-1:0"]);
    let row = |topic: &str| out.lines().find(|l| l.starts_with(topic)).unwrap_or_default().trim_end().to_string();
    assert!(row("orders").ends_with("Successful"), "alice deleting orders' offsets: {out}");
    assert!(row("pay-1").contains("TopicAuthorization"), "alice may not READ pay-1: {out}");

    // Authorized operations as Kafka reports them: what alice may do, nothing more.
    let (ok, out) = run(&venv_python(), &["-c", AUTHORIZED_OPERATIONS, &acl.sasl()], "");
    assert!(ok, "{out}");
    assert_eq!(
        out.trim(),
        "topic orders: ['DESCRIBE', 'READ', 'WRITE']\ngroup billing: ['DELETE', 'DESCRIBE', 'READ']\ncluster: []",
        "{out}"
    );

    // A prefixed ALLOW, and a DENY that wins over it.
    let prefixed = ["--resource-pattern-type", "prefixed", "--topic", "pay-"];
    acl.acls(&[&["--add", "--allow-principal", "User:bob", "--operation", "All"][..], &prefixed[..]].concat());
    acl.acls(&["--add", "--deny-principal", "User:bob", "--operation", "Write", "--topic", "pay-secret"]);
    assert!(acl.produce("bob", "pay-1").0, "bob may write every pay- topic");
    let (ok, out) = acl.produce("bob", "pay-secret");
    assert!(!ok && out.contains("TopicAuthorizationException"), "the DENY wins: {out}");
    let (ok, _) = acl.produce("bob", "orders");
    assert!(!ok, "bob has no ACL on orders");

    // Metadata hides what a principal may not DESCRIBE (READ and WRITE imply it).
    assert_eq!(acl.list_topics("alice"), ["orders"]);
    assert_eq!(acl.list_topics("bob"), ["pay-1", "pay-secret"]);

    // Only a principal with ALTER on the cluster manages ACLs.
    let (sasl, alice) = (acl.sasl(), acl.login("alice"));
    let add = ["kafka-acls", "--bootstrap-server", &sasl, "--command-config", &alice, "--add"];
    let (ok, out) =
        kafka_cli(&[&add[..], &["--allow-principal", "User:alice", "--operation", "All", "--topic", "*"]].concat(), "");
    assert!(!ok || out.contains("ClusterAuthorizationException"), "alice granting herself everything: {out}");

    let listed = acl.acls(&["--list"]);
    for expected in [
        "name=orders",
        "name=pay-, patternType=PREFIXED",
        "name=billing",
        "principal=User:bob, host=*, operation=WRITE, permissionType=DENY",
    ] {
        assert!(listed.contains(expected), "{expected} in:\n{listed}");
    }
    // ACLs are kept in the metadata log: a restart keeps them.
    assert!(acl.broker.stop().success());
    acl.broker.restart();
    // (kafka-acls prints resources, and the entries of each, in a Java
    // hash order that changes from run to run: compared as sets.)
    let resources = |listing: &str| {
        let mut blocks: Vec<Vec<String>> = listing
            .split("\n\n")
            .map(|block| {
                let mut lines: Vec<String> = block.trim().lines().map(str::to_string).collect();
                lines.sort();
                lines
            })
            .collect();
        blocks.sort();
        blocks
    };
    assert_eq!(resources(&acl.acls(&["--list"])), resources(&listed));
    acl.acls(&["--remove", "--force", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders"]);
    // With WRITE on no topic at all she may not even be an idempotent
    // producer (InitProducerId: IDEMPOTENT_WRITE or some WRITE), as on Kafka.
    let (ok, out) = acl.produce("alice", "orders");
    assert!(!ok && out.contains("ClusterAuthorizationException"), "alice after her WRITE was removed: {out}");
    assert!(acl.produce("admin", "orders").0, "a super user needs no ACL");
}

/// librdkafka's admin client as alice, asking for authorized operations.
const AUTHORIZED_OPERATIONS: &str = r#"
import sys
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient
admin = AdminClient({"bootstrap.servers": sys.argv[1], "security.protocol": "SASL_PLAINTEXT",
                     "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"})
names = lambda ops: sorted(op.name for op in ops or [])
topic = admin.describe_topics(TopicCollection(["orders"]), include_authorized_operations=True)["orders"].result(30)
print("topic orders:", names(topic.authorized_operations))
group = admin.describe_consumer_groups(["billing"], include_authorized_operations=True)["billing"].result(30)
print("group billing:", names(group.authorized_operations))
cluster = admin.describe_cluster(include_authorized_operations=True).result(30)
print("cluster:", names(cluster.authorized_operations))
"#;

/// DescribeAcls for every ACL (ANY everywhere).
fn describe_every_acl() -> DescribeAclsRequest {
    DescribeAclsRequest {
        resource_type_filter: 1,
        pattern_type_filter: 1,
        operation: 1,
        permission_type: 1,
        ..Default::default()
    }
}

#[test]
fn without_an_authorizer_the_acl_apis_answer_security_disabled() {
    let broker = BrokerProcess::start(&[]);
    let mut client = RawClient::connect(&broker.bootstrap());
    let described: DescribeAclsResponse = client.request(ApiKey::DescribeAcls, 3, &describe_every_acl());
    assert_eq!(described.error_code, 54, "SECURITY_DISABLED");
    assert_eq!(described.error_message.as_deref(), Some("No Authorizer is configured on the broker"));
    let create = CreateAclsRequest { creations: vec![Default::default()], ..Default::default() };
    let created: CreateAclsResponse = client.request(ApiKey::CreateAcls, 3, &create);
    assert_eq!(created.results[0].error_code, 54);
    assert_eq!(created.results[0].error_message.as_deref(), Some("No Authorizer is configured."));
    let bootstrap = broker.bootstrap();
    let (ok, out) = kafka_cli(&["kafka-acls", "--bootstrap-server", &bootstrap, "--list"], "");
    assert!(!ok && out.contains("No Authorizer is configured on the broker"), "{out}");
}

/// A principal no ACL names (here ANONYMOUS, not a super user) is refused
/// by every API that checks, each with Kafka's error, and sees nothing:
/// raw requests, so each answer is checked field by field.
#[test]
fn a_principal_without_acls_is_refused_by_each_api_with_kafkas_errors() {
    use krabka_protocol::*;
    let broker = BrokerProcess::start(&[
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:admin",
    ]);
    let mut client = RawClient::connect(&broker.bootstrap());
    let (topic_denied, group_denied, cluster_denied, txn_denied) = (29, 30, 31, 53);

    let create = CreateTopicsRequest {
        topics: vec![create_topics_request::CreatableTopic {
            name: "orders".into(),
            num_partitions: 1,
            replication_factor: 1,
            ..Default::default()
        }],
        timeout_ms: 10_000,
        ..Default::default()
    };
    let created: CreateTopicsResponse = client.request(ApiKey::CreateTopics, 7, &create);
    assert_eq!(created.topics[0].error_code, topic_denied);
    let metadata: MetadataResponse = client.request(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert!(metadata.topics.is_empty(), "nothing to DESCRIBE: {:?}", metadata.topics);
    let named = MetadataRequest {
        topics: Some(vec![metadata_request::MetadataRequestTopic {
            name: Some("orders".into()),
            ..Default::default()
        }]),
        allow_auto_topic_creation: true,
        ..Default::default()
    };
    let metadata: MetadataResponse = client.request(ApiKey::Metadata, 12, &named);
    assert_eq!(metadata.topics[0].error_code, topic_denied, "named, missing and not creatable: refused alike");

    let find = FindCoordinatorRequest { key_type: 0, coordinator_keys: vec!["g".into()], ..Default::default() };
    let found: FindCoordinatorResponse = client.request(ApiKey::FindCoordinator, 4, &find);
    assert_eq!(found.coordinators[0].error_code, group_denied);
    let init: InitProducerIdResponse = client.request(ApiKey::InitProducerId, 4, &support::idempotent_producer_init());
    assert_eq!(init.error_code, cluster_denied, "an idempotent producer needs IDEMPOTENT_WRITE or some WRITE");
    let end = EndTxnRequest { transactional_id: "t".into(), producer_id: 1, ..Default::default() };
    let ended: EndTxnResponse = client.request(ApiKey::EndTxn, 3, &end);
    assert_eq!(ended.error_code, txn_denied);

    let broker_configs = DescribeConfigsRequest {
        resources: vec![describe_configs_request::DescribeConfigsResource {
            resource_type: 4,
            resource_name: "1".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let described: DescribeConfigsResponse = client.request(ApiKey::DescribeConfigs, 4, &broker_configs);
    assert_eq!(described.results[0].error_code, cluster_denied);
    let partitions =
        elect_leaders_request::TopicPartitions { topic: "orders".into(), partitions: vec![0], ..Default::default() };
    let elect =
        ElectLeadersRequest { topic_partitions: Some(vec![partitions]), timeout_ms: 1000, ..Default::default() };
    let elected: ElectLeadersResponse = client.request(ApiKey::ElectLeaders, 2, &elect);
    assert_eq!(elected.replica_election_results[0].partition_result[0].error_code, cluster_denied);
    assert_eq!(elected.error_code, cluster_denied, "v1+ also at the top, as Kafka's");
    let quotas: DescribeClientQuotasResponse =
        client.request(ApiKey::DescribeClientQuotas, 1, &DescribeClientQuotasRequest::default());
    assert_eq!(quotas.error_code, cluster_denied);
    let users: DescribeUserScramCredentialsResponse =
        client.request(ApiKey::DescribeUserScramCredentials, 0, &DescribeUserScramCredentialsRequest::default());
    assert_eq!(users.error_code, cluster_denied);
    let acls: DescribeAclsResponse = client.request(ApiKey::DescribeAcls, 3, &describe_every_acl());
    assert_eq!(acls.error_code, cluster_denied);
    let groups: ListGroupsResponse = client.request(ApiKey::ListGroups, 4, &ListGroupsRequest::default());
    assert!(groups.error_code == 0 && groups.groups.is_empty());
}
