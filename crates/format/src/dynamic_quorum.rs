//! The KIP-853 flags of `kafka-storage.sh format`: `--standalone` (`-s`),
//! `--initial-controllers` (`-I`) and `--no-initial-controllers` (`-N`),
//! checked against the config in the order Kafka 4.3.1's `StorageTool`
//! checks them, with its messages, so a refused command is refused by both
//! tools for the same reason.
//!
//! Kafka's rules, as 4.3.1 applies them:
//! - at most one of the three flags;
//! - `-s` or `-I` with `controller.quorum.voters` set is refused (a static
//!   quorum has no initial voters to record);
//! - `-I` is parsed ([`crate::dynamic_voters`]); on a broker-only node it is
//!   accepted too (the node records the voters, as a non-voter);
//! - `-s` needs the controller role; its voter is this node, on the first
//!   controller listener as advertised ([`standalone_voter`]), with a
//!   random directory id;
//! - a controller without `controller.quorum.voters` needs one of the three.
//!
//! Where krabka is laxer than Kafka it stays so without the flags: a
//! combined node with neither `controller.quorum.voters` nor
//! `controller.quorum.bootstrap.servers` is krabka's single node (Kafka
//! refuses such a config outright), and formats as before. Kafka's config
//! checks that concern the flags (`process.roles`, one of the two quorum
//! keys, `controller.listener.names`) apply when a flag is given.

use std::collections::BTreeMap;

use krabka_protocol::Uuid as KafkaUuid;

use crate::dynamic_voters::{parse_voter, parse_voters, DynamicVoter};

/// The flags as given on the command line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuorumFlags {
    pub standalone: bool,
    pub no_initial_controllers: bool,
    pub initial_controllers: Option<String>,
}

/// The initial voters of a dynamic quorum, and the listener their
/// endpoints are on (the first of `controller.listener.names`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitialVoters {
    pub voters: Vec<DynamicVoter>,
    pub controller_listener: String,
}

impl InitialVoters {
    /// This node's entry, whose directory id its metadata log directory takes.
    pub fn voter(&self, node_id: i32) -> Option<&DynamicVoter> {
        self.voters.iter().find(|voter| voter.node_id == node_id)
    }
}

/// A refusal, with Kafka's message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct QuorumError(pub String);

fn refuse<T>(message: impl Into<String>) -> Result<T, QuorumError> {
    Err(QuorumError(message.into()))
}

const VOTERS: &str = "controller.quorum.voters";
const BOOTSTRAP_SERVERS: &str = "controller.quorum.bootstrap.servers";

/// Kafka's comma-separated list: split, trimmed, empty items dropped.
fn list(props: &BTreeMap<String, String>, key: &str) -> Option<Vec<String>> {
    let value = props.get(key)?;
    Some(value.split(',').map(|item| item.trim().to_string()).filter(|item| !item.is_empty()).collect())
}

fn is_set(props: &BTreeMap<String, String>, key: &str) -> bool {
    list(props, key).is_some_and(|items| !items.is_empty())
}

/// Checks the flags against the config and returns the initial voters to
/// record, if any. `random_directory_id` makes `--standalone`'s directory id.
pub fn initial_voters(
    props: &BTreeMap<String, String>,
    node_id: i32,
    flags: &QuorumFlags,
    random_directory_id: impl FnOnce() -> std::io::Result<KafkaUuid>,
) -> Result<Option<InitialVoters>, QuorumError> {
    check_exclusive(flags)?;
    let any_flag = flags.standalone || flags.no_initial_controllers || flags.initial_controllers.is_some();
    let dynamic = flags.standalone || flags.initial_controllers.is_some();
    let controller = roles(props, any_flag)?.iter().any(|role| role == "controller");
    let listener = if dynamic { Some(controller_listener(props, controller)?) } else { None };
    let (static_voters, bootstrap_servers) = (is_set(props, VOTERS), is_set(props, BOOTSTRAP_SERVERS));
    if dynamic && !static_voters && !bootstrap_servers {
        return refuse(format!(
            "If using process.roles, either {BOOTSTRAP_SERVERS} must contain the set of bootstrap controllers \
             or {VOTERS} must contain a parseable set of controllers."
        ));
    }
    if dynamic && static_voters {
        return refuse(format!(
            "You cannot specify {VOTERS} and format the node with --initial-controllers or --standalone. \
             If you want to use dynamic quorum, please remove {VOTERS} and specify {BOOTSTRAP_SERVERS} instead."
        ));
    }
    let voters = match (&flags.initial_controllers, flags.standalone) {
        (Some(text), _) => Some(parse_voters(text).map_err(|e| QuorumError(e.0))?),
        (None, true) if !controller => return refuse("You can only use --standalone on a controller."),
        (None, true) => {
            let directory_id = random_directory_id().map_err(|e| QuorumError(format!("random directory id: {e}")))?;
            Some(vec![standalone_voter(props, node_id, listener.as_deref().unwrap_or_default(), directory_id)?])
        }
        (None, false) => None,
    };
    if !flags.no_initial_controllers && controller && !static_voters && bootstrap_servers && voters.is_none() {
        return refuse(format!(
            "Because {VOTERS} is not set on this controller, you must specify one of the following: \
             --standalone, --initial-controllers, or --no-initial-controllers."
        ));
    }
    Ok(voters.zip(listener).map(|(voters, controller_listener)| InitialVoters { voters, controller_listener }))
}

