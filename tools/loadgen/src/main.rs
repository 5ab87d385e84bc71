//! `krabka-loadgen --bootstrap host:port --records N [--consume] ...`: prints
//! one JSON line; exits 0 when every record was acknowledged (and, with
//! --consume, read back exactly once in order), 1 when not, 2 when the run
//! could not take place.

use std::process::ExitCode;

use clap::Parser;
use krabka_loadgen::cli::Args;

fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(error) = args.validate() {
        eprintln!("krabka-loadgen: {error:#}");
        return ExitCode::from(2);
    }
    if let Some(dir) = &args.write_baseline {
        return match krabka_loadgen::baseline::write_baseline(&args, dir) {
            Ok(summary) => {
                println!("{summary}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("krabka-loadgen: {error:#}");
                ExitCode::from(2)
            }
        };
    }
    // One thread: the generator's CPU is one core's, the share the
    // measurement pins it to and compares with the broker's.
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("krabka-loadgen: starting the runtime: {error}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(krabka_loadgen::run::run(&args)) {
        Ok(report) => {
            println!("{}", report.to_json());
            if report.ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(error) => {
            eprintln!("krabka-loadgen: {error:#}");
            ExitCode::from(2)
        }
    }
}
