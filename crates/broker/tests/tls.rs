//! TLS listeners (SSL and SASL_SSL) with PEM stores, as Kafka 4.3.1
//! configures them, driven by real clients: Kafka's Java tools, librdkafka
//! kafka-python and franz-go. Client certificates (`ssl.client.auth=required`) name
//! the principal through `ssl.principal.mapping.rules`, shown by a client
//! quota that holds back one certificate's user and not another's; brokers
//! replicate to each other over an SSL inter-broker listener. Every key and
//! certificate is made by the test with openssl.

mod support;

use std::io::Read;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use krabka_protocol::{ApiKey, MetadataRequest, MetadataResponse};
use support::tools::{kafka_cli, replicate_rf3_with_kafka_tools, run, venv_python, PYTHON_ROUND_TRIPS};
use support::{free_port, BrokerProcess, RawClient};

/// A test CA, and certificates it (or an untrusted CA) issued, in a
/// temporary directory: `<name>.crt`, and `<name>.pem` holding the key and
/// the certificate, as Kafka's PEM keystore file does.
struct Pki {
    dir: tempfile::TempDir,
}

fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl").args(args).current_dir(dir).output().expect("run openssl");
    assert!(output.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
}

impl Pki {
    fn new() -> Self {
        let pki = Pki { dir: tempfile::tempdir().expect("temp dir") };
        pki.authority("ca");
        pki.authority("rogue-ca");
        pki.issue("server", "/CN=krabka-broker", "ca");
        pki
    }

    fn path(&self, file: &str) -> String {
        self.dir.path().join(file).to_str().expect("utf-8 path").to_string()
    }

    fn key(&self, name: &str) {
        let args = ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out"];
        openssl(self.dir.path(), &[&args[..], &[&format!("{name}.key")]].concat());
    }

    fn authority(&self, name: &str) {
        self.key(name);
        let (key, crt, subject) = (format!("{name}.key"), format!("{name}.crt"), format!("/CN=krabka test {name}"));
        let args = ["req", "-x509", "-new", "-key", &key, "-subj", &subject, "-days", "2", "-out", &crt];
        openssl(self.dir.path(), &args);
    }

    /// A certificate for `subject` (server and client use, valid for
    /// localhost and 127.0.0.1) signed by `ca`.
    fn issue(&self, name: &str, subject: &str, ca: &str) {
        self.key(name);
        let dir = self.dir.path();
        let (key, csr, crt) = (format!("{name}.key"), format!("{name}.csr"), format!("{name}.crt"));
        openssl(dir, &["req", "-new", "-key", &key, "-subj", subject, "-out", &csr]);
        let extensions = "basicConstraints=CA:FALSE\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n\
                          extendedKeyUsage=serverAuth,clientAuth\n";
        std::fs::write(dir.join(format!("{name}.ext")), extensions).expect("write extensions");
        let (ca_crt, ca_key, ext) = (format!("{ca}.crt"), format!("{ca}.key"), format!("{name}.ext"));
        let sign = ["x509", "-req", "-in", &csr, "-CA", &ca_crt, "-CAkey", &ca_key, "-CAcreateserial"];
        openssl(dir, &[&sign[..], &["-days", "2", "-extfile", &ext, "-out", &crt]].concat());
        let pem = [std::fs::read(dir.join(&key)).unwrap(), std::fs::read(dir.join(&crt)).unwrap()].concat();
        std::fs::write(dir.join(format!("{name}.pem")), pem).expect("write keystore");
    }

    /// The broker's `ssl.*` keys: its PEM keystore, the CA as truststore.
    fn broker_keys(&self) -> Vec<String> {
        vec![
            "ssl.keystore.type=PEM".into(),
            format!("ssl.keystore.location={}", self.path("server.pem")),
            "ssl.truststore.type=PEM".into(),
            format!("ssl.truststore.location={}", self.path("ca.crt")),
        ]
    }

    /// A Java client config: `protocol`, trusting `trusted`, with the
    /// keystore of `certificate` if any, and `extra` lines.
    fn client_config(&self, protocol: &str, trusted: &str, certificate: Option<&str>, extra: &str) -> String {
        let mut text = format!(
            "security.protocol={protocol}\nssl.truststore.type=PEM\nssl.truststore.location={}\n{extra}\n",
            self.path(&format!("{trusted}.crt"))
        );
        if let Some(name) = certificate {
            text.push_str(&format!(
                "ssl.keystore.type=PEM\nssl.keystore.location={}\n",
                self.path(&format!("{name}.pem"))
            ));
        }
        let file = format!("client-{protocol}-{trusted}-{}-{}.properties", certificate.unwrap_or("none"), extra.len());
        std::fs::write(self.dir.path().join(&file), text).expect("write client config");
        self.path(&file)
    }
}

