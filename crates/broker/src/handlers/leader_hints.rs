//! KIP-951: a partition refused because another broker leads it names the
//! leader and leader epoch this broker knows, and the response carries
//! that leader's endpoint, so the client goes there at once instead of
//! asking for metadata first (Produce v10+, Fetch v16+, as Kafka).

use std::collections::BTreeMap;

use krabka_protocol::{fetch_response, produce_response};

use crate::broker::{Broker, LiveBroker};

/// The leaders named so far in one response, by id.
pub struct LeaderHints<'b> {
    broker: &'b Broker,
    /// The client's listener: the endpoints named are of this name.
    listener_name: &'b str,
    live: Option<Vec<LiveBroker>>,
    named: BTreeMap<i32, LiveBroker>,
}

impl<'b> LeaderHints<'b> {
    pub fn new(broker: &'b Broker, listener_name: &'b str) -> Self {
        LeaderHints { broker, listener_name, live: None, named: BTreeMap::new() }
    }

    /// The leader and leader epoch of `topic`-`partition` (-1, -1 when not
    /// known): the hosted partition's, else the image's, as Kafka's
    /// getCurrentLeader. A live leader's endpoint joins the response's.
    pub fn leader_of(&mut self, topic: &str, partition: i32) -> (i32, i32) {
        let (leader, epoch) = match self.broker.replicas.hosted_partition(topic, partition) {
            Some(hosted) => (hosted.leader_id(), hosted.leader_epoch()),
            None => {
                let image = self.broker.metadata.image();
                let found =
                    image.topic(topic).and_then(|t| usize::try_from(partition).ok().and_then(|i| t.partitions.get(i)));
                found.map_or((-1, -1), |p| (p.leader, p.leader_epoch))
            }
        };
        if leader >= 0 && !self.named.contains_key(&leader) {
            let live = self.live.get_or_insert_with(|| self.broker.live_brokers_on(self.listener_name));
            if let Some(node) = live.iter().find(|b| b.id == leader) {
                self.named.insert(leader, node.clone());
            }
        }
        (leader, epoch)
    }

    pub fn fetch_endpoints(&self) -> Vec<fetch_response::NodeEndpoint> {
        let endpoint = |b: &LiveBroker| fetch_response::NodeEndpoint {
            node_id: b.id,
            host: b.host.clone(),
            port: i32::from(b.port),
            rack: b.rack.clone(),
            ..Default::default()
        };
        self.named.values().map(endpoint).collect()
    }

    pub fn produce_endpoints(&self) -> Vec<produce_response::NodeEndpoint> {
        let endpoint = |b: &LiveBroker| produce_response::NodeEndpoint {
            node_id: b.id,
            host: b.host.clone(),
            port: i32::from(b.port),
            rack: b.rack.clone(),
            ..Default::default()
        };
        self.named.values().map(endpoint).collect()
    }
}
