//! SASL on a SASL_PLAINTEXT listener beside a PLAINTEXT one, as Kafka 4.3.1
//! serves it: the authenticator's gate and its answers byte for byte (raw
//! protocol), re-authentication and session expiry (KIP-368), and real
//! clients (Kafka's Java tools, librdkafka, kafka-python) authenticating
//! with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, the SCRAM users made with
//! `kafka-configs --alter --add-config 'SCRAM-SHA-256=[...]'`.

mod support;

use std::io::Write;
use std::time::{Duration, Instant};

use bytes::Bytes;
use krabka_protocol::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse, MetadataRequest, MetadataResponse, SaslAuthenticateRequest,
    SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use support::tools::{kafka_cli, replicate_rf3_with_kafka_tools, run, venv_python, PYTHON_ROUND_TRIPS};
use support::{free_port, BrokerProcess, RawClient};

const PLAIN_JAAS: &str = concat!(
    r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" "#,
    r#"user_admin="admin-secret" user_alice="alice-secret";"#
);

const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const ILLEGAL_SASL_STATE: i16 = 34;
const SASL_AUTHENTICATION_FAILED: i16 = 58;

/// A broker with a PLAINTEXT listener (the harness's), a SASL_PLAINTEXT
/// one on `sasl_port` enabling PLAIN and both SCRAMs, and `extra` keys.
struct SaslBroker {
    broker: BrokerProcess,
    sasl_port: u16,
}

impl SaslBroker {
    fn start(extra: &[&str]) -> Self {
        let sasl_port = free_port();
        let listeners = format!(
            "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port},CONTROLLER://127.0.0.1:0"
        );
        let jaas = format!("listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}");
        let mut keys = vec![listeners.as_str(), "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512", &jaas];
        keys.extend_from_slice(extra);
        SaslBroker { broker: BrokerProcess::start(&keys), sasl_port }
    }

    fn sasl_bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.sasl_port)
    }

    fn connect(&self) -> RawClient {
        RawClient::connect(&self.sasl_bootstrap())
    }
}

fn handshake(client: &mut RawClient, version: i16, mechanism: &str) -> SaslHandshakeResponse {
    let request = SaslHandshakeRequest { mechanism: mechanism.into(), ..Default::default() };
    client.request(ApiKey::SaslHandshake, version, &request)
}

fn authenticate(client: &mut RawClient, token: &[u8]) -> SaslAuthenticateResponse {
    let request = SaslAuthenticateRequest { auth_bytes: Bytes::copy_from_slice(token), ..Default::default() };
    client.request(ApiKey::SaslAuthenticate, 2, &request)
}

fn plain_token(user: &str, password: &str) -> Vec<u8> {
    format!("\0{user}\0{password}").into_bytes()
}

/// A connection authenticated with PLAIN as `user`.
fn plain_login(broker: &SaslBroker, user: &str, password: &str) -> (RawClient, SaslAuthenticateResponse) {
    let mut client = broker.connect();
    assert_eq!(handshake(&mut client, 1, "PLAIN").error_code, 0);
    let answer = authenticate(&mut client, &plain_token(user, password));
    (client, answer)
}

fn metadata_ports(client: &mut RawClient) -> Vec<i32> {
    let response: MetadataResponse = client.request(ApiKey::Metadata, 12, &MetadataRequest::default());
    response.brokers.iter().map(|b| b.port).collect()
}

