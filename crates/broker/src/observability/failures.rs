//! Failures that repeat per request: a handler panic, a request that does
//! not decode, a frame the broker must refuse. One misbehaving client can
//! cause thousands a second (460,000 panic messages in 13 minutes were seen
//! once), so each kind is logged with its cause the first time, then at most
//! once a minute with the number seen since; a counter per kind counts all.

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus::{IntCounterVec, Opts, Registry};

use super::Metrics;

/// How often a kind that keeps failing is logged again.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// What went wrong, as the `kind` label of `krabka_request_failures_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// A panic in the broker (a bug), caught by the panic hook.
    Panic,
    /// A frame whose size or request header the broker cannot take.
    InvalidFrame,
    /// A request body that does not decode at its version.
    UndecodableRequest,
    /// An API or version the broker does not serve.
    UnsupportedRequest,
}

impl FailureKind {
    pub fn label(self) -> &'static str {
        match self {
            FailureKind::Panic => "panic",
            FailureKind::InvalidFrame => "invalid_frame",
            FailureKind::UndecodableRequest => "undecodable_request",
            FailureKind::UnsupportedRequest => "unsupported_request",
        }
    }
}

#[derive(Debug)]
struct LastLogged {
    at: Instant,
    /// Failures of the kind counted since it was last logged.
    since: u64,
}

#[derive(Debug)]
pub struct Failures {
    counter: IntCounterVec,
    logged: Mutex<HashMap<FailureKind, LastLogged>>,
}

impl Failures {
    pub fn new(registry: &Registry) -> Self {
        let counter = IntCounterVec::new(
            Opts::new(
                "krabka_request_failures_total",
                "Requests the broker could not serve (panics, undecodable or refused requests), by kind.",
            ),
            &["kind"],
        )
        .expect("static counter definition");
        registry.register(Box::new(counter.clone())).expect("metric registered once in a fresh registry");
        Failures { counter, logged: Mutex::new(HashMap::new()) }
    }

    /// Counts one failure; logs it when it is the first of its kind in `LOG_EVERY`.
    pub fn record(&self, kind: FailureKind, cause: &dyn Display) {
        self.counter.with_label_values(&[kind.label()]).inc();
        let now = Instant::now();
        let suppressed = {
            let mut logged = self.logged.lock().unwrap_or_else(|e| e.into_inner());
            match logged.get_mut(&kind) {
                Some(last) if now.duration_since(last.at) < LOG_EVERY => {
                    last.since += 1;
                    return;
                }
                Some(last) => {
                    let suppressed = last.since;
                    *last = LastLogged { at: now, since: 0 };
                    suppressed
                }
                None => {
                    logged.insert(kind, LastLogged { at: now, since: 0 });
                    0
                }
            }
        };
        tracing::warn!(
            kind = kind.label(),
            %cause,
            more_since_last_logged = suppressed,
            "request failed (logged at most once a minute per kind; krabka_request_failures_total counts every one)"
        );
    }

    /// How many failures of `kind` were counted.
    pub fn count(&self, kind: FailureKind) -> u64 {
        self.counter.with_label_values(&[kind.label()]).get()
    }
}

/// Routes panics through [`Failures`]: a panicking request handler (a bug,
/// which closes that one connection) is logged once with its message,
/// location and backtrace (when RUST_BACKTRACE asks for one), then counted.
pub fn install_panic_hook(metrics: Arc<Metrics>) {
    std::panic::set_hook(Box::new(move |info| {
        metrics.failures().record(FailureKind::Panic, &PanicCause(info));
    }));
}

/// Formats a panic only when it is logged: the backtrace is captured then.
struct PanicCause<'a>(&'a std::panic::PanicHookInfo<'a>);

impl Display for PanicCause<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let payload = self.0.payload();
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(no message)");
        let thread = std::thread::current();
        let thread = thread.name().unwrap_or("unnamed");
        match self.0.location() {
            Some(location) => write!(f, "thread '{thread}' panicked at {location}: {message}")?,
            None => write!(f, "thread '{thread}' panicked: {message}")?,
        }
        let backtrace = std::backtrace::Backtrace::capture();
        if backtrace.status() == std::backtrace::BacktraceStatus::Captured {
            write!(f, "\n{backtrace}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failure_is_counted_and_a_burst_is_logged_once() {
        let failures = Failures::new(&Registry::new());
        for i in 0..1000 {
            failures.record(FailureKind::UndecodableRequest, &format!("bad request {i}"));
        }
        failures.record(FailureKind::Panic, &"boom");
        assert_eq!(failures.count(FailureKind::UndecodableRequest), 1000);
        assert_eq!(failures.count(FailureKind::Panic), 1);
        let logged = failures.logged.lock().unwrap();
        assert_eq!(logged[&FailureKind::UndecodableRequest].since, 999, "one logged, the rest counted");
        assert_eq!(logged[&FailureKind::Panic].since, 0);
    }
}
