//! Issue 21, part 5, the short run: the wire fuzzer (examples/wire_fuzz)
//! against a real broker for a few seconds. Every probe must pass: a fresh
//! connection is answered, acknowledged records read back exactly, no broker
//! panics, and RSS comes back within 20 MiB of its start. `KRABKA_SEED=<n>`
//! replays a run; `KRABKA_LONG_TESTS=1` fuzzes for 5 minutes (the 30-minute
//! run is the example's command, docs/reliability.md).

mod support;

#[path = "../examples/wire_fuzz/fuzz.rs"]
mod fuzz;
#[path = "../examples/wire_fuzz/integrity.rs"]
mod integrity;
#[path = "../examples/wire_fuzz/mutate.rs"]
mod mutate;
#[path = "../examples/wire_fuzz/requests.rs"]
mod requests;

use std::time::Duration;

use support::BrokerProcess;

#[test]
fn wire_fuzzing_leaves_the_broker_live_correct_and_lean() {
    let seed = match std::env::var("KRABKA_SEED") {
        Ok(seed) => seed.parse().expect("KRABKA_SEED is a u64"),
        Err(_) => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64),
    };
    let long = std::env::var("KRABKA_LONG_TESTS").is_ok_and(|v| v == "1");
    // As the example's own broker: no auto-created topics, no rebalance delay.
    let broker = BrokerProcess::start(&["auto.create.topics.enable=false", "group.initial.rebalance.delay.ms=0"]);
    let options = fuzz::Options {
        bootstrap: broker.bootstrap(),
        pid: broker.pid(),
        broker_log: Some(broker.log_path.clone()),
        duration: Duration::from_secs(if long { 300 } else { 20 }),
        seed,
        workers: 2,
        settle: Duration::from_secs(30),
        rss_slack_kib: 20 * 1024,
    };
    let report = fuzz::run(&options);
    let summary = report.summary(seed);
    println!("{summary}");
    assert!(report.passed(), "replay with KRABKA_SEED={seed}:\n{summary}");
    assert!(report.mutated_frames > 100, "too little fuzzing to mean anything:\n{summary}");
}