#[test]
fn the_sasl_listener_serves_nothing_before_authentication() {
    let broker =
        SaslBroker::start(&["connection.failed.authentication.delay.ms=400", "sasl.server.max.receive.size=1024"]);

    // Only ApiVersions and SaslHandshake come before authentication.
    let mut client = broker.connect();
    client.send(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert!(client.is_closed(), "Metadata before authentication closes the connection");
    let mut client = broker.connect();
    let versions: ApiVersionsResponse = client.request(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert_eq!(versions.error_code, 0);
    let listed = |key: ApiKey| {
        versions.api_keys.iter().find(|k| k.api_key == key as i16).map(|k| (k.min_version, k.max_version))
    };
    assert_eq!(listed(ApiKey::SaslHandshake), Some((0, 1)));
    assert_eq!(listed(ApiKey::SaslAuthenticate), Some((0, 2)));

    // An unsupported mechanism is answered with the enabled ones, then closed.
    let refused = handshake(&mut client, 1, "GSSAPI");
    assert_eq!(refused.error_code, UNSUPPORTED_SASL_MECHANISM);
    assert_eq!(refused.mechanisms, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]);
    assert!(client.is_closed());

    // A wrong password: answered after the failed-authentication delay, then closed.
    let started = Instant::now();
    let (mut client, answer) = plain_login(&broker, "alice", "wrong");
    assert!(started.elapsed() >= Duration::from_millis(400), "answered after {:?}", started.elapsed());
    assert_eq!(answer.error_code, SASL_AUTHENTICATION_FAILED);
    assert_eq!(answer.error_message.as_deref(), Some("Authentication failed: Invalid username or password"));
    assert!(client.is_closed());

    // Frames past sasl.server.max.receive.size are refused before authentication.
    let mut client = broker.connect();
    client.stream.write_all(&2000u32.to_be_bytes()).unwrap();
    client.stream.write_all(&[0u8; 2000]).unwrap();
    assert!(client.is_closed(), "a 2000-byte frame before authentication");
}

#[test]
fn plain_authentication_then_metadata_names_the_listener_of_the_connection() {
    let broker = SaslBroker::start(&[]);
    let (mut client, answer) = plain_login(&broker, "alice", "alice-secret");
    // Kafka leaves the message at its generated default, "".
    assert_eq!((answer.error_code, answer.error_message.as_deref()), (0, Some("")));
    assert_eq!(answer.session_lifetime_ms, 0, "no connections.max.reauth.ms");
    assert_eq!(metadata_ports(&mut client), [i32::from(broker.sasl_port)]);
    // Once authenticated, SASL requests are answered ILLEGAL_SASL_STATE and the connection goes on.
    let again = authenticate(&mut client, &plain_token("alice", "alice-secret"));
    assert_eq!(again.error_code, ILLEGAL_SASL_STATE);
    assert_eq!(metadata_ports(&mut client), [i32::from(broker.sasl_port)]);

    let mut plaintext = RawClient::connect(&broker.broker.bootstrap());
    assert_eq!(metadata_ports(&mut plaintext), [i32::from(broker.broker.port)]);
    assert_eq!(handshake(&mut plaintext, 1, "PLAIN").error_code, ILLEGAL_SASL_STATE, "no SASL on PLAINTEXT");

    // A v0 handshake: the tokens then travel raw, without request headers.
    let mut client = broker.connect();
    assert_eq!(handshake(&mut client, 0, "PLAIN").error_code, 0);
    let token = plain_token("admin", "admin-secret");
    client.stream.write_all(&(token.len() as u32).to_be_bytes()).unwrap();
    client.stream.write_all(&token).unwrap();
    assert!(client.read_frame().expect("PLAIN's empty final token").is_empty());
    assert_eq!(metadata_ports(&mut client), [i32::from(broker.sasl_port)]);
}

#[test]
fn sessions_reauthenticate_and_expire_at_connections_max_reauth_ms() {
    let broker = SaslBroker::start(&["connections.max.reauth.ms=3000"]);
    let (mut client, answer) = plain_login(&broker, "alice", "alice-secret");
    assert_eq!((answer.error_code, answer.session_lifetime_ms), (0, 3000));
    // KIP-368: a new handshake on the connection re-authenticates it.
    assert_eq!(handshake(&mut client, 1, "PLAIN").error_code, 0);
    let again = authenticate(&mut client, &plain_token("alice", "alice-secret"));
    assert_eq!((again.error_code, again.session_lifetime_ms), (0, 3000));
    assert_eq!(metadata_ports(&mut client), [i32::from(broker.sasl_port)]);
    // ... as the same principal only.
    assert_eq!(handshake(&mut client, 1, "PLAIN").error_code, 0);
    let other = authenticate(&mut client, &plain_token("admin", "admin-secret"));
    assert_eq!(other.error_code, SASL_AUTHENTICATION_FAILED);
    assert!(other.error_message.unwrap_or_default().contains("Cannot change principals"));
    assert!(client.is_closed());

    // A session not renewed ends with its lifetime: the next request closes it.
    let (mut client, _) = plain_login(&broker, "alice", "alice-secret");
    std::thread::sleep(Duration::from_millis(3300));
    client.send(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert!(client.is_closed(), "a request after the session expired");
    // Too late to re-authenticate, too.
    let (mut client, _) = plain_login(&broker, "alice", "alice-secret");
    std::thread::sleep(Duration::from_millis(3300));
    let request = SaslHandshakeRequest { mechanism: "PLAIN".into(), ..Default::default() };
    client.send(ApiKey::SaslHandshake, 1, &request);
    assert!(client.is_closed(), "a handshake after the session expired");
}

/// A small xorshift generator: the hostile test is replayable from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A valid exchange's token, mutated: bytes flipped, cut, or grown.
fn mutated(rng: &mut Rng, token: &[u8]) -> Vec<u8> {
    let mut token = token.to_vec();
    for _ in 0..=rng.below(4) {
        match rng.below(4) {
            0 if !token.is_empty() => {
                let at = rng.below(token.len());
                token[at] = rng.next() as u8;
            }
            1 => token.truncate(rng.below(token.len() + 1)),
            2 => token.extend((0..rng.below(64)).map(|_| rng.next() as u8)),
            _ => token.insert(rng.below(token.len() + 1), b','),
        }
    }
    token
}

#[test]
fn hostile_tokens_before_authentication_leave_the_listener_serving() {
    let broker = SaslBroker::start(&["connection.failed.authentication.delay.ms=0"]);
    let seed =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64) | 1;
    let mut rng = Rng(seed);
    let mechanisms = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];
    let scram_first = b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL".to_vec();
    let scram_final = b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=".to_vec();
    let seeds = [plain_token("alice", "alice-secret"), scram_first, scram_final];
    let mut answered = 0;
    for _ in 0..300 {
        let mut client = broker.connect();
        let mechanism = mechanisms[rng.below(mechanisms.len())];
        assert_eq!(handshake(&mut client, 1, mechanism).error_code, 0, "{mechanism} refused (seed {seed})");
        // Up to three tokens, each a mutation of a valid one; the broker
        // answers or closes, and never hangs or dies.
        for _ in 0..=rng.below(3) {
            let pick = rng.below(seeds.len());
            let token = mutated(&mut rng, &seeds[pick]);
            let request = SaslAuthenticateRequest { auth_bytes: Bytes::from(token), ..Default::default() };
            client.send(ApiKey::SaslAuthenticate, 2, &request);
            match client.read_frame() {
                Ok(_) => answered += 1,
                Err(_) => break,
            }
        }
    }
    assert!(answered > 100, "the broker answered {answered} tokens (seed {seed})");
    // Still serving, and a real login still works.
    let (mut client, answer) = plain_login(&broker, "alice", "alice-secret");
    assert_eq!(answer.error_code, 0, "seed {seed}");
    assert_eq!(metadata_ports(&mut client), [i32::from(broker.sasl_port)]);
    assert!(!broker.broker.log().contains("panicked"), "seed {seed}");
}

