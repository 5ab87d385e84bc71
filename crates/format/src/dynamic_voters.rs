//! KIP-853 initial voters as `kafka-storage.sh format --initial-controllers`
//! takes them: `id@host:port:directoryId,...` (`id@[v6]:port:directoryId`).
//!
//! The parse follows Kafka 4.3.1's `DynamicVoters.parse` step by step, with
//! its error messages, because the same string formats every node of a
//! cluster and an operator moving between the two tools should see the same
//! refusals. The host each voter is written with is what Java makes of it
//! (`InetSocketAddress(host, port).getHostString()`): see [`java_host_string`].

use std::net::{Ipv4Addr, Ipv6Addr};

use krabka_protocol::Uuid as KafkaUuid;

/// One initial voter: its node id, its metadata log directory's id and the
/// endpoint of its controller listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DynamicVoter {
    pub node_id: i32,
    /// As written in the VotersRecord (already passed through [`java_host_string`]).
    pub host: String,
    pub port: u16,
    pub directory_id: KafkaUuid,
}

/// Kafka's `DynamicVoter.toString`: the form `--initial-controllers` takes.
impl std::fmt::Display for DynamicVoter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let DynamicVoter { node_id, host, port, directory_id } = self;
        if host.contains(':') {
            write!(f, "{node_id}@[{host}]:{port}:{directory_id}")
        } else {
            write!(f, "{node_id}@{host}:{port}:{directory_id}")
        }
    }
}

/// A voter string Kafka would refuse; the message is Kafka's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct VoterParseError(pub String);

fn refuse<T>(message: impl Into<String>) -> Result<T, VoterParseError> {
    Err(VoterParseError(message.into()))
}

/// Java's `String.trim`: strips every char up to U+0020 at both ends.
fn java_trim(text: &str) -> &str {
    text.trim_matches(|c: char| c <= ' ')
}

/// Parses `--initial-controllers`: comma-separated voters, empty entries
/// skipped, at least one, each node id once. Sorted by node id (Kafka keeps
/// them in a `TreeMap`).
pub fn parse_voters(input: &str) -> Result<Vec<DynamicVoter>, VoterParseError> {
    let mut voters: Vec<DynamicVoter> = Vec::new();
    for entry in java_trim(input).split(',').filter(|entry| !entry.is_empty()) {
        voters.push(parse_voter(entry)?);
    }
    if voters.is_empty() {
        return refuse("No voters given.");
    }
    voters.sort_by_key(|voter| voter.node_id);
    if let Some(pair) = voters.windows(2).find(|pair| pair[0].node_id == pair[1].node_id) {
        return refuse(format!("Node id {} was specified more than once.", pair[0].node_id));
    }
    Ok(voters)
}

/// Parses one `id@host:port:directoryId` (Kafka's `DynamicVoter.parse`).
pub fn parse_voter(input: &str) -> Result<DynamicVoter, VoterParseError> {
    let input = java_trim(input);
    let Some((id_text, rest)) = input.split_once('@') else {
        return refuse("No @ found in dynamic voter string.");
    };
    if id_text.is_empty() {
        return refuse("Invalid @ at beginning of dynamic voter string.");
    }
    let Ok(node_id) = id_text.parse::<i32>() else {
        return refuse("Failed to parse node id in dynamic voter string.");
    };
    if node_id < 0 {
        return refuse(format!("Invalid negative node id {node_id} in dynamic voter string."));
    }
    if rest.is_empty() {
        return refuse("No hostname found after node id.");
    }
    let (host, rest) = split_host(rest)?;
    let Some(rest) = rest.strip_prefix(':') else {
        return refuse("Port section must start with a colon.");
    };
    let Some((port_text, directory_text)) = rest.split_once(':') else {
        return refuse("No colon following port could be found.");
    };
    let Ok(port) = port_text.parse::<i32>() else {
        return refuse("Failed to parse port in dynamic voter string.");
    };
    let Ok(port) = u16::try_from(port) else {
        return refuse(format!("Invalid port {port} in dynamic voter string."));
    };
    let Some(directory_id) = parse_java_uuid(directory_text) else {
        return refuse("Failed to parse directory ID in dynamic voter string.");
    };
    Ok(DynamicVoter { node_id, host: java_host_string(host), port, directory_id })
}

/// Splits `host` from what follows it (which starts at the port's colon):
/// `[v6]` hosts up to the bracket, others up to the first colon.
fn split_host(input: &str) -> Result<(&str, &str), VoterParseError> {
    if let Some(bracketed) = input.strip_prefix('[') {
        return match bracketed.split_once(']') {
            Some(split) => Ok(split),
            None => refuse("Hostname began with left bracket, but no right bracket was found."),
        };
    }
    match input.find(':') {
        Some(colon) => Ok((&input[..colon], &input[colon..])),
        None => refuse("No colon following hostname could be found."),
    }
}

