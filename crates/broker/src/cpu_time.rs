//! The CPU time a future takes while it is polled, not while it waits: what
//! Kafka's request quota counts as a request's handler time (KIP-124). Each
//! poll is bracketed by the thread's CPU clock, so a task that moves
//! between the runtime's threads is still measured right.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// `inner`, answering its output with the CPU nanoseconds its polls took.
pub struct CpuTimed<F> {
    inner: Pin<Box<F>>,
    nanos: u64,
}

impl<F: Future> CpuTimed<F> {
    pub fn new(inner: F) -> Self {
        CpuTimed { inner: Box::pin(inner), nanos: 0 }
    }
}

impl<F: Future> Future for CpuTimed<F> {
    type Output = (F::Output, u64);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let started = thread_cpu_nanos();
        let polled = self.inner.as_mut().poll(cx);
        self.nanos += thread_cpu_nanos().saturating_sub(started);
        polled.map(|output| (output, self.nanos))
    }
}

/// This thread's CPU time so far, in nanoseconds (0 if the clock fails).
fn thread_cpu_nanos() -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    if status != 0 {
        return 0;
    }
    (now.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(now.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_polls_count_and_waits_do_not() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
        let ((), nanos) = runtime.block_on(CpuTimed::new(async {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            // Spin until this thread has used 30 ms of CPU (however busy
            // the machine is, and whatever the wall clock says).
            let spin_until = thread_cpu_nanos() + 30_000_000;
            while thread_cpu_nanos() < spin_until {
                std::hint::spin_loop();
            }
        }));
        // The 30 ms of spinning count; the 200 ms sleep does not.
        assert!((30_000_000..150_000_000).contains(&nanos), "{nanos} ns");
    }
}