// ---- Real clients -------------------------------------------------------

/// A Java client config file for `mechanism` as `user`.
fn client_config(dir: &std::path::Path, mechanism: &str, user: &str, password: &str) -> String {
    let module = if mechanism == "PLAIN" {
        "org.apache.kafka.common.security.plain.PlainLoginModule"
    } else {
        "org.apache.kafka.common.security.scram.ScramLoginModule"
    };
    let path = dir.join(format!("{mechanism}-{user}-{password}.properties"));
    let text = format!(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n\
         sasl.jaas.config={module} required username=\"{user}\" password=\"{password}\";\n"
    );
    std::fs::write(&path, text).expect("write client config");
    path.to_str().expect("utf-8 path").to_string()
}

/// `kafka-configs --alter --add-config CREDENTIAL` for `user`: one
/// mechanism per call, as Kafka's controller refuses a user altered twice
/// in one request (DUPLICATE_RESOURCE).
fn add_scram_user(bootstrap: &str, user: &str, credential: &str) {
    let alter = ["kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--add-config", credential];
    let (ok, out) = kafka_cli(&[&alter[..], &["--entity-type", "users", "--entity-name", user]].concat(), "");
    assert!(ok, "kafka-configs --alter --add-config {credential}: {out}");
}

/// Kafka's console producer and consumer over the SASL listener: the
/// lines come back, in order.
fn java_round_trip(broker: &SaslBroker, config: &str, topic: &str) {
    let bootstrap = broker.sasl_bootstrap();
    let lines: Vec<String> = (0..20).map(|i| format!("{topic}-{i}")).collect();
    let producer_args = ["kafka-console-producer", "--bootstrap-server", &bootstrap, "--topic", topic];
    let (ok, out) = kafka_cli(&[&producer_args[..], &["--producer.config", config]].concat(), &lines.join("\n"));
    assert!(ok, "console producer on {topic}: {out}");
    let consumer_args = ["kafka-console-consumer", "--bootstrap-server", &bootstrap, "--topic", topic];
    let more = ["--from-beginning", "--max-messages", "20", "--timeout-ms", "30000", "--consumer.config", config];
    let (ok, out) = kafka_cli(&[&consumer_args[..], &more[..]].concat(), "");
    assert!(ok, "console consumer on {topic}: {out}");
    let read: Vec<&str> = out.lines().filter(|l| l.starts_with(topic)).collect();
    assert_eq!(read, lines, "{out}");
}