const BASE64_URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Kafka's `Uuid.fromString`, which decodes with Java's URL-safe base64
/// decoder: 22 characters, optionally padded with `==`, and the 4 spare
/// bits of the last character ignored (so it accepts a little more than
/// [`KafkaUuid::parse`], which wants the canonical form).
pub fn parse_java_uuid(text: &str) -> Option<KafkaUuid> {
    let text = if text.len() == 24 { text.strip_suffix("==")? } else { text };
    if text.len() != 22 {
        return None;
    }
    let (head, last) = text.split_at(21);
    let last_value = BASE64_URL.iter().position(|&c| c == last.as_bytes()[0])?;
    let canonical_last = BASE64_URL[last_value & 0x30] as char;
    KafkaUuid::parse(&format!("{head}{canonical_last}"))
}

/// The host a voter endpoint is written with: what Java's
/// `new InetSocketAddress(host, port).getHostString()` returns. Names stay
/// as given (resolvable or not); an empty host is the loopback address,
/// which Java names `localhost`; IP literals are shown as Java shows them:
/// IPv4 in dotted decimal (Java also reads `127.1` and the like), IPv6 as
/// eight lowercase hex groups without `::` compression, and IPv4-mapped
/// IPv6 as IPv4. A scoped IPv6 literal (`%`) is kept as given.
pub fn java_host_string(host: &str) -> String {
    if host.is_empty() {
        return "localhost".to_string();
    }
    if let Some(v4) = java_ipv4_literal(host) {
        return v4.to_string();
    }
    if let Ok(v6) = host.parse::<Ipv6Addr>() {
        if let Some(v4) = v6.to_ipv4_mapped() {
            return v4.to_string();
        }
        return v6.segments().iter().map(|segment| format!("{segment:x}")).collect::<Vec<_>>().join(":");
    }
    host.to_string()
}

