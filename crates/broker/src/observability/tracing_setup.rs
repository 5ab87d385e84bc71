//! The process-wide `tracing` subscriber.

use std::io::IsTerminal;

use anyhow::{anyhow, Context};
use tracing_subscriber::EnvFilter;

/// The environment variable that overrides the configured log filter, so an operator can turn
/// on debug logs for one module without editing the broker's config.
pub const LOG_ENV: &str = "KRABKA_LOG";

/// Installs the global subscriber, writing to stderr.
///
/// `level` is an [`EnvFilter`] directive string ("info", "krabka_broker=debug,info"); a non-empty
/// `KRABKA_LOG` replaces it. `json` selects one JSON object per line, for log shippers.
/// A second call fails (a process has one global subscriber) instead of panicking.
pub fn init_tracing(level: &str, json: bool) -> anyhow::Result<()> {
    let env = match std::env::var(LOG_ENV) {
        Ok(value) => Some(value),
        Err(std::env::VarError::NotPresent) => None,
        Err(err) => return Err(anyhow!("{LOG_ENV}: {err}")),
    };
    let filter = build_filter(level, env.as_deref())?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    // Colour codes only help a human at a terminal; in a file or journal they are noise.
    let ansi = std::io::stderr().is_terminal();
    let installed = if json { builder.json().try_init() } else { builder.with_ansi(ansi).try_init() };
    installed.map_err(|err| anyhow!("installing the tracing subscriber: {err}"))
}

/// The filter from the configured directives, or from the environment's when it is set.
fn build_filter(level: &str, env: Option<&str>) -> anyhow::Result<EnvFilter> {
    match env.filter(|value| !value.trim().is_empty()) {
        Some(value) => EnvFilter::try_new(value).with_context(|| format!("{LOG_ENV}={value:?}")),
        None => EnvFilter::try_new(level).with_context(|| format!("log level {level:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_overrides_the_configured_level() {
        let filter = build_filter("info", Some("krabka_broker=debug,warn")).expect("valid directives");
        let text = filter.to_string();
        assert!(text.contains("krabka_broker=debug"), "{text}");
        assert!(!text.contains("info"), "{text}");

        let filter = build_filter("krabka_broker=trace,info", None).expect("valid directives");
        assert!(filter.to_string().contains("krabka_broker=trace"));
        // An empty variable is treated as unset rather than as "log nothing".
        let filter = build_filter("info", Some("")).expect("valid directives");
        assert_eq!(filter.to_string(), "info");
    }

    #[test]
    fn bad_directives_are_errors() {
        assert!(build_filter("krabka_broker=loud", None).is_err());
        let err = build_filter("info", Some("x=loud")).expect_err("bad level in the environment");
        assert!(format!("{err:#}").contains(LOG_ENV), "{err:#}");
    }

    #[test]
    fn second_init_is_an_error_not_a_panic() {
        // The only test in this crate that installs the global subscriber; "off" keeps test
        // output quiet unless KRABKA_LOG asks otherwise.
        let first = init_tracing("off", false);
        assert!(first.is_ok(), "{first:?}");
        assert!(init_tracing("off", true).is_err());
    }
}