/// The three flags are one mutually exclusive group (argparse's message,
/// naming them in the group's order).
fn check_exclusive(flags: &QuorumFlags) -> Result<(), QuorumError> {
    let given: Vec<&str> = [
        (flags.standalone, "--standalone/-s"),
        (flags.no_initial_controllers, "--no-initial-controllers/-N"),
        (flags.initial_controllers.is_some(), "--initial-controllers/-I"),
    ]
    .into_iter()
    .filter_map(|(given, name)| given.then_some(name))
    .collect();
    match given[..] {
        [first, second, ..] => refuse(format!("argument {second}: not allowed with argument {first}")),
        _ => Ok(()),
    }
}

/// `process.roles`; with a flag it must be there and name a role, as
/// Kafka requires of every config it formats.
fn roles(props: &BTreeMap<String, String>, required: bool) -> Result<Vec<String>, QuorumError> {
    match list(props, "process.roles") {
        None if required => refuse("Missing required configuration \"process.roles\" which has no default value."),
        Some(roles) if required && roles.is_empty() => refuse(
            "The kafka configuration file appears to be for a legacy cluster. \
             Formatting is only supported for clusters in KRaft mode.",
        ),
        roles => Ok(roles.unwrap_or_default()),
    }
}

/// The first of `controller.listener.names`, which names every voter's endpoint.
fn controller_listener(props: &BTreeMap<String, String>, controller: bool) -> Result<String, QuorumError> {
    let Some(names) = list(props, "controller.listener.names") else {
        return refuse("Missing required configuration \"controller.listener.names\" which has no default value.");
    };
    match names.into_iter().next() {
        Some(name) => Ok(name),
        None if controller => refuse(no_controller_listener()),
        None => refuse(
            "controller.listener.names must contain at least one value when running KRaft with just the broker role",
        ),
    }
}

fn no_controller_listener() -> String {
    "controller.listener.names must contain at least one value appearing in the 'listeners' configuration \
     when running the KRaft controller role"
        .to_string()
}

/// `--standalone`'s voter: this node, on `listener` as Kafka's
/// `effectiveAdvertisedControllerListeners` has it (its `advertised.listeners`
/// entry, else its `listeners` entry with 0.0.0.0 taken as no host), an
/// absent host being `localhost`. Kafka then writes `id@host:port:dir` and
/// parses it back, which refuses an IPv6 host (it is not bracketed); so
/// does this.
pub fn standalone_voter(
    props: &BTreeMap<String, String>,
    node_id: i32,
    listener: &str,
    directory_id: KafkaUuid,
) -> Result<DynamicVoter, QuorumError> {
    let advertised = match list(props, "advertised.listeners") {
        Some(entries) => find_endpoint(&entries, listener)?,
        None => None,
    };
    if advertised.as_ref().is_some_and(|(host, _)| host == "0.0.0.0") {
        return refuse(
            "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address.",
        );
    }
    let endpoint = match advertised {
        Some(endpoint) => endpoint,
        None => {
            let listeners = list(props, "listeners").unwrap_or_else(|| vec!["PLAINTEXT://:9092".to_string()]);
            let (host, port) =
                find_endpoint(&listeners, listener)?.ok_or_else(|| QuorumError(no_controller_listener()))?;
            (if host == "0.0.0.0" { String::new() } else { host }, port)
        }
    };
    let (host, port) = endpoint;
    let host = if host.is_empty() { "localhost" } else { host.as_str() };
    parse_voter(&format!("{node_id}@{host}:{port}:{directory_id}")).map_err(|e| QuorumError(e.0))
}

