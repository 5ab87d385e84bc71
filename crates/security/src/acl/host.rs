//! The client address as text, the way ACL hosts are compared.

use std::net::IpAddr;

/// The client address as Java's `InetAddress.getHostAddress()` prints it,
/// which is the text Kafka compares ACL hosts with: dotted IPv4, and IPv6
/// as eight lower-case hex groups without zero compression
/// (`0:0:0:0:0:0:0:1`, not `::1`). An IPv4-mapped IPv6 address prints as
/// the IPv4 address, since Java hands such a peer over as an IPv4 one. (A
/// scoped link-local peer gets a `%scope` suffix in Java; `IpAddr` has no
/// scope, so none is added.)
pub fn host_address(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.segments().iter().map(|segment| format!("{segment:x}")).collect::<Vec<_>>().join(":"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_address_prints_as_java() {
        assert_eq!(host_address("192.168.1.1".parse().unwrap()), "192.168.1.1");
        assert_eq!(host_address("::1".parse().unwrap()), "0:0:0:0:0:0:0:1");
        assert_eq!(host_address("fe80::1:AB".parse().unwrap()), "fe80:0:0:0:0:0:1:ab");
        assert_eq!(host_address("2001:db8::ff00:42:8329".parse().unwrap()), "2001:db8:0:0:0:ff00:42:8329");
        assert_eq!(host_address("::ffff:10.0.0.7".parse().unwrap()), "10.0.0.7");
    }
}
