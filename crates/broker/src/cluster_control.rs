//! The active controller's cluster control (Kafka's ClusterControlManager
//! with its heartbeat manager): broker registrations and heartbeats (and
//! the producer id blocks brokers ask for), each a krabka-controller plan committed through the metadata store, and the
//! broker sessions, soft state of the active controller: a broker not
//! heard of for `broker.session.timeout.ms` is fenced. A node that becomes
//! the active controller starts every registered broker's session afresh,
//! as Kafka's does, so a change of controller fences nobody by itself.

use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use krabka_controller::alter_partition::plan_alter_partition;
use krabka_controller::brokers::{plan_broker_heartbeat, plan_register_broker, BrokerSessions, HeartbeatOutcome};
use krabka_controller::controllers::plan_register_controller;
use krabka_controller::directories::plan_assign_replicas_to_dirs;
use krabka_controller::elect_leaders::plan_preferred_rebalance;
use krabka_controller::producer_ids::plan_allocate_producer_ids_for;
use krabka_controller::ApiError;
use krabka_metadata::MetadataImage;
use krabka_protocol::{
    AllocateProducerIdsRequest, AlterPartitionRequest, AlterPartitionResponse, AssignReplicasToDirsRequest,
    AssignReplicasToDirsResponse, BrokerHeartbeatRequest, BrokerRegistrationRequest, ControllerRegistrationRequest,
};

use crate::broker::Broker;
use crate::clock::now_ms;

/// How often expired sessions are looked for.
const SESSION_CHECK: Duration = Duration::from_millis(250);

pub struct ClusterControl {
    broker: Arc<Broker>,
    state: Mutex<SessionState>,
}

struct SessionState {
    sessions: BrokerSessions,
    /// The quorum epoch this node led when the sessions were started.
    led_epoch: Option<i32>,
}

impl ClusterControl {
    pub fn new(broker: Arc<Broker>) -> Arc<Self> {
        let timeout_ms =
            broker.config.raw.get("broker.session.timeout.ms").and_then(|v| v.trim().parse().ok()).unwrap_or(9_000);
        let state = SessionState { sessions: BrokerSessions::new(timeout_ms), led_epoch: None };
        Arc::new(ClusterControl { broker, state: Mutex::new(state) })
    }