/// Kafka's console producer and consumer at `bootstrap`: the lines come
/// back in order.
fn java_round_trip(bootstrap: &str, config: &str, topic: &str) {
    let lines: Vec<String> = (0..20).map(|i| format!("{topic}-{i}")).collect();
    let producer = ["kafka-console-producer", "--bootstrap-server", bootstrap, "--topic", topic];
    let (ok, out) = kafka_cli(&[&producer[..], &["--producer.config", config]].concat(), &lines.join("\n"));
    assert!(ok, "console producer on {topic}: {out}");
    let consumer = ["kafka-console-consumer", "--bootstrap-server", bootstrap, "--topic", topic, "--from-beginning"];
    let more = ["--max-messages", "20", "--timeout-ms", "30000", "--consumer.config", config];
    let (ok, out) = kafka_cli(&[&consumer[..], &more[..]].concat(), "");
    assert!(ok, "console consumer on {topic}: {out}");
    let read: Vec<&str> = out.lines().filter(|l| l.starts_with(topic)).collect();
    assert_eq!(read, lines, "{out}");
}

/// A Kafka request in plaintext to a TLS port is answered with at most a
/// TLS alert (content type 21), and the connection closed.
fn assert_plaintext_refused(address: &str) {
    let mut client = RawClient::connect(address);
    client.send(ApiKey::Metadata, 12, &MetadataRequest::default());
    client.stream.set_read_timeout(Some(Duration::from_secs(10))).expect("read timeout");
    let mut answer = Vec::new();
    client.stream.read_to_end(&mut answer).expect("the broker closes the connection");
    assert!(answer.is_empty() || answer[0] == 21, "a plaintext request on the TLS port: answered {answer:?}");
}

/// franz-go (tests/clients/go) produces 300 records to `topic` (made
/// first through the PLAINTEXT listener, `plaintext`) at `bootstrap` and
/// reads them back, with `security` (its environment:
/// KRABKA_CHECK_TLS_CA, KRABKA_CHECK_TLS_CERT, KRABKA_CHECK_SASL).
fn franz_round_trip((plaintext, bootstrap): (&str, &str), topic: &str, security: &[(&str, String)]) {
    let create = ["kafka-topics", "--bootstrap-server", plaintext, "--create", "--topic", topic, "--partitions", "3"];
    let (ok, out) = kafka_cli(&create, "");
    assert!(ok, "kafka-topics --create {topic}: {out}");
    let binary = support::repo_root().join("target/client-bin/franz-check");
    for args in [vec!["produce", bootstrap, topic, "3", "300", "lz4"], vec!["consume", bootstrap, topic, "3", "300"]] {
        let output =
            Command::new(&binary).args(&args).envs(security.iter().cloned()).output().expect("run franz-check");
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "franz-check {}: {text}", args[0]);
    }
}

/// `kafka-topics --list` at `bootstrap` with `config`: (success, output).
fn list_topics(bootstrap: &str, config: &str) -> (bool, String) {
    kafka_cli(&["kafka-topics", "--bootstrap-server", bootstrap, "--list", "--command-config", config], "")
}

const PLAIN_JAAS: &str = concat!(
    r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" "#,
    r#"user_admin="admin-secret" user_alice="alice-secret";"#
);

/// librdkafka and kafka-python over SSL and SASL_SSL (PLAIN for
/// kafka-python, SCRAM-SHA-512 for librdkafka), trusting the test CA.
const PYTHON_CLIENTS: &str = r#"
import sys

ssl_bootstrap, sasl_ssl_bootstrap, ca, topic = sys.argv[1:5]

librdkafka_round_trip({"bootstrap.servers": ssl_bootstrap, "security.protocol": "SSL", "ssl.ca.location": ca},
                      topic + "-rd-ssl")
librdkafka_round_trip({"bootstrap.servers": sasl_ssl_bootstrap, "security.protocol": "SASL_SSL",
                       "ssl.ca.location": ca, "sasl.mechanism": "SCRAM-SHA-512",
                       "sasl.username": "alice", "sasl.password": "alice-secret"}, topic + "-rd-sasl-ssl")
