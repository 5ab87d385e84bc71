//! A pipelined connection to one broker: the producer writes requests while
//! a reader task hands every response frame to the producer's event queue,
//! so up to max-in-flight requests are on the wire at once and the socket is
//! drained even while a write waits.

use std::collections::VecDeque;

use bytes::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::wire;

/// What a connection's reader reports, tagged with the connection's id so a
/// report from a connection since replaced is recognised and ignored.
#[derive(Debug)]
pub enum Event {
    Frame { link: u64, frame: Bytes },
    Closed { link: u64, error: String },
}

/// One batch of a request: which partition slot, which sequences.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SentBatch {
    pub slot: usize,
    pub seq: u64,
    pub count: u32,
}

/// A request awaiting its response; responses come back in request order.
#[derive(Debug)]
pub struct InFlight {
    pub correlation_id: i32,
    pub sent_at: Instant,
    pub batches: Vec<SentBatch>,
}

#[derive(Debug)]
pub struct Link {
    pub id: u64,
    writer: OwnedWriteHalf,
    pub in_flight: VecDeque<InFlight>,
    next_correlation_id: i32,
    reader: JoinHandle<()>,
}

impl Link {
    pub async fn open(address: &str, id: u64, events: UnboundedSender<Event>) -> anyhow::Result<Self> {
        let (mut reader, writer) = wire::connect(address).await?.into_split();
        let reader = tokio::spawn(async move {
            loop {
                let event = match wire::read_frame(&mut reader).await {
                    Ok(frame) => Event::Frame { link: id, frame },
                    Err(error) => Event::Closed { link: id, error: format!("{error:#}") },
                };
                let closed = matches!(event, Event::Closed { .. });
                if events.send(event).is_err() || closed {
                    return;
                }
            }
        });
        Ok(Link { id, writer, in_flight: VecDeque::new(), next_correlation_id: 0, reader })
    }

    pub fn next_correlation_id(&mut self) -> i32 {
        let id = self.next_correlation_id;
        self.next_correlation_id = id.wrapping_add(1);
        id
    }

    pub async fn write(&mut self, frame: &[u8]) -> std::io::Result<()> {
        self.writer.write_all(frame).await
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.reader.abort();
    }
}