/// Java's IPv4 literal forms (`IPAddressUtil.textToNumericFormatV4`):
/// `a.b.c.d`, `a.b.c` (c 16 bits), `a.b` (b 24 bits) and `a` (32 bits), in
/// decimal, at most 15 characters.
fn java_ipv4_literal(text: &str) -> Option<Ipv4Addr> {
    if text.is_empty() || text.len() > 15 {
        return None;
    }
    let parts: Vec<&str> = text.split('.').collect();
    if parts.len() > 4 || parts.iter().any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit())) {
        return None;
    }
    let values: Vec<u64> = parts.iter().map(|p| p.parse::<u64>().ok()).collect::<Option<_>>()?;
    let (leading, last) = values.split_at(values.len() - 1);
    if leading.iter().any(|&v| v > 0xff) || last[0] >= 1u64 << (8 * (5 - values.len())) {
        return None;
    }
    let mut address = 0u64;
    for (i, &value) in leading.iter().enumerate() {
        address |= value << (8 * (3 - i));
    }
    Some(Ipv4Addr::from((address | last[0]) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIR: &str = "hcJXlCj7TresRGXDB2gi2w";

    fn err(input: &str) -> String {
        parse_voters(input).unwrap_err().0
    }

    #[test]
    fn parses_kafka_example_sorted_by_node_id() {
        let voters = parse_voters(
            "2@example.com:8084:07R5amHmR32VDA6jHkGbTA,0@example.com:8082:JEXY6aqzQY-32P5TStzaFg,\
             1@example.com:8083:MvDxzVmcRsaTz33bUuRU6A",
        )
        .unwrap();
        let ids: Vec<i32> = voters.iter().map(|v| v.node_id).collect();
        assert_eq!(ids, [0, 1, 2]);
        assert_eq!(voters[0].host, "example.com");
        assert_eq!(voters[0].port, 8082);
        assert_eq!(voters[0].directory_id.to_string(), "JEXY6aqzQY-32P5TStzaFg");
    }

    #[test]
    fn accepts_what_kafka_accepts() {
        // Whitespace around the whole string and around entries, empty entries.
        let voters = parse_voters(&format!(" 1@h:9093:{DIR} , 2@h:9094:RER2Vg5VN9FqA8z6oK9SHQ, ")).unwrap();
        assert_eq!(voters.len(), 2);
        let one = |text: &str| parse_voters(text).unwrap().remove(0);
        assert_eq!(one(&format!("+1@h:0:{DIR}")).node_id, 1);
        assert_eq!(one(&format!("1@h:0:{DIR}")).port, 0);
        assert_eq!(one(&format!("1@h:65535:{DIR}")).port, 65535);
        assert_eq!(one("1@h:1:AAAAAAAAAAAAAAAAAAAAAA").directory_id, KafkaUuid::ZERO);
        // Java's base64 decoder: padding allowed, spare bits ignored.
        assert_eq!(one(&format!("1@h:1:{DIR}==")).directory_id.to_string(), DIR);
        assert_eq!(one("1@h:1:hcJXlCj7TresRGXDB2gi2x").directory_id.to_string(), DIR);
        // A host is anything up to the colon, spaces included.
        assert_eq!(one(&format!("1@ h :1:{DIR}")).host, " h ");
    }

    #[test]
    fn displays_as_kafka_and_parses_back() {
        let text = format!("0@[2001:db8:0:0:0:0:0:1]:9093:{DIR},1@h:9094:{DIR}");
        let voters = parse_voters(&text).unwrap();
        let shown: Vec<String> = voters.iter().map(ToString::to_string).collect();
        assert_eq!(shown.join(","), text);
        assert_eq!(parse_voters(&shown.join(",")).unwrap(), voters);
    }

    #[test]
    fn hosts_as_java_shows_them() {
        let host = |h: &str| parse_voters(&format!("1@{h}:1:{DIR}")).unwrap().remove(0).host;
        assert_eq!(host("[::1]"), "0:0:0:0:0:0:0:1");
        assert_eq!(host("[2001:DB8::1]"), "2001:db8:0:0:0:0:0:1");
        assert_eq!(host("[::ffff:1.2.3.4]"), "1.2.3.4");
        assert_eq!(host("[::1.2.3.4]"), "0:0:0:0:0:0:102:304");
        assert_eq!(host("[::]"), "0:0:0:0:0:0:0:0");
        assert_eq!(host("[fe80::1%lo]"), "fe80::1%lo");
        assert_eq!(host(""), "localhost");
        assert_eq!(host("[]"), "localhost");
        assert_eq!(host("127.1"), "127.0.0.1");
        assert_eq!(host("010.1.1.1"), "10.1.1.1");
        assert_eq!(host("0.0.0.0"), "0.0.0.0");
        assert_eq!(host("LOCALHOST"), "LOCALHOST");
        assert_eq!(host("nonexistent.invalid"), "nonexistent.invalid");
        assert_eq!(host("256.1.1.1"), "256.1.1.1");
    }

    #[test]
    fn refuses_with_kafka_messages() {
        let cases = [
            ("1127.0.0.1:9093:x", "No @ found in dynamic voter string."),
            ("@127.0.0.1:9093:x", "Invalid @ at beginning of dynamic voter string."),
            ("x@h:9093:x", "Failed to parse node id in dynamic voter string."),
            ("1 @h:9093:x", "Failed to parse node id in dynamic voter string."),
            ("99999999999@h:1:x", "Failed to parse node id in dynamic voter string."),
            ("-1@h:9093:x", "Invalid negative node id -1 in dynamic voter string."),
            ("1@", "No hostname found after node id."),
            ("1@[::1:9093:x", "Hostname began with left bracket, but no right bracket was found."),
            ("1@[::1]9093:x", "Port section must start with a colon."),
            ("1@host", "No colon following hostname could be found."),
            ("1@host:9093", "No colon following port could be found."),
            ("1@host:x:y", "Failed to parse port in dynamic voter string."),
            ("1@h: 9093:y", "Failed to parse port in dynamic voter string."),
            ("1@h:h:9093:y", "Failed to parse port in dynamic voter string."),
            ("1@host:70000:y", "Invalid port 70000 in dynamic voter string."),
            ("1@host:-1:y", "Invalid port -1 in dynamic voter string."),
            ("1@host:9093:", "Failed to parse directory ID in dynamic voter string."),
            ("1@host:9093:nope", "Failed to parse directory ID in dynamic voter string."),
            ("", "No voters given."),
            (",", "No voters given."),
        ];
        for (input, message) in cases {
            assert_eq!(err(input), message, "{input:?}");
        }
        for id in [
            " hcJXlCj7TresRGXDB2gi2w",
            "hcJXlCj7TresRGXDB2gi2w=",
            "hcJXlCj7TresRGXDB2gi2w===",
            "hcJXlCj7TresRGXDB2gi2wAA",
        ]
        .into_iter()
        .chain([
            "hcJXlCj7TresRGXDB2gi2",
            "hcJXlCj7TresRGXDB2gi2w+",
            "hcJXlCj7TresRGXDB2g/2w",
            "hcJXlCj7TresRGXDB2gi2w:e",
        ]) {
            assert_eq!(err(&format!("1@h:1:{id}")), "Failed to parse directory ID in dynamic voter string.", "{id:?}");
        }
        assert_eq!(
            err(&format!("1@h:9093:{DIR},1@g:9094:RER2Vg5VN9FqA8z6oK9SHQ")),
            "Node id 1 was specified more than once."
        );
        // A blank entry between two others is not empty: Kafka parses it.
        assert_eq!(err(&format!("1@h:1:{DIR}, ,2@h:2:{DIR}")), "No @ found in dynamic voter string.");
    }
}