kafka_python_round_trip(dict(bootstrap_servers=ssl_bootstrap, security_protocol="SSL", ssl_cafile=ca),
                        topic + "-py-ssl")
kafka_python_round_trip(dict(bootstrap_servers=sasl_ssl_bootstrap, security_protocol="SASL_SSL", ssl_cafile=ca,
                             sasl_mechanism="PLAIN", sasl_plain_username="alice",
                             sasl_plain_password="alice-secret"), topic + "-py-sasl-ssl")
print("python tls ok")
"#;

#[test]
fn ssl_and_sasl_ssl_listeners_serve_java_librdkafka_and_kafka_python() {
    let pki = Pki::new();
    let (ssl_port, sasl_ssl_port) = (free_port(), free_port());
    let listeners = format!(
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{ssl_port},SASL_SSL://127.0.0.1:{sasl_ssl_port},CONTROLLER://127.0.0.1:0"
    );
    let jaas = format!("listener.name.sasl_ssl.plain.sasl.jaas.config={PLAIN_JAAS}");
    let mut keys = pki.broker_keys();
    keys.extend([listeners, jaas, "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512".into()]);
    keys.push("krabka.metrics.listener=127.0.0.1:0".into());
    let broker = BrokerProcess::start(&keys.iter().map(String::as_str).collect::<Vec<_>>());
    let (ssl, sasl_ssl) = (format!("127.0.0.1:{ssl_port}"), format!("127.0.0.1:{sasl_ssl_port}"));
    assert_tls_fetch_path_reported(&broker);
    let alter = ["kafka-configs", "--bootstrap-server", &broker.bootstrap(), "--alter", "--add-config"];
    let user = ["SCRAM-SHA-512=[password=alice-secret]", "--entity-type", "users", "--entity-name", "alice"];
    let (ok, out) = kafka_cli(&[&alter[..], &user[..]].concat(), "");
    assert!(ok, "kafka-configs: {out}");

    java_round_trip(&ssl, &pki.client_config("SSL", "ca", None, ""), "tls-java-ssl");
    let scram = r#"sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";"#;
    java_round_trip(&sasl_ssl, &pki.client_config("SASL_SSL", "ca", None, scram), "tls-java-sasl-ssl");

    // A client that does not trust the broker's CA, and one that speaks
    // plaintext to the TLS port, are refused; the listener goes on serving.
    let (ok, out) = list_topics(&ssl, &pki.client_config("SSL", "rogue-ca", None, ""));
    assert!(!ok && out.contains("SSL handshake failed"), "an untrusted broker certificate: {out}");
    assert_plaintext_refused(&ssl);
    let wrong = pki.client_config("SASL_SSL", "ca", None, &scram.replace("alice-secret", "wrong"));
    let (ok, out) = list_topics(&sasl_ssl, &wrong);
    assert!(!ok && out.contains("Authentication failed"), "a wrong password over SASL_SSL: {out}");

    let script = [PYTHON_ROUND_TRIPS, PYTHON_CLIENTS].concat();
    let ca = pki.path("ca.crt");
    let (ok, out) = run(&venv_python(), &["-c", &script, &ssl, &sasl_ssl, &ca, "tls-python"], "");
    assert!(ok && out.contains("python tls ok"), "python clients over TLS: {out}");
    let ca = ("KRABKA_CHECK_TLS_CA", pki.path("ca.crt"));
    franz_round_trip((&broker.bootstrap(), &ssl), "tls-franz-ssl", std::slice::from_ref(&ca));
    let login = ("KRABKA_CHECK_SASL", "SCRAM-SHA-512:alice:alice-secret".to_string());
    franz_round_trip((&broker.bootstrap(), &sasl_ssl), "tls-franz-sasl-ssl", &[ca, login]);
    java_round_trip(&ssl, &pki.client_config("SSL", "ca", None, ""), "tls-java-after");

    // A new certificate written over the keystore file is served to new
    // connections, without a restart.
    pki.issue("renewed", "/CN=krabka-broker", "rogue-ca");
    std::fs::copy(pki.path("renewed.pem"), pki.path("server.pem")).expect("replace the keystore");
    java_round_trip(&ssl, &pki.client_config("SSL", "rogue-ca", None, ""), "tls-java-renewed");
    let (ok, out) = list_topics(&ssl, &pki.client_config("SSL", "ca", None, ""));
    assert!(!ok && out.contains("SSL handshake failed"), "the old CA no longer signs the broker's certificate: {out}");
}

