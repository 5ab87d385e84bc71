//! `krabka-broker server.properties [--override key=value]...`: the broker
//! binary, started like `kafka-server-start.sh`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::Parser;
use krabka_broker::broker::Broker;
use krabka_broker::config::security::ClientListener;
use krabka_broker::config::BrokerConfig;
use krabka_broker::observability;
use krabka_broker::quorum::{serve_controller_listener, ControllerListenerSecurity};
use krabka_format::properties;
use tokio::net::{TcpListener, TcpSocket};

#[derive(Parser)]
#[command(name = "krabka-broker", version, about = "An Apache Kafka-compatible broker")]
struct Cli {
    /// The broker's server.properties (Kafka key names).
    config: PathBuf,
    /// Override a config key: --override key=value (repeatable).
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
}

fn load_config(cli: &Cli) -> anyhow::Result<(BrokerConfig, Vec<String>)> {
    let text = std::fs::read_to_string(&cli.config).with_context(|| format!("reading {}", cli.config.display()))?;
    let mut props: BTreeMap<String, String> = properties::parse(&text);
    for entry in &cli.overrides {
        let Some((key, value)) = entry.split_once('=') else { bail!("--override takes key=value, got {entry:?}") };
        props.insert(key.trim().to_string(), value.to_string());
    }
    Ok(BrokerConfig::from_properties(props)?)
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let (config, warnings) = load_config(&cli).context("invalid configuration")?;
    observability::init_tracing(&config.log_level, config.log_format_json)?;
    krabka_broker::replica::halt_on_sigbus();
    for warning in warnings {
        tracing::warn!("{warning}");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(krabka_broker::worker_threads(config.num_network_threads))
        .thread_name("krabka-worker")
        .enable_all()
        .build()?;
    runtime.block_on(run(config))
}

async fn run(config: BrokerConfig) -> anyhow::Result<()> {
    if !config.is_broker() {
        return run_controller(config).await;
    }
    let metrics_listener = config.metrics_listener.clone();
    let backlog = config.socket_listen_backlog_size;
    let mut config = config;
    let sockets = bind_client_listeners(&mut config).await?;
    let controller_listener = bind_controller_listener(&config).await?;
    let broker = tokio::task::spawn_blocking(move || Broker::open(config)).await??;
    observability::failures::install_panic_hook(broker.metrics.clone());
    serve_http(&broker, metrics_listener).await?;
    if let Some(listener) = controller_listener {
        serve_quorum(&broker, listener)?;
    }
    // Clients wait (refused) until the image has caught up: a broker must
    // not answer from metadata it has not read yet.
    spawn_signal_handler(broker.clone())?;
    tokio::spawn(krabka_broker::lifecycle::run(broker.clone()));
    let mut shutdown = broker.shutdown_signal();
    tokio::select! {
        caught_up = broker.catch_up_metadata() => caught_up?,
        _ = shutdown.wait_for(|stop| *stop) => return broker.close().await,
    }
    // A node that is its quorum's only voter finalizes the features of a
    // new log before it serves (a shared quorum's leader does it in its
    // cluster control's rounds).
    if broker.metadata.quorum().is_none() {
        broker.metadata.finalize_features().await.context("finalizing the feature levels")?;
    }
    tokio::select! {
        () = broker.wait_until_unfenced() => {}
        _ = shutdown.wait_for(|stop| *stop) => return broker.close().await,
    }
    let mut listeners = Vec::new();
    for (socket, listener) in sockets {
        let address = socket.local_addr()?;
        let socket = socket.listen(backlog).with_context(|| format!("listening on {address}"))?;
        tracing::info!(listener = %listener.name, protocol = ?listener.protocol, %address, "listening");
        listeners.push((socket, listener));
    }
    let first = listeners.first().context("no client listener in listeners")?.0.local_addr()?;
    broker.mark_serving();
    tracing::info!(
        node_id = broker.node_id,
        cluster_id = %broker.cluster_id,
        address = %first,
        "krabka broker serving"
    );
    broker.run(listeners).await
}

/// A controller-only node (`process.roles=controller`): the metadata
/// quorum and the active controller's work on its controller listener,
/// no client listener, no partitions, no broker registration.
async fn run_controller(config: BrokerConfig) -> anyhow::Result<()> {
    let listener = bind_controller_listener(&config).await?.context("a controller needs its controller listener")?;
    let address = listener.local_addr()?;
    let metrics_listener = config.metrics_listener.clone();
    let broker = tokio::task::spawn_blocking(move || Broker::open(config)).await??;
    observability::failures::install_panic_hook(broker.metrics.clone());
    serve_http(&broker, metrics_listener).await?;
    serve_quorum(&broker, listener)?;
    spawn_signal_handler(broker.clone())?;
    let mut shutdown = broker.shutdown_signal();
    tokio::select! {
        caught_up = broker.catch_up_metadata() => caught_up?,
        _ = shutdown.wait_for(|stop| *stop) => return broker.close().await,
    }
    broker.mark_serving();
    tracing::info!(node_id = broker.node_id, cluster_id = %broker.cluster_id, %address, "krabka controller serving");
    let _ = shutdown.wait_for(|stop| *stop).await;
    broker.close().await
}

/// Serves `/metrics`, `/healthz`, `/readyz` and the CPU profile on
/// `krabka.metrics.listener`, if set: from the moment the storage is open,
/// so that an orchestrator sees the node alive (and not yet ready) while
/// it catches up.
async fn serve_http(broker: &Arc<Broker>, address: Option<String>) -> anyhow::Result<()> {
    let Some(address) = address else { return Ok(()) };
    let http = TcpListener::bind(&address).await.with_context(|| format!("binding {address}"))?;
    tracing::info!(address = %http.local_addr()?, "serving /metrics, /healthz, /readyz and /debug/pprof/profile");
    let ready = Arc::clone(broker);
    let endpoints = observability::http::Endpoints {
        metrics: broker.metrics.clone(),
        readiness: Arc::new(move || ready.readiness()),
    };
    tokio::spawn(observability::http::serve(http, endpoints, broker.shutdown_signal()));
    Ok(())
}

/// Serves the quorum on the controller listener: raft's RPCs, and the
/// active controller's (registrations, heartbeats, producer ids, forwarded
/// requests), with the reaper fencing expired broker sessions; and keeps
/// this controller registered (KIP-919).
fn serve_quorum(broker: &Arc<Broker>, listener: TcpListener) -> anyhow::Result<()> {
    let quorum = broker.metadata.quorum().context("a controller listener without a shared quorum")?;
    tracing::info!(address = %listener.local_addr()?, "serving the metadata quorum");
    let control = krabka_broker::cluster_control::ClusterControl::new(broker.clone());
    tokio::spawn(Arc::clone(&control).fence_expired_sessions());
    let controller = krabka_broker::handlers::controller::handler(control, broker.clone());
    let name = broker.config.controller_listener_names.first().context("controller.listener.names is empty")?;
    let mut security = ControllerListenerSecurity::of(&broker.config.security, name)
        .with_context(|| format!("no controller listener {name} in listeners"))?;
    security.gate = krabka_broker::handlers::controller::gate(broker.clone());
    tokio::spawn(serve_controller_listener(listener, Arc::clone(quorum), Some(controller), security));
    tokio::spawn(krabka_broker::controller_registration::run(broker.clone()));
    Ok(())
}

/// The controller listener of a controller sharing its quorum with other
/// voters (or with brokers: a controller-only node always shares it), bound
/// before the storage opens: the other voters reach this node's raft
/// through it while it catches up. None for a combined node that is its
/// quorum's only voter, or a node that is no controller.
/// Binds every client listener, in `listeners` order. Bound now (port 0
/// learns its port, to advertise) but not listening until the storage is
/// open: a client connecting during recovery is refused and retries,
/// rather than waiting on a broker that cannot answer.
async fn bind_client_listeners(config: &mut BrokerConfig) -> anyhow::Result<Vec<(TcpSocket, Arc<ClientListener>)>> {
    let mut sockets = Vec::new();
    for listener in config.security.client_listeners.clone() {
        let bound = config.listeners.iter().find(|l| l.name == listener.name).context("a client listener is listed")?;
        let host = if bound.host.is_empty() { "0.0.0.0" } else { bound.host.as_str() };
        let socket = bind_client_socket(&format!("{host}:{}", bound.port)).await?;
        let port = socket.local_addr()?.port();
        for advertised in config.advertised_listeners.iter_mut().filter(|l| l.name == listener.name && l.port == 0) {
            advertised.port = port;
        }
        sockets.push((socket, listener));
    }
    anyhow::ensure!(!sockets.is_empty(), "no client listener in listeners");
    Ok(sockets)
}

async fn bind_controller_listener(config: &BrokerConfig) -> anyhow::Result<Option<TcpListener>> {
    if !config.is_controller() || (config.is_broker() && !config.quorum.is_shared(config.node_id)) {
        return Ok(None);
    }
    let name = config.controller_listener_names.first().context("controller.listener.names is empty")?;
    let listener = config.listeners.iter().find(|l| &l.name == name).context("no controller listener in listeners")?;
    let host = if listener.host.is_empty() { "0.0.0.0" } else { listener.host.as_str() };
    let address = format!("{host}:{}", listener.port);
    let socket = bind_client_socket(&address).await?;
    Ok(Some(socket.listen(config.socket_listen_backlog_size).with_context(|| format!("listening on {address}"))?))
}

/// A socket bound to `address` (host names resolved), not yet listening.
async fn bind_client_socket(address: &str) -> anyhow::Result<TcpSocket> {
    let resolved = tokio::net::lookup_host(address)
        .await
        .with_context(|| format!("resolving {address}"))?
        .next()
        .with_context(|| format!("{address} resolves to no address"))?;
    let socket = if resolved.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    // As a listener binds on Unix: a restart may reuse the port at once.
    socket.set_reuseaddr(true)?;
    socket.bind(resolved).with_context(|| format!("binding {address}"))?;
    Ok(socket)
}

/// SIGTERM and SIGINT start a graceful shutdown.
fn spawn_signal_handler(broker: Arc<Broker>) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = interrupt.recv() => tracing::info!("SIGINT: shutting down"),
        }
        broker.begin_shutdown();
    });
    Ok(())
}
