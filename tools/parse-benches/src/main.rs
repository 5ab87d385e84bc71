//! `krabka-parse-benches evaluate RECORD --contract FILE --output VERDICT --markdown REPORT`
//!
//! Exit status: 0 pass (before_after) or report (pinned_kafka), 1 fail,
//! 2 refused (unreadable input, digest mismatch, missing cell, too few or
//! non-alternating rounds), 3 rejected for variance.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use krabka_parse_benches::{contract, evaluate, report, Contract, Record};

#[derive(Parser)]
#[command(version, about = "Judge krabka performance records against the regression contract")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Judge a performance record; write a JSON verdict and a markdown report.
    Evaluate {
        /// The performance record (JSON) written by the runner.
        record: PathBuf,
        /// The regression contract the record was made under.
        #[arg(long)]
        contract: PathBuf,
        /// Where to write the verdict (JSON).
        #[arg(long)]
        output: PathBuf,
        /// Where to write the report (markdown).
        #[arg(long)]
        markdown: PathBuf,
    },
}

const EXIT_REFUSED: u8 = 2;

fn main() -> ExitCode {
    let Command::Evaluate { record, contract, output, markdown } = Cli::parse().command;
    match run(&record, &contract, &output, &markdown) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("krabka-parse-benches: refused: {e:#}");
            ExitCode::from(EXIT_REFUSED)
        }
    }
}

fn run(record_path: &Path, contract_path: &Path, output: &PathBuf, markdown: &PathBuf) -> anyhow::Result<u8> {
    let bytes = std::fs::read(contract_path).with_context(|| format!("reading {}", contract_path.display()))?;
    let digest = contract::sha256_hex(&bytes);
    let contract = Contract::from_bytes(&bytes).with_context(|| format!("parsing {}", contract_path.display()))?;
    let text = std::fs::read(record_path).with_context(|| format!("reading {}", record_path.display()))?;
    let record: Record = serde_json::from_slice(&text).with_context(|| format!("parsing {}", record_path.display()))?;
    let verdict = evaluate(&record, &contract, &digest).with_context(|| format!("{}", record_path.display()))?;
    let json = serde_json::to_string_pretty(&verdict)? + "\n";
    std::fs::write(output, json).with_context(|| format!("writing {}", output.display()))?;
    std::fs::write(markdown, report::markdown(&verdict)).with_context(|| format!("writing {}", markdown.display()))?;
    let s = &verdict.summary;
    eprintln!(
        "verdict: {:?} (regressions {}, improvements {}, rejected for variance {})",
        verdict.verdict, s.regressions, s.improvements, s.rejected_for_variance
    );
    Ok(verdict.verdict.exit_code() as u8)
}
