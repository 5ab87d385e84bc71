//! SASL/OAUTHBEARER as Kafka 4.3.1's broker serves it: Kafka's default
//! unsecured validator (unsigned tokens, for development) on one listener,
//! and signed JWTs checked against a JSON Web Key Set (KIP-768) on
//! another; the token's subject is the principal the authorizer sees, and
//! its expiration bounds the session (KIP-368). Java's console tools,
//! librdkafka and kafka-python log in; expired, unsigned and badly signed
//! tokens are refused with Kafka's `{"status":"invalid_token"}` while the
//! listener goes on serving. The RSA key is made by the test (openssl).

mod support;

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use krabka_protocol::{ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest};
use support::tools::{kafka_cli, kafka_cli_with_jvm_options, run, venv_python, PYTHON_ROUND_TRIPS};
use support::{free_port, BrokerProcess, RawClient};

const SASL_AUTHENTICATION_FAILED: i16 = 58;
const LOGIN_MODULE: &str = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";

/// Makes an RSA signing key and the JWKS naming its public half (kid `k1`),
/// and signs tokens with it: `sign.py '<claims json>'` prints a compact JWS.
const KEYS: &str = r#"
import base64, json, subprocess, sys
d = sys.argv[1]
subprocess.run(["openssl", "genrsa", "-out", f"{d}/signer.pem", "2048"], check=True, capture_output=True)
modulus = subprocess.run(["openssl", "rsa", "-in", f"{d}/signer.pem", "-noout", "-modulus"],
                         check=True, capture_output=True, text=True).stdout.strip().split("=", 1)[1]
url = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
key = {"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256", "n": url(bytes.fromhex(modulus)), "e": "AQAB"}
open(f"{d}/jwks.json", "w").write(json.dumps({"keys": [key]}))
"#;

/// Shared by the Python programs: `sign(dir, claims)` -> compact RS256 JWS.
const SIGN: &str = r#"
import base64, json, subprocess
def sign(d, claims, kid="k1"):
    url = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
    header = url(json.dumps({"alg": "RS256", "typ": "JWT", "kid": kid}).encode())
    payload = url(json.dumps(claims).encode())
    signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", f"{d}/signer.pem"], check=True,
                               capture_output=True, input=f"{header}.{payload}".encode()).stdout
    return f"{header}.{payload}.{url(signature)}"
"#;

/// A broker with the harness's PLAINTEXT listener, SASL_PLAINTEXT (the
/// unsecured validator) and SIGNED (SASL_PLAINTEXT, signed JWTs against the
/// test's JWKS, audience `krabka`), and StandardAuthorizer with alice as a
/// super user: a token's subject decides what it may do.
struct OAuthBroker {
    broker: BrokerProcess,
    unsecured_port: u16,
    signed_port: u16,
    dir: tempfile::TempDir,
}

impl OAuthBroker {
    fn start(extra: &[&str]) -> Self {
        Self::start_with_jwks(extra, |dir| format!("file://{}/jwks.json", dir.display()))
    }

    /// `start` with the SIGNED listener's JWKS at `jwks_url(dir)`.
    fn start_with_jwks(extra: &[&str], jwks_url: impl Fn(&Path) -> String) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let (ok, out) = run(&venv_python(), &["-c", KEYS, dir.path().to_str().expect("utf-8")], "");
        assert!(ok, "making the signing key: {out}");
        let (unsecured_port, signed_port) = (free_port(), free_port());
        let listeners = format!(
            "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{unsecured_port},\
             SIGNED://127.0.0.1:{signed_port},CONTROLLER://127.0.0.1:0"
        );
        let jwks =
            format!("listener.name.signed.oauthbearer.sasl.oauthbearer.jwks.endpoint.url={}", jwks_url(dir.path()));
        let mut keys = vec![
            listeners,
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SIGNED:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT".into(),
            "sasl.enabled.mechanisms=OAUTHBEARER".into(),
            format!("listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config={LOGIN_MODULE} required;"),
            format!("listener.name.signed.oauthbearer.sasl.jaas.config={LOGIN_MODULE} required;"),
            "listener.name.signed.oauthbearer.sasl.server.callback.handler.class=\
             org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
                .into(),
            jwks,
            "sasl.oauthbearer.expected.audience=krabka".into(),
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer".into(),
            "super.users=User:ANONYMOUS;User:alice".into(),
        ];
        keys.extend(extra.iter().map(|k| k.to_string()));
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        OAuthBroker { broker: BrokerProcess::start(&keys), unsecured_port, signed_port, dir }
    }

    fn dir(&self) -> &str {
        self.dir.path().to_str().expect("utf-8 path")
    }
}

