//! A wire-level fuzzer of a running krabka broker (issue 21, part 5): mutated
//! frames of every request type, pipelines, slow partial frames and bursts of
//! connections, with liveness, integrity and memory probes. See
//! docs/reliability.md.
//!
//! ```text
//! cargo run -p krabka-broker --example wire_fuzz -- --duration 30m
//! cargo run -p krabka-broker --example wire_fuzz -- --bootstrap 127.0.0.1:9092 --pid 1234
//! ```
//!
//! Without `--bootstrap` it formats a temporary data directory and starts the
//! broker binary itself (`--broker-bin`, by default the `krabka-broker` built
//! beside this example). Exits 1 when any probe or check failed.

mod fuzz;
mod integrity;
mod mutate;
mod requests;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use clap::Parser;

#[derive(Parser)]
#[command(about = "Wire-level fuzzer of a running krabka broker")]
struct Cli {
    /// How long to fuzz: seconds, or with a unit (90s, 5m, 1h).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    duration: Duration,
    /// The run's seed (default: from the clock; printed either way).
    #[arg(long)]
    seed: Option<u64>,
    /// A broker to fuzz; without it one is started on a fresh data directory.
    #[arg(long)]
    bootstrap: Option<String>,
    /// The process id of the broker at --bootstrap (for RSS and liveness).
    #[arg(long)]
    pid: Option<u32>,
    /// The broker's log (stderr), scanned for panics at the end.
    #[arg(long)]
    broker_log: Option<PathBuf>,
    /// The broker binary to start when there is no --bootstrap.
    #[arg(long)]
    broker_bin: Option<PathBuf>,
    /// Fuzzing threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// How long RSS may take to return within --rss-slack-mib of its start.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    settle: Duration,
    #[arg(long, default_value_t = 20)]
    rss_slack_mib: u64,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let number: u64 = number.parse().map_err(|_| format!("not a duration: {text}"))?;
    let seconds = match unit {
        "" | "s" => number,
        "m" => number * 60,
        "h" => number * 3600,
        _ => return Err(format!("unknown unit in {text} (s, m, h)")),
    };
    Ok(Duration::from_secs(seconds))
}

/// A broker started by the fuzzer, killed when dropped.
struct OwnBroker {
    child: Child,
    _dir: tempfile::TempDir,
    log: PathBuf,
    bootstrap: String,
}

impl Drop for OwnBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn default_broker_bin() -> PathBuf {
    // target/<profile>/examples/wire_fuzz -> target/<profile>/krabka-broker
    let exe = std::env::current_exe().unwrap_or_default();
    exe.parent().and_then(Path::parent).map(|p| p.join("krabka-broker")).unwrap_or_default()
}

fn start_broker(binary: &Path) -> anyhow::Result<OwnBroker> {
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data");
    krabka_format::format_log_dir(&data, "wirefuzz0000000000000w", 1)?;
    // No auto-created topics and no rebalance delay: see fuzz.rs's taming.
    let properties = format!(
        "process.roles=broker,controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:1\n\
         listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0\ncontroller.listener.names=CONTROLLER\n\
         log.dirs={}\nauto.create.topics.enable=false\ngroup.initial.rebalance.delay.ms=0\n",
        data.display()
    );
    let config = dir.path().join("server.properties");
    std::fs::write(&config, properties)?;
    let log = dir.path().join("broker.log");
    let mut child = Command::new(binary).arg(&config).stdout(Stdio::null()).stderr(Stdio::piped()).spawn()?;
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    let log_path = log.clone();
    std::thread::spawn(move || {
        let mut file = std::fs::File::create(log_path).expect("broker log file");
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = writeln!(file, "{line}");
            if let Some(address) = line.split("krabka broker serving").nth(1).and_then(|r| r.split("address=").nth(1)) {
                let _ = tx.send(address.split_whitespace().next().unwrap_or_default().to_string());
            }
        }
    });
    let bootstrap =
        rx.recv_timeout(Duration::from_secs(60)).map_err(|_| anyhow::anyhow!("the broker did not start"))?;
    Ok(OwnBroker { child, _dir: dir, log, bootstrap })
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let seed = cli.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    let own = match &cli.bootstrap {
        Some(_) => None,
        None => Some(start_broker(&cli.broker_bin.clone().unwrap_or_else(default_broker_bin))?),
    };
    let options = fuzz::Options {
        bootstrap: own.as_ref().map_or_else(|| cli.bootstrap.clone().unwrap_or_default(), |b| b.bootstrap.clone()),
        pid: own.as_ref().map(|b| b.child.id()).or(cli.pid),
        broker_log: own.as_ref().map(|b| b.log.clone()).or(cli.broker_log),
        duration: cli.duration,
        seed,
        workers: cli.workers,
        settle: cli.settle,
        rss_slack_kib: cli.rss_slack_mib * 1024,
    };
    eprintln!("wire_fuzz: seed {seed}, {:?} against {}", options.duration, options.bootstrap);
    let report = fuzz::run(&options);
    println!("{}", report.summary(seed));
    // `exit` skips destructors: stop our broker (and remove its data
    // directory) first, so a failed run leaves nothing running.
    drop(own);
    if !report.passed() {
        std::process::exit(1);
    }
    Ok(())
}