#[test]
fn java_tools_authenticate_with_plain_and_scram_users_made_by_kafka_configs() {
    let broker = SaslBroker::start(&[]);
    let dir = tempfile::tempdir().expect("temp dir");
    let plaintext = broker.broker.bootstrap();
    // SCRAM users are made over the PLAINTEXT listener, as an operator
    // bootstraps them before any SASL user exists.
    add_scram_user(&plaintext, "alice", "SCRAM-SHA-256=[iterations=8192,password=alice-secret]");
    add_scram_user(&plaintext, "alice", "SCRAM-SHA-512=[password=alice-secret]");
    let describe = ["kafka-configs", "--bootstrap-server", &plaintext, "--describe", "--entity-type", "users"];
    let (ok, out) = kafka_cli(&describe, "");
    assert!(ok, "kafka-configs --describe: {out}");
    assert!(out.contains("SCRAM-SHA-256=iterations=8192") && out.contains("SCRAM-SHA-512=iterations=4096"), "{out}");
    // Kafka's controller refuses a user altered twice in one request.
    let both = "SCRAM-SHA-256=[password=x],SCRAM-SHA-512=[password=x]";
    let alter = ["kafka-configs", "--bootstrap-server", &plaintext, "--alter", "--add-config", both];
    let (ok, out) = kafka_cli(&[&alter[..], &["--entity-type", "users", "--entity-name", "carol"]].concat(), "");
    assert!(!ok && out.contains("cannot be altered twice in the same request"), "{out}");
    let mut admin = RawClient::connect(&plaintext);
    let described: DescribeUserScramCredentialsResponse =
        admin.request(ApiKey::DescribeUserScramCredentials, 0, &DescribeUserScramCredentialsRequest::default());
    let users: Vec<&str> = described.results.iter().map(|r| r.user.as_str()).collect();
    assert_eq!(users, ["alice"], "nothing of carol's was stored");

    for (mechanism, topic) in
        [("PLAIN", "sasl-plain"), ("SCRAM-SHA-256", "sasl-scram-256"), ("SCRAM-SHA-512", "sasl-scram-512")]
    {
        java_round_trip(&broker, &client_config(dir.path(), mechanism, "alice", "alice-secret"), topic);
    }
    // A wrong password: the Java client reports Kafka's authentication failure.
    for mechanism in ["PLAIN", "SCRAM-SHA-512"] {
        let config = client_config(dir.path(), mechanism, "alice", "not-her-password");
        let bootstrap = broker.sasl_bootstrap();
        let (ok, out) =
            kafka_cli(&["kafka-topics", "--bootstrap-server", &bootstrap, "--list", "--command-config", &config], "");
        assert!(!ok && out.contains("Authentication failed"), "{mechanism} with a wrong password: {out}");
    }
    // Deleting a credential locks its mechanism out.
    let delete = ["kafka-configs", "--bootstrap-server", &plaintext, "--alter", "--delete-config", "SCRAM-SHA-512"];
    let (ok, out) = kafka_cli(&[&delete[..], &["--entity-type", "users", "--entity-name", "alice"]].concat(), "");
    assert!(ok, "kafka-configs --delete-config: {out}");
    let config = client_config(dir.path(), "SCRAM-SHA-512", "alice", "alice-secret");
    let bootstrap = broker.sasl_bootstrap();
    let (ok, out) =
        kafka_cli(&["kafka-topics", "--bootstrap-server", &bootstrap, "--list", "--command-config", &config], "");
    assert!(!ok && out.contains("Authentication failed"), "SCRAM-SHA-512 after its deletion: {out}");
}