/// The (host, port text) of the `NAME://host:port` entry named `listener`
/// (names compared as Kafka normalises them, upper case); `[v6]` hosts lose
/// their brackets, as Kafka's listener pattern takes them.
fn find_endpoint(entries: &[String], listener: &str) -> Result<Option<(String, String)>, QuorumError> {
    for entry in entries {
        let parsed = entry.split_once("://").and_then(|(name, address)| {
            let (host, port) = address.rsplit_once(':')?;
            let host = host.strip_prefix('[').unwrap_or(host);
            let host = host.strip_suffix(']').unwrap_or(host);
            let port_ok = !port.is_empty() && port.trim_start_matches('-').bytes().all(|b| b.is_ascii_digit());
            port_ok.then(|| (name.to_uppercase(), host.to_string(), port.to_string()))
        });
        let Some((name, host, port)) = parsed else {
            return refuse(format!("Unable to parse {entry} to a broker endpoint"));
        };
        if name == listener.to_uppercase() {
            return Ok(Some((host, port)));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::properties;

    const DIR: &str = "hcJXlCj7TresRGXDB2gi2w";
    const COMBINED: &str = "process.roles=broker,controller\nnode.id=1\ncontroller.listener.names=CONTROLLER\n\
        listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n";
    const BROKER: &str = "process.roles=broker\nnode.id=2\ncontroller.listener.names=CONTROLLER\n\
        listeners=PLAINTEXT://127.0.0.1:9094\n";
    const BOOTSTRAP: &str = "controller.quorum.bootstrap.servers=127.0.0.1:9093\n";
    const STATIC: &str = "controller.quorum.voters=1@127.0.0.1:9093\n";

    fn standalone() -> QuorumFlags {
        QuorumFlags { standalone: true, ..Default::default() }
    }

    fn initial(text: &str) -> QuorumFlags {
        QuorumFlags { initial_controllers: Some(text.to_string()), ..Default::default() }
    }

    fn no_initial() -> QuorumFlags {
        QuorumFlags { no_initial_controllers: true, ..Default::default() }
    }

    fn run(config: &str, flags: &QuorumFlags) -> Result<Option<InitialVoters>, QuorumError> {
        let node_id = if config.contains("node.id=2") { 2 } else { 1 };
        initial_voters(&properties::parse(config), node_id, flags, || Ok(KafkaUuid::parse(DIR).unwrap()))
    }

    fn refusal(config: &str, flags: &QuorumFlags) -> String {
        run(config, flags).unwrap_err().0
    }

    #[test]
    fn standalone_records_this_node_on_its_controller_listener() {
        let voters = run(&format!("{COMBINED}{BOOTSTRAP}"), &standalone()).unwrap().unwrap();
        assert_eq!(voters.controller_listener, "CONTROLLER");
        let voter = voters.voter(1).unwrap();
        assert_eq!((voter.host.as_str(), voter.port, voter.directory_id.to_string()), ("127.0.0.1", 9093, DIR.into()));
    }

    #[test]
    fn standalone_host_as_kafka_advertises_it() {
        let host = |listeners: &str| -> Result<(String, u16), String> {
            let config = format!(
                "process.roles=controller\nnode.id=1\ncontroller.listener.names=CONTROLLER\n{BOOTSTRAP}{listeners}"
            );
            let voters = run(&config, &standalone()).map_err(|e| e.0)?.unwrap();
            Ok((voters.voters[0].host.clone(), voters.voters[0].port))
        };
        assert_eq!(host("listeners=CONTROLLER://:9093").unwrap(), ("localhost".into(), 9093));
        assert_eq!(host("listeners=CONTROLLER://0.0.0.0:9093").unwrap(), ("localhost".into(), 9093));
        assert_eq!(host("listeners=CONTROLLER://localhost:9093").unwrap(), ("localhost".into(), 9093));
        let advertised = "listeners=CONTROLLER://0.0.0.0:9093\nadvertised.listeners=CONTROLLER://adv.example:19093";
        assert_eq!(host(advertised).unwrap(), ("adv.example".into(), 19093));
        // advertised.listeners without the controller listener: listeners it is.
        let other = "listeners=CONTROLLER://127.0.0.1:9093\nadvertised.listeners=PLAINTEXT://h:1";
        assert_eq!(host(other).unwrap(), ("127.0.0.1".into(), 9093));
        assert_eq!(
            host("listeners=CONTROLLER://127.0.0.1:9093\nadvertised.listeners=CONTROLLER://0.0.0.0:9093").unwrap_err(),
            "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address."
        );
        // Kafka's id@host:port:dir with an unbracketed IPv6 host does not parse back.
        assert_eq!(
            host("listeners=CONTROLLER://[::1]:9093").unwrap_err(),
            "Failed to parse port in dynamic voter string."
        );
        assert_eq!(host("listeners=PLAINTEXT://:9092").unwrap_err(), no_controller_listener());
        // The first of controller.listener.names.
        let two = format!(
            "process.roles=controller\nnode.id=1\ncontroller.listener.names=C2,CONTROLLER\n{BOOTSTRAP}\
             listeners=CONTROLLER://127.0.0.1:9093,C2://127.0.0.1:9095"
        );
        let voters = run(&two, &standalone()).unwrap().unwrap();
        assert_eq!((voters.controller_listener.as_str(), voters.voters[0].port), ("C2", 9095));
    }

    #[test]
    fn initial_controllers_are_parsed_and_allowed_on_brokers() {
        let text = format!("1@127.0.0.1:9093:{DIR}");
        let voters = run(&format!("{COMBINED}{BOOTSTRAP}"), &initial(&text)).unwrap().unwrap();
        assert_eq!(voters.voter(1).unwrap().directory_id.to_string(), DIR);
        // Kafka 4.3.1 formats a broker with -I as a non-voter of that quorum.
        let voters = run(&format!("{BROKER}{BOOTSTRAP}"), &initial(&text)).unwrap().unwrap();
        assert!(voters.voter(2).is_none());
        assert_eq!(
            refusal(&format!("{COMBINED}{BOOTSTRAP}"), &initial("1@h")),
            "No colon following hostname could be found."
        );
    }

    #[test]
    fn refusals_in_kafkas_order_with_its_messages() {
        let combined_bootstrap = format!("{COMBINED}{BOOTSTRAP}");
        let both = QuorumFlags { initial_controllers: Some(format!("1@h:1:{DIR}")), ..standalone() };
        assert_eq!(
            refusal(&combined_bootstrap, &both),
            "argument --initial-controllers/-I: not allowed with argument --standalone/-s"
        );
        let s_n = QuorumFlags { no_initial_controllers: true, ..standalone() };
        assert_eq!(
            refusal(&combined_bootstrap, &s_n),
            "argument --no-initial-controllers/-N: not allowed with argument --standalone/-s"
        );
        let static_refusal = refusal(&format!("{COMBINED}{STATIC}"), &standalone());
        assert!(static_refusal.starts_with("You cannot specify controller.quorum.voters and format the node with --initial-controllers or --standalone."));
        // The static-voters refusal comes before the broker one, as in Kafka.
        assert_eq!(refusal(&format!("{BROKER}{STATIC}"), &standalone()), static_refusal);
        assert_eq!(refusal(&format!("{BROKER}{STATIC}"), &initial("garbage")), static_refusal);
        assert_eq!(
            refusal(&format!("{BROKER}{BOOTSTRAP}"), &standalone()),
            "You can only use --standalone on a controller."
        );
        assert!(refusal(&combined_bootstrap, &QuorumFlags::default()).starts_with(
            "Because controller.quorum.voters is not set on this controller, you must specify one of the following"
        ));
        assert!(refusal(COMBINED, &standalone())
            .starts_with("If using process.roles, either controller.quorum.bootstrap.servers"));
        let no_roles = "node.id=1\nlisteners=PLAINTEXT://127.0.0.1:9092\ncontroller.quorum.bootstrap.servers=h:1\n";
        assert_eq!(
            refusal(no_roles, &standalone()),
            "Missing required configuration \"process.roles\" which has no default value."
        );
        assert!(refusal(&format!("process.roles=\n{no_roles}"), &no_initial()).contains("legacy cluster"));
        let no_names = format!("process.roles=controller\nnode.id=1\nlisteners=CONTROLLER://h:1\n{BOOTSTRAP}");
        assert!(refusal(&no_names, &standalone())
            .starts_with("Missing required configuration \"controller.listener.names\""));
    }

    #[test]
    fn accepted_without_initial_voters() {
        let cases = [
            (format!("{COMBINED}{BOOTSTRAP}"), no_initial()),
            (format!("{COMBINED}{STATIC}"), no_initial()),
            (format!("{COMBINED}{STATIC}"), QuorumFlags::default()),
            (format!("{BROKER}{BOOTSTRAP}"), no_initial()),
            (format!("{BROKER}{BOOTSTRAP}"), QuorumFlags::default()),
            (format!("{BROKER}{STATIC}"), QuorumFlags::default()),
            // krabka's single node: no quorum key at all, no flag.
            (COMBINED.to_string(), QuorumFlags::default()),
            // Without flags nothing else is looked at, as before.
            ("node.id=1\n".to_string(), QuorumFlags::default()),
        ];
        for (config, flags) in cases {
            assert_eq!(run(&config, &flags), Ok(None), "{config} {flags:?}");
        }
    }
}