    /// The sessions, started afresh when this node leads a new epoch. Only
    /// called from a plan, which runs while this node leads with `image`
    /// holding its whole log.
    fn sessions(&self, image: &MetadataImage, now_ms: i64) -> std::sync::MutexGuard<'_, SessionState> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let epoch = self.broker.metadata.quorum_view(self.broker.node_id).epoch;
        if state.led_epoch != Some(epoch) {
            state.sessions.start_all(image, now_ms);
            state.led_epoch = Some(epoch);
        }
        state
    }

    /// BrokerRegistration: the broker's new epoch; its session starts.
    pub async fn register(&self, request: &BrokerRegistrationRequest) -> Result<i64, ApiError> {
        let cluster_id = self.broker.cluster_id.as_str();
        let now = now_ms();
        let (_, epoch) = self
            .broker
            .metadata
            .control(|image| {
                let mut state = self.sessions(image, now);
                let planned = plan_register_broker(image, request, cluster_id, &state.sessions, now)?;
                state.sessions.touch(request.broker_id, now);
                Ok::<_, ApiError>(planned)
            })
            .await?;
        tracing::info!(broker = request.broker_id, broker_epoch = epoch, "broker registered");
        Ok(epoch)
    }

    /// BrokerHeartbeat: what the broker is told; its session goes on.
    pub async fn heartbeat(&self, request: &BrokerHeartbeatRequest) -> Result<HeartbeatOutcome, ApiError> {
        let now = now_ms();
        let (_, outcome) = self
            .broker
            .metadata
            .control(|image| {
                let planned = plan_broker_heartbeat(image, request)?;
                self.sessions(image, now).sessions.touch(request.broker_id, now);
                Ok::<_, ApiError>(planned)
            })
            .await?;
        Ok(outcome)
    }

    /// AssignReplicasToDirs: the log directories a broker's replicas are
    /// in, committed; each partition's answer.
    pub async fn assign_replicas_to_dirs(
        &self,
        request: &AssignReplicasToDirsRequest,
    ) -> Result<AssignReplicasToDirsResponse, ApiError> {
        let (_, response) = self.broker.metadata.control(|image| plan_assign_replicas_to_dirs(image, request)).await?;
        Ok(response)
    }

    /// AlterPartition: a leader's ISR changes, committed where accepted;
    /// each partition's answer.
    pub async fn alter_partition(
        &self,
        request: &AlterPartitionRequest,
        version: i16,
    ) -> Result<AlterPartitionResponse, ApiError> {
        let (_, response) = self.broker.metadata.control(|image| plan_alter_partition(image, request, version)).await?;
        Ok(response)
    }

    /// ControllerRegistration: the controller's listeners and features,
    /// recorded for DescribeCluster on the controllers.
    pub async fn register_controller(&self, request: &ControllerRegistrationRequest) -> Result<(), ApiError> {
        self.broker.metadata.control(|image| plan_register_controller(image, request)).await?;
        tracing::info!(controller = request.controller_id, incarnation = %request.incarnation_id, "controller registered");
        Ok(())
    }

    /// AllocateProducerIds: the next block of producer ids, reserved in
    /// the metadata log for the registered broker that asks.
    pub async fn allocate_producer_ids(&self, request: &AllocateProducerIdsRequest) -> Result<Range<i64>, ApiError> {
        let (_, block) = self.broker.metadata.control(|image| plan_allocate_producer_ids_for(image, request)).await?;
        tracing::info!(broker = request.broker_id, ?block, "producer ids reserved");
        Ok(block)
    }

    /// Fences the brokers whose session expired, while this node is the
    /// active controller, and moves leadership back to preferred replicas
    /// every `leader.imbalance.check.interval.seconds` when
    /// `auto.leader.rebalance.enable`; runs until the broker shuts down.
    pub async fn fence_expired_sessions(self: Arc<Self>) {
        let mut shutdown = self.broker.shutdown_signal();
        let config = &self.broker.config;
        let rebalance = config.raw.get("auto.leader.rebalance.enable").is_none_or(|v| v.trim() != "false");
        let interval = Duration::from_secs(config.number("leader.imbalance.check.interval.seconds", 300).max(1) as u64);
        let mut next_rebalance = tokio::time::Instant::now() + interval;
        loop {
            tokio::select! {
                () = tokio::time::sleep(SESSION_CHECK) => {}
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
            if !self.broker.metadata.is_active_controller() {
                continue;
            }
            // A new log's first leader finalizes the features at once (a
            // no-op once they are), not only at its first operation.
            if let Err(e) = self.broker.metadata.finalize_features().await {
                tracing::debug!(error = %e, "finalizing the feature levels");
            }
            let now = now_ms();
            let fenced = self
                .broker
                .metadata
                .control(|image| Ok::<_, ApiError>(self.sessions(image, now).sessions.plan_fence_expired(image, now)))
                .await;
            match fenced {
                Ok((_, ids)) if !ids.is_empty() => {
                    tracing::info!(brokers = ?ids, "fenced brokers whose session expired")
                }
                Ok(_) => {}
                Err(e) => tracing::debug!(code = e.code, message = %e.message, "fencing expired sessions"),
            }
            if rebalance && tokio::time::Instant::now() >= next_rebalance {
                next_rebalance = tokio::time::Instant::now() + interval;
                self.rebalance_leaders().await;
            }
        }
    }

    /// Kafka's preferred-leader rebalance: every partition whose first
    /// replica is in its ISR and alive goes back to it.
    async fn rebalance_leaders(&self) {
        match self.broker.metadata.control(plan_preferred_rebalance).await {
            Ok((_, 0)) => {}
            Ok((_, moved)) => tracing::info!(partitions = moved, "leadership moved back to preferred replicas"),
            Err(e) => tracing::debug!(code = e.code, message = %e.message, "preferred-leader rebalance"),
        }
    }
}
