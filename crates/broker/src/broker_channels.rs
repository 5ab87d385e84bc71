//! Connections to other brokers for one-off requests (transaction markers,
//! KIP-890 partition verification), kept open between requests as Kafka's
//! inter-broker send threads keep theirs: a new connection per request
//! would cost a TCP handshake, and a socket in TIME_WAIT, each time.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;

use krabka_protocol::{ApiKey, Message};

use crate::quorum::Channel;

/// Idle connections kept per (broker, purpose): enough for the requests a
/// burst of transactions sends at once; more are opened when needed and
/// closed after use.
const IDLE_PER_PEER: usize = 4;

#[derive(Default)]
pub struct BrokerChannels {
    idle: Mutex<HashMap<(i32, &'static str), Vec<Channel>>>,
}

impl BrokerChannels {
    fn take(&self, peer: (i32, &'static str)) -> Option<Channel> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&peer)?.pop()
    }

    fn put_back(&self, peer: (i32, &'static str), channel: Channel) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let kept = idle.entry(peer).or_default();
        if kept.len() < IDLE_PER_PEER {
            kept.push(channel);
        }
    }
}

impl BrokerChannels {
    /// `body` at `(key, version)` to `peer` (broker id, purpose) on a kept
    /// connection, else on one `connect` opens. A kept connection that
    /// fails is dropped and the request sent once more on a new one: the
    /// peer may have restarted since it was last used.
    pub async fn call<M: Message, R: Message, C>(
        &self,
        peer: (i32, &'static str),
        connect: impl FnOnce() -> C,
        (key, version): (ApiKey, i16),
        body: &M,
    ) -> Result<R, String>
    where
        C: Future<Output = Result<Channel, String>>,
    {
        if let Some(mut channel) = self.take(peer) {
            if let Ok(response) = channel.call(key, version, body).await {
                self.put_back(peer, channel);
                return Ok(response);
            }
        }
        let mut channel = connect().await?;
        let response = channel.call(key, version, body).await?;
        self.put_back(peer, channel);
        Ok(response)
    }
}