/// The broker says in its log and metrics how fetches over TLS reach the
/// socket (in user space) and whether the kernel offers kTLS, as Python
/// finds it asking for the `tls` upper-layer protocol on a TCP socket.
fn assert_tls_fetch_path_reported(broker: &BrokerProcess) {
    let probe = "import socket\nl = socket.create_server(('127.0.0.1', 0))\n\
                 s = socket.create_connection(l.getsockname())\n\
                 try:\n    s.setsockopt(socket.IPPROTO_TCP, 31, b'tls'); print('offered')\n\
                 except OSError:\n    print('absent')\n";
    let (ok, out) = run("python3", &["-c", probe], "");
    assert!(ok, "the kTLS probe: {out}");
    let offered = if out.contains("offered") { 1 } else { 0 };
    let (status, body) = broker.http_get("/metrics");
    let text = String::from_utf8(body).expect("utf-8 metrics");
    assert_eq!(status, 200);
    assert!(text.lines().any(|l| l == format!("krabka_ktls_offered {offered}")), "{text}");
    assert!(text.lines().any(|l| l == "krabka_tls_fetch_zero_copy 0"), "{text}");
    assert!(broker.log().contains(&format!("ktls_offered={}", offered == 1)), "{}", broker.log());
}

/// `kafka-producer-perf-test` as the holder of `certificate`: the most its
/// requests were throttled (ms), from `--print-metrics`.
fn produce_throttle_max(bootstrap: &str, config: &str, topic: &str) -> f64 {
    let perf = ["kafka-producer-perf-test", "--topic", topic, "--num-records", "500", "--record-size", "1000"];
    let more = ["--throughput", "-1", "--print-metrics", "--producer.config", config];
    let bootstrap = format!("bootstrap.servers={bootstrap}");
    let (ok, out) = kafka_cli(&[&perf[..], &more[..], &["--producer-props", &bootstrap, "acks=1"]].concat(), "");
    assert!(ok, "producer perf test: {out}");
    let line = out.lines().find(|l| l.starts_with("producer-metrics:produce-throttle-time-max:"));
    let value = line.and_then(|l| l.rsplit(':').next()).and_then(|v| v.trim().parse().ok());
    value.unwrap_or_else(|| panic!("no produce-throttle-time-max in:\n{out}"))
}

#[test]
fn client_certificates_are_required_and_name_the_principal() {
    let pki = Pki::new();
    pki.issue("alice", "/O=Acme/OU=eng/CN=Alice", "ca");
    pki.issue("bob", "/O=Acme/OU=ops/CN=bob", "ca");
    pki.issue("mallory", "/O=Acme/CN=mallory", "rogue-ca");
    let ssl_port = free_port();
    let mut keys = pki.broker_keys();
    keys.extend([
        format!("listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{ssl_port},CONTROLLER://127.0.0.1:0"),
        "listener.name.ssl.ssl.client.auth=required".into(),
        // The subject "CN=Alice,OU=eng,O=Acme" is the user "alice".
        "ssl.principal.mapping.rules=RULE:^CN=([^,]*),OU=eng,.*$/$1/L,DEFAULT".into(),
    ]);
    let broker = BrokerProcess::start(&keys.iter().map(String::as_str).collect::<Vec<_>>());
    let ssl = format!("127.0.0.1:{ssl_port}");
    // 500 records of 1 KB count as 50 KB/s over Kafka's shortest window
    // (10 s): over alice's quota, so her producer is throttled.
    let alter = ["kafka-configs", "--bootstrap-server", &broker.bootstrap(), "--alter", "--add-config"];
    let quota = ["producer_byte_rate=40000", "--entity-type", "users", "--entity-name", "alice"];
    let (ok, out) = kafka_cli(&[&alter[..], &quota[..]].concat(), "");
    assert!(ok, "kafka-configs: {out}");

    let alice = pki.client_config("SSL", "ca", Some("alice"), "");
    let bob = pki.client_config("SSL", "ca", Some("bob"), "");
    let throttled = produce_throttle_max(&ssl, &alice, "certificates-alice");
    assert!(throttled > 0.0, "alice's certificate is user alice, held to her quota");
    let free = produce_throttle_max(&ssl, &bob, "certificates-bob");
    assert_eq!(free, 0.0, "bob's certificate is another user (DEFAULT rule: his whole subject)");

    // Without a certificate, or with one from an untrusted CA: refused
    // (with TLSv1.3 the client hears it after its side of the handshake).
    let (ok, out) = list_topics(&ssl, &pki.client_config("SSL", "ca", None, ""));
    assert!(!ok && out.contains("certificate_required"), "no client certificate: {out}");
    let (ok, out) = list_topics(&ssl, &pki.client_config("SSL", "ca", Some("mallory"), ""));
    assert!(!ok && out.contains("SslAuthenticationException"), "an untrusted client certificate: {out}");
    let ca = ("KRABKA_CHECK_TLS_CA", pki.path("ca.crt"));
    franz_round_trip(
        (&broker.bootstrap(), &ssl),
        "certificates-franz",
        &[ca, ("KRABKA_CHECK_TLS_CERT", pki.path("bob.pem"))],
    );
    java_round_trip(&ssl, &bob, "certificates-after");

    // The truststore file rewritten to trust the other CA too: mallory's
    // certificate is accepted on new connections, without a restart.
    let read = |file: &str| std::fs::read(pki.path(file)).expect("read a certificate");
    std::fs::write(pki.path("ca.crt"), [read("ca.crt"), read("rogue-ca.crt")].concat()).expect("write the truststore");
    java_round_trip(&ssl, &pki.client_config("SSL", "ca", Some("mallory"), ""), "certificates-mallory");
    assert!(broker.log().contains("TLS truststore changed"), "{}", broker.log());
}

