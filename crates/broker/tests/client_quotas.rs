//! Client quotas as operators manage them with Kafka's own
//! `kafka-configs.sh`: users, client ids, both, their defaults and IPs
//! set, described, changed and deleted; Kafka's refusals; kept in the
//! metadata log across a restart. (Enforcement is not built yet.)

mod support;

use std::process::Command;

use support::{repo_root, BrokerProcess};

fn kafka_configs(bootstrap: &str, args: &[&str]) -> (bool, String) {
    let output = Command::new(repo_root().join("tools/kafka-reference/kafka-cli"))
        .args(["kafka-configs", "--bootstrap-server", bootstrap])
        .args(args)
        .output()
        .expect("run kafka-configs");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

fn alter_ok(bootstrap: &str, args: &[&str]) {
    let (ok, out) = kafka_configs(bootstrap, &[&["--alter"], args].concat());
    assert!(ok, "kafka-configs --alter {args:?}: {out}");
}

fn describe(bootstrap: &str, args: &[&str]) -> String {
    let (ok, out) = kafka_configs(bootstrap, &[&["--describe"], args].concat());
    assert!(ok, "kafka-configs --describe {args:?}: {out}");
    out
}

#[test]
fn kafka_configs_sets_describes_and_deletes_client_quotas() {
    let mut broker = BrokerProcess::start(&[]);
    let bootstrap = broker.bootstrap();
    let user = ["--entity-type", "users", "--entity-name", "alice"];
    alter_ok(
        &bootstrap,
        &[&["--add-config", "producer_byte_rate=1048576,request_percentage=12.5"], &user[..]].concat(),
    );
    let client = ["--entity-type", "clients", "--entity-name", "app-1"];
    alter_ok(&bootstrap, &[&["--add-config", "consumer_byte_rate=2048"], &client[..]].concat());
    let user_client =
        ["--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app-1"];
    alter_ok(&bootstrap, &[&["--add-config", "producer_byte_rate=4096"], &user_client[..]].concat());
    alter_ok(&bootstrap, &["--add-config", "consumer_byte_rate=999", "--entity-type", "users", "--entity-default"]);
    alter_ok(
        &bootstrap,
        &["--add-config", "connection_creation_rate=10", "--entity-type", "ips", "--entity-name", "10.1.2.3"],
    );

    let out = describe(&bootstrap, &user);
    assert!(out.contains("producer_byte_rate=1048576.0") && out.contains("request_percentage=12.5"), "{out}");
    let out = describe(&bootstrap, &user_client);
    assert!(out.contains("producer_byte_rate=4096.0"), "{out}");
    let out = describe(&bootstrap, &["--entity-type", "users", "--entity-default"]);
    assert!(out.contains("consumer_byte_rate=999.0"), "{out}");
    let out = describe(&bootstrap, &["--entity-type", "ips"]);
    assert!(out.contains("10.1.2.3") && out.contains("connection_creation_rate=10.0"), "{out}");
    let out = describe(&bootstrap, &["--entity-type", "clients"]);
    assert!(out.contains("app-1") && out.contains("consumer_byte_rate=2048.0"), "{out}");

    // Kafka's refusals.
    let (ok, out) =
        kafka_configs(&bootstrap, &[&["--alter", "--add-config", "producer_byte_rate=1.5"], &user[..]].concat());
    assert!(!ok && out.contains("producer_byte_rate cannot be a fractional value"), "{out}");
    let (ok, out) =
        kafka_configs(&bootstrap, &[&["--alter", "--add-config", "producer_byte_rate=0"], &user[..]].concat());
    assert!(!ok && out.contains("must be greater than 0"), "{out}");

    // Deleted quotas go; the rest stays, across a restart (the metadata log).
    alter_ok(&bootstrap, &[&["--delete-config", "request_percentage"], &user[..]].concat());
    broker.stop();
    broker.restart();
    let bootstrap = broker.bootstrap();
    let out = describe(&bootstrap, &user);
    assert!(out.contains("producer_byte_rate=1048576.0") && !out.contains("request_percentage"), "{out}");
    let out = describe(&bootstrap, &user_client);
    assert!(out.contains("producer_byte_rate=4096.0"), "{out}");
}