fn now_seconds() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_secs()
}

/// An unsecured token as Kafka's unsecured login module makes one.
fn unsecured_token(claims: &str) -> String {
    let url = |b: &[u8]| krabka_security::base64::encode(b).trim_end_matches('=').replace('+', "-").replace('/', "_");
    format!("{}.{}.", url(br#"{"alg":"none"}"#), url(claims.as_bytes()))
}

fn initial_response(token: &str) -> Vec<u8> {
    format!("n,,\x01auth=Bearer {token}\x01\x01").into_bytes()
}

fn authenticate(client: &mut RawClient, token: &[u8]) -> SaslAuthenticateResponse {
    let request = SaslAuthenticateRequest { auth_bytes: Bytes::copy_from_slice(token), ..Default::default() };
    client.request(ApiKey::SaslAuthenticate, 2, &request)
}

fn login(port: u16, token: &str) -> (RawClient, SaslAuthenticateResponse) {
    let mut client = RawClient::connect(&format!("127.0.0.1:{port}"));
    let handshake = SaslHandshakeRequest { mechanism: "OAUTHBEARER".into(), ..Default::default() };
    let answer: krabka_protocol::SaslHandshakeResponse = client.request(ApiKey::SaslHandshake, 1, &handshake);
    assert_eq!(answer.error_code, 0, "{:?}", answer.mechanisms);
    let answer = authenticate(&mut client, &initial_response(token));
    (client, answer)
}

#[test]
fn tokens_are_validated_and_their_expiry_ends_the_session() {
    let broker = OAuthBroker::start(&["connections.max.reauth.ms=600000"]);
    let now = now_seconds();
    // A valid unsecured token: the session lasts until the token expires
    // (sooner than connections.max.reauth.ms).
    let token = unsecured_token(&format!(r#"{{"sub":"alice","iat":{now},"exp":{}}}"#, now + 60));
    let (_client, answer) = login(broker.unsecured_port, &token);
    assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
    assert!((50_000..=60_000).contains(&answer.session_lifetime_ms), "{}", answer.session_lifetime_ms);

    // Refused tokens: the error challenge, then (after the client's ^A)
    // SASL_AUTHENTICATION_FAILED with the same JSON, as Kafka's.
    let expired = unsecured_token(&format!(r#"{{"sub":"alice","exp":{}}}"#, now - 10));
    let unsigned_on_signed = token.clone();
    for (port, token) in [(broker.unsecured_port, expired), (broker.signed_port, unsigned_on_signed)] {
        let (mut client, challenge) = login(port, &token);
        assert_eq!(challenge.error_code, 0);
        assert_eq!(&challenge.auth_bytes[..], br#"{"status":"invalid_token"}"#);
        let failed = authenticate(&mut client, &[0x01]);
        assert_eq!(failed.error_code, SASL_AUTHENTICATION_FAILED);
        assert_eq!(failed.error_message.as_deref(), Some(r#"{"status":"invalid_token"}"#));
        assert!(client.is_closed());
    }
    // A malformed initial response: Kafka's generic text.
    let mut client = RawClient::connect(&format!("127.0.0.1:{}", broker.unsecured_port));
    let handshake = SaslHandshakeRequest { mechanism: "OAUTHBEARER".into(), ..Default::default() };
    let _: krabka_protocol::SaslHandshakeResponse = client.request(ApiKey::SaslHandshake, 1, &handshake);
    let failed = authenticate(&mut client, b"n,,auth=Bearer nope");
    assert_eq!(failed.error_code, SASL_AUTHENTICATION_FAILED);
    assert!(failed.error_message.unwrap_or_default().contains("invalid credentials with SASL mechanism OAUTHBEARER"));
    // The listeners go on serving.
    let (_client, answer) = login(broker.unsecured_port, &token);
    assert_eq!(answer.error_code, 0);
}

/// A Java client config file for the unsecured login module as `subject`,
/// or for a signed token read from `token_file`.
fn java_config(dir: &Path, subject: &str, token_file: Option<&Path>) -> String {
    let path = dir.join(format!("{subject}-{}.properties", token_file.is_some()));
    let login = match token_file {
        None => format!("sasl.jaas.config={LOGIN_MODULE} required unsecuredLoginStringClaim_sub=\"{subject}\";\n"),
        Some(file) => format!(
            "sasl.jaas.config={LOGIN_MODULE} required;\n\
             sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n\
             sasl.oauthbearer.token.endpoint.url=file://{}\n",
            file.display()
        ),
    };
    let text = format!("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n{login}");
    std::fs::write(&path, text).expect("write client config");
    path.to_str().expect("utf-8 path").to_string()
}

/// The console producer: (every record sent, output).
fn produce(port: u16, config: &str, topic: &str, lines: &[String]) -> (bool, String) {
    produce_with(port, config, topic, lines, "-Xmx256m")
}

/// `produce` in a JVM with `jvm_options`.
fn produce_with(port: u16, config: &str, topic: &str, lines: &[String], jvm_options: &str) -> (bool, String) {
    let bootstrap = format!("127.0.0.1:{port}");
    let producer = ["kafka-console-producer", "--bootstrap-server", &bootstrap, "--topic", topic];
    let props = ["--producer.config", config, "--producer-property", "max.block.ms=15000"];
    let (ok, out) = kafka_cli_with_jvm_options(&[&producer[..], &props[..]].concat(), &lines.join("\n"), jvm_options);
    (ok && !out.contains("Exception"), out)
}

fn consume(port: u16, config: &str, topic: &str, count: usize) -> Vec<String> {
    let bootstrap = format!("127.0.0.1:{port}");
    let consumer = ["kafka-console-consumer", "--bootstrap-server", &bootstrap, "--topic", topic];
    let count = count.to_string();
    let more = ["--from-beginning", "--max-messages", &count, "--timeout-ms", "30000", "--consumer.config", config];
    let (_, out) = kafka_cli(&[&consumer[..], &more[..]].concat(), "");
    out.lines().filter(|l| l.starts_with(topic)).map(str::to_string).collect()
}

#[test]
fn java_tools_log_in_with_unsecured_and_signed_tokens() {
    let broker = OAuthBroker::start(&[]);
    let dir = Path::new(broker.dir());
    let lines: Vec<String> = (0..10).map(|i| format!("oauth-{i}")).collect();

    // Unsecured: alice (a super user) produces and consumes; bob's token
    // names bob, whom no ACL allows anything.
    let alice = java_config(dir, "alice", None);
    let (ok, out) = produce(broker.unsecured_port, &alice, "oauth", &lines);
    assert!(ok, "alice's unsecured token: {out}");
    assert_eq!(consume(broker.unsecured_port, &alice, "oauth", 10), lines);
    let bob = java_config(dir, "bob", None);
    let (ok, out) = produce(broker.unsecured_port, &bob, "oauth", &lines);
    assert!(!ok && out.contains("TopicAuthorizationException"), "bob is User:bob: {out}");

    // Signed: a token from the test's key, read by Kafka's login handler.
    let token_file = dir.join("alice.jwt");
    std::fs::write(&token_file, signed_token(&broker)).expect("write token");
    let signed = java_config(dir, "alice", Some(&token_file));
    // Kafka's login handler reads a token file only where the JVM allows its URL.
    let allowed = format!("-Xmx256m -Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=file://{}", token_file.display());
    let (ok, out) = produce_with(broker.signed_port, &signed, "oauth-signed", &lines, &allowed);
    assert!(ok, "alice's signed token: {out}");
    // The unsecured login's unsigned token is refused where tokens must be signed.
    let (ok, out) = produce(broker.signed_port, &alice, "oauth-signed", &lines);
    assert!(!ok && out.contains("invalid_token"), "an unsigned token on the signed listener: {out}");
}

/// librdkafka (oauth_cb) and kafka-python (a token provider) with signed
/// tokens: produce and read back; an expired token and one signed by an
/// unknown key are refused.
const PYTHON_CLIENTS: &str = r#"
import sys, time
from kafka import KafkaProducer
from kafka.errors import KafkaError
from kafka.net.sasl.oauth import AbstractTokenProvider

d, bootstrap, topic = sys.argv[1:4]
now = int(time.time())
good = sign(d, {"sub": "alice", "aud": ["other", "krabka"], "iat": now, "exp": now + 600})
expired = sign(d, {"sub": "alice", "aud": "krabka", "iat": now - 900, "exp": now - 120})
unknown_key = sign(d, {"sub": "alice", "aud": "krabka", "iat": now, "exp": now + 600}, kid="k2")

def librdkafka(token):
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _config: (token, time.time() + 600)}

librdkafka_round_trip(librdkafka(good), topic)
for bad in (expired, unknown_key):
    librdkafka_refused(librdkafka(bad), "invalid_token")

class Token(AbstractTokenProvider):
    def __init__(self, token):
        self.value = token
    def token(self):
        return self.value

python = dict(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER")
kafka_python_round_trip(dict(sasl_oauth_token_provider=Token(good), **python), topic,
                        before=[f"rd-{i}" for i in range(10)])
try:
    KafkaProducer(sasl_oauth_token_provider=Token(expired), bootstrap_timeout_ms=5000, **python).close()
    raise SystemExit("kafka-python: an expired token was accepted")
except KafkaError:
    pass
print("python oauthbearer ok")
"#;

/// A token signed by the test's key for alice, valid for ten minutes.
fn signed_token(broker: &OAuthBroker) -> String {
    let now = now_seconds();
    let claims = format!(r#"{{"sub": "alice", "aud": "krabka", "iat": {now}, "exp": {}}}"#, now + 600);
    let script = format!("{SIGN}\nimport sys\nprint(sign(sys.argv[1], {claims}))");
    let (ok, token) = run(&venv_python(), &["-c", &script, broker.dir()], "");
    assert!(ok, "signing: {token}");
    token.trim().to_string()
}

#[test]
fn librdkafka_kafka_python_and_franz_go_log_in_with_signed_tokens() {
    let broker = OAuthBroker::start(&[]);
    let bootstrap = format!("127.0.0.1:{}", broker.signed_port);
    let script = [PYTHON_ROUND_TRIPS, SIGN, PYTHON_CLIENTS].concat();
    let (ok, out) = run(&venv_python(), &["-c", &script, broker.dir(), &bootstrap, "py-oauth"], "");
    assert!(ok && out.contains("python oauthbearer ok"), "{out}");

    // franz-go (tests/clients/go): 300 records produced and read back.
    let create = ["kafka-topics", "--bootstrap-server", &broker.broker.bootstrap(), "--create", "--topic", "go-oauth"];
    let (ok, out) = kafka_cli(&[&create[..], &["--partitions", "3"]].concat(), "");
    assert!(ok, "kafka-topics --create: {out}");
    let login = format!("OAUTHBEARER::{}", signed_token(&broker));
    let binary = support::repo_root().join("target/client-bin/franz-check");
    for args in [
        vec!["produce", &bootstrap, "go-oauth", "3", "300", "lz4"],
        vec!["consume", &bootstrap, "go-oauth", "3", "300"],
    ] {
        let output = std::process::Command::new(&binary)
            .args(&args)
            .env("KRABKA_CHECK_SASL", &login)
            .output()
            .expect("run franz-check");
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "franz-check {}: {text}", args[0]);
    }
}

/// Serves `dir` over HTTP (Python's http.server) on `port`, over TLS with
/// `tls` (the certificate and key file).
const SERVE: &str = r#"
import functools, http.server, ssl, sys
port, directory, cert = int(sys.argv[1]), sys.argv[2], sys.argv[3]
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=directory)
server = http.server.HTTPServer(("127.0.0.1", port), handler)
if cert:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert)
    server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
"#;

/// A CA and a certificate for 127.0.0.1 it signs (`ca.crt`, `server.pem`
/// holding the key and certificate), made with openssl in `dir`.
fn endpoint_certificate(dir: &Path) {
    let openssl = |args: &[&str]| {
        let output = std::process::Command::new("openssl").args(args).current_dir(dir).output().expect("openssl");
        assert!(output.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-subj",
        "/CN=test-ca",
        "-days",
        "2",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    std::fs::write(dir.join("ext.cnf"), "subjectAltName=IP:127.0.0.1\n").expect("write ext");
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
        "-out",
        "server.crt",
    ]);
    let pem =
        [std::fs::read(dir.join("server.key")).expect("key"), std::fs::read(dir.join("server.crt")).expect("crt")]
            .concat();
    std::fs::write(dir.join("server.pem"), pem).expect("write server.pem");
}

/// A JWKS served over HTTP and over HTTPS (Python's http.server, its
/// certificate from the test's CA, named by the JAAS entry's
/// `ssl.truststore.location`): the broker fetches it at start, and a token
/// signed by its key logs in once it has.
#[test]
fn the_jwks_is_fetched_from_its_http_and_https_endpoints() {
    for tls in [false, true] {
        let port = free_port();
        let server_dir = tempfile::tempdir().expect("temp dir");
        let cert = if tls {
            endpoint_certificate(server_dir.path());
            server_dir.path().join("server.pem").display().to_string()
        } else {
            String::new()
        };
        let directory = server_dir.path().display().to_string();
        let mut server = std::process::Command::new(venv_python())
            .args(["-c", SERVE, &port.to_string(), &directory, &cert])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start http.server");
        let served = server_dir.path().to_path_buf();
        let scheme = if tls { "https" } else { "http" };
        let trust = format!(
            "listener.name.signed.oauthbearer.sasl.jaas.config={LOGIN_MODULE} required ssl.truststore.location=\"{}/ca.crt\";",
            served.display()
        );
        let extra: Vec<&str> = if tls { vec![trust.as_str()] } else { Vec::new() };
        let broker = OAuthBroker::start_with_jwks(&extra, move |keys| {
            // The keys are made first; the server serves a copy of the JWKS.
            std::fs::copy(keys.join("jwks.json"), served.join("jwks.json")).expect("serve the JWKS");
            format!("{scheme}://127.0.0.1:{port}/jwks.json")
        });
        let token = signed_token(&broker);
        support::wait_for(
            &format!("a login verified by the JWKS fetched over {scheme}"),
            Duration::from_secs(40),
            || login(broker.signed_port, &token).1.error_code == 0,
        );
        let unsigned = unsecured_token(&format!(r#"{{"sub":"alice","exp":{}}}"#, now_seconds() + 60));
        let (mut client, challenge) = login(broker.signed_port, &unsigned);
        assert_eq!(&challenge.auth_bytes[..], br#"{"status":"invalid_token"}"#);
        assert_eq!(authenticate(&mut client, &[0x01]).error_code, SASL_AUTHENTICATION_FAILED);
        let _ = server.kill();
        let _ = server.wait();
    }
}