#[test]
fn brokers_replicate_over_an_ssl_inter_broker_listener() {
    // The one client listener, named PLAINTEXT, speaks SSL with client
    // certificates required, and is the inter-broker listener: followers
    // and the coordinators' markers connect with the brokers' certificate.
    let pki = Pki::new();
    let mut keys = pki.broker_keys();
    keys.extend([
        "listener.security.protocol.map=PLAINTEXT:SSL,CONTROLLER:PLAINTEXT".into(),
        "ssl.client.auth=required".into(),
    ]);
    let nodes = BrokerProcess::start_cluster(3, &keys.iter().map(String::as_str).collect::<Vec<_>>());
    let config = pki.client_config("SSL", "ca", Some("server"), "");
    replicate_rf3_with_kafka_tools((&nodes[0].bootstrap(), &nodes[2].bootstrap()), &config);
    for node in &nodes {
        let log = node.log();
        assert!(!log.contains("TLS handshake failed"), "node {} refused a peer:\n{log}", node.port);
    }
}

/// The controller listener's users: the nodes' own login and an operator's.
const CONTROLLER_JAAS: &str = concat!(
    r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="controller" "#,
    r#"password="controller-secret" user_controller="controller-secret" user_admin="admin-secret";"#
);

#[test]
fn the_quorum_and_the_brokers_talk_over_a_sasl_ssl_controller_listener() {
    // Raft between the three voters, and each broker's registration,
    // heartbeats, ISR changes and forwarded CreateTopics to the active
    // controller, all go over a SASL_SSL controller listener, as a Kafka
    // cluster configured so.
    let pki = Pki::new();
    let mut keys = pki.broker_keys();
    keys.extend([
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL".into(),
        "listener.name.controller.sasl.enabled.mechanisms=PLAIN".into(),
        "sasl.mechanism.controller.protocol=PLAIN".into(),
        format!("listener.name.controller.plain.sasl.jaas.config={CONTROLLER_JAAS}"),
        // The nodes log in as super users; the PLAINTEXT listener's
        // ANONYMOUS is one too, to manage the ACLs.
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer".into(),
        "super.users=User:controller;User:ANONYMOUS".into(),
    ]);
    let nodes = BrokerProcess::start_cluster(3, &keys.iter().map(String::as_str).collect::<Vec<_>>());
    let plaintext = pki.client_config("PLAINTEXT", "ca", None, "");
    replicate_rf3_with_kafka_tools((&nodes[0].bootstrap(), &nodes[2].bootstrap()), &plaintext);
    // A broker-only node, which does not serve the listener, logs in to it
    // with the listener's truststore and its own login: it registers.
    let voters: Vec<String> =
        nodes.iter().enumerate().map(|(i, n)| format!("{}@127.0.0.1:{}", i + 1, n.controller_port)).collect();
    let extra: Vec<&str> = keys.iter().map(String::as_str).collect();
    let observer = BrokerProcess::start_broker_only(4, &voters.join(","), support::TEST_CLUSTER_ID, &extra);
    support::wait_for("the broker-only node to register", Duration::from_secs(60), || {
        let answer: MetadataResponse =
            RawClient::connect(&nodes[0].bootstrap()).request(ApiKey::Metadata, 12, &MetadataRequest::default());
        answer.brokers.iter().any(|b| b.node_id == 4 && b.port == i32::from(observer.port))
    });
    // So does an Apache Kafka 4.3.1 broker: its raft client and its
    // lifecycle manager log in to krabka's controllers over SASL_SSL.
    let kafka_dir = tempfile::tempdir().expect("temp dir");
    let kafka_config = format!(
        "listener.security.protocol.map=CONTROLLER:SASL_SSL,PLAINTEXT:PLAINTEXT\n\
         sasl.mechanism.controller.protocol=PLAIN\n\
         listener.name.controller.plain.sasl.jaas.config={CONTROLLER_JAAS}\n\
         listener.name.controller.ssl.truststore.type=PEM\n\
         listener.name.controller.ssl.truststore.location={}\n\
         authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n\
         super.users=User:controller;User:ANONYMOUS\n",
        pki.path("ca.crt")
    );
    let (kafka_id, kafka_port) = (5, free_port());
    let _kafka = support::KafkaNode::start_broker(
        kafka_dir.path(),
        kafka_id,
        kafka_port,
        &voters.join(","),
        support::TEST_CLUSTER_ID,
        &kafka_config,
    );
    support::wait_for("the Kafka broker to register", Duration::from_secs(120), || {
        let answer: MetadataResponse =
            RawClient::connect(&nodes[0].bootstrap()).request(ApiKey::Metadata, 12, &MetadataRequest::default());
        answer.brokers.iter().any(|b| b.node_id == kafka_id && b.port == i32::from(kafka_port))
    });

    // Kafka's admin client on the controller listener, as an operator.
    let controller = format!("127.0.0.1:{}", nodes[1].controller_port);
    let login = |password: &str| {
        let jaas = format!(
            r#"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="{password}";"#
        );
        pki.client_config("SASL_SSL", "ca", None, &format!("sasl.mechanism=PLAIN\n{jaas}"))
    };
    let quorum = |config: &str| {
        let args = ["kafka-metadata-quorum", "--bootstrap-controller", &controller, "--command-config", config];
        kafka_cli(&[&args[..], &["describe", "--status"]].concat(), "")
    };
    let cluster_id = |config: &str| {
        let args = ["kafka-cluster", "cluster-id", "--bootstrap-controller", &controller, "--command-config", config];
        kafka_cli(&args, "")
    };
    // The controllers check the operator's ACLs as Kafka's do: DESCRIBE
    // for DescribeQuorum, ALTER for DescribeCluster on the controller.
    let admin = login("admin-secret");
    let (_, out) = quorum(&admin);
    assert!(out.contains("ClusterAuthorizationException"), "no ACL, no describe: {out}");
    let (_, out) = cluster_id(&admin);
    assert!(out.contains("ClusterAuthorizationException"), "no ACL, no cluster id: {out}");
    let grant = ["--add", "--allow-principal", "User:admin", "--operation", "Alter", "--cluster"];
    let (ok, out) = kafka_cli(&[&["kafka-acls", "--bootstrap-server", &nodes[0].bootstrap()][..], &grant].concat(), "");
    assert!(ok, "kafka-acls --add: {out}");
    // ALTER implies DESCRIBE; the ACL reaches node 2 through the log.
    let mut described = String::new();
    support::wait_for("the ACL to allow admin", Duration::from_secs(60), || {
        described = quorum(&admin).1;
        described.contains("CurrentVoters:")
    });
    assert!(described.contains("LeaderId:"), "describe --status: {described}");
    let (ok, out) = cluster_id(&admin);
    assert!(ok && out.contains(&format!("Cluster ID: {}", support::TEST_CLUSTER_ID)), "cluster-id: {out}");
    let (_, out) = quorum(&login("wrong"));
    assert!(out.contains("Authentication failed"), "a wrong password is refused: {out}");
    assert_plaintext_refused(&controller);
    assert!(nodes[1].log().contains("failed authentication on the controller listener"));
    for node in &nodes {
        let log = node.log();
        assert!(!log.contains("cannot reach") && !log.contains("TLS handshake failed"), "{}:\n{log}", node.port);
    }
}