#[test]
fn brokers_replicate_over_a_sasl_inter_broker_listener() {
    // The one client listener, named PLAINTEXT, speaks SASL_PLAINTEXT, and
    // is the inter-broker listener: followers and markers log in as "broker".
    let jaas = concat!(
        "listener.name.plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule ",
        r#"required username="broker" password="broker-secret" user_broker="broker-secret" user_alice="alice-secret";"#
    );
    let nodes = BrokerProcess::start_cluster(
        3,
        &[
            "listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms=PLAIN",
            "sasl.mechanism.inter.broker.protocol=PLAIN",
            jaas,
        ],
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let config = client_config(dir.path(), "PLAIN", "alice", "alice-secret");
    replicate_rf3_with_kafka_tools((&nodes[0].bootstrap(), &nodes[2].bootstrap()), &config);
    assert!(nodes.iter().all(|n| !n.log().contains("authentication failed")), "no failed inter-broker login");
}

#[test]
fn the_java_client_reauthenticates_within_connections_max_reauth_ms() {
    let broker = SaslBroker::start(&["connections.max.reauth.ms=2000", "krabka.metrics.listener=127.0.0.1:0"]);
    let dir = tempfile::tempdir().expect("temp dir");
    let config = client_config(dir.path(), "PLAIN", "alice", "alice-secret");
    // 10 s of producing at 50 records/s on connections whose sessions last 2 s.
    let bootstrap = broker.sasl_bootstrap();
    let args = ["kafka-producer-perf-test", "--topic", "reauth", "--num-records", "500", "--record-size", "100"];
    let more = [
        "--throughput",
        "50",
        "--producer.config",
        &config,
        "--producer-props",
        &format!("bootstrap.servers={bootstrap}"),
    ];
    let (ok, out) = kafka_cli(&[&args[..], &more[..]].concat(), "");
    assert!(ok && out.contains("500 records sent"), "perf test: {out}");
    let (status, body) = broker.broker.http_get("/metrics");
    assert_eq!(status, 200);
    let text = String::from_utf8_lossy(&body);
    let count = |name: &str| {
        text.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_whitespace().last()?.parse::<f64>().ok())
    };
    let succeeded = count("kafka_server_socket_server_metrics_successful_authentication_total").unwrap_or(0.0);
    let failed = count("kafka_server_socket_server_metrics_failed_authentication_total").unwrap_or(0.0);
    let accepted = count("kafka_connections_accepted_total").unwrap_or(0.0);
    // The producer's few connections (bootstrap, leader) log in, then again
    // about every 2 s on the same connections (KIP-368), not by reconnecting
    // (a session past its lifetime would be closed).
    assert!(
        succeeded >= 6.0 && failed == 0.0 && accepted <= 4.0 && succeeded >= 2.0 * accepted,
        "{succeeded} authentications, {failed} failed, {accepted} connections:\n{out}"
    );
}

/// librdkafka and kafka-python: produce and read back with each mechanism,
/// and refused with a wrong password.
const PYTHON_CLIENTS: &str = r#"
import sys
from kafka import KafkaProducer
from kafka.errors import KafkaError

bootstrap, mechanism, user, password, topic = sys.argv[1:6]

def librdkafka(password):
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}

librdkafka_round_trip(librdkafka(password), topic)
# librdkafka reports the refusal through its error callback.
librdkafka_refused(librdkafka("wrong"), "Authentication failed")

python = dict(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
              sasl_plain_username=user, sasl_plain_password=password)
kafka_python_round_trip(python, topic, before=[f"rd-{i}" for i in range(10)])

# kafka-python retries a refused login until its bootstrap times out.
try:
    KafkaProducer(**{**python, "sasl_plain_password": "wrong", "bootstrap_timeout_ms": 5000}).close()
    raise SystemExit("kafka-python: a wrong password was accepted")
except KafkaError as e:
    assert "Unable to bootstrap" in str(e) or "Authentication failed" in str(e), repr(e)
print("python sasl ok")
"#;

#[test]
fn librdkafka_and_kafka_python_authenticate_with_plain_and_scram() {
    let broker = SaslBroker::start(&[]);
    let plaintext = broker.broker.bootstrap();
    add_scram_user(&plaintext, "bob", "SCRAM-SHA-256=[password=bob-secret]");
    add_scram_user(&plaintext, "bob", "SCRAM-SHA-512=[password=bob-secret]");
    let bootstrap = broker.sasl_bootstrap();
    // The mechanisms side by side (each on its own topic): most of a run
    // is waiting, for the consumer's idle end and the refused logins.
    let script = [PYTHON_ROUND_TRIPS, PYTHON_CLIENTS].concat();
    std::thread::scope(|scope| {
        let runs: Vec<_> = [
            ("PLAIN", "alice", "alice-secret", "py-plain"),
            ("SCRAM-SHA-256", "bob", "bob-secret", "py-scram-256"),
            ("SCRAM-SHA-512", "bob", "bob-secret", "py-scram-512"),
        ]
        .into_iter()
        .map(|(mechanism, user, password, topic)| {
            let (script, bootstrap) = (&script, &bootstrap);
            let args = move || ["-c", script, bootstrap, mechanism, user, password, topic];
            (mechanism, scope.spawn(move || run(&venv_python(), &args(), "")))
        })
        .collect();
        for (mechanism, handle) in runs {
            let (ok, out) = handle.join().expect("the python run");
            assert!(ok && out.contains("python sasl ok"), "{mechanism}: {out}");
        }
    });
}
