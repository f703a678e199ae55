//! Which destinations the broker may call on a client's behalf: the
//! address ranges refused by default, the operator's allow list, and the
//! judgment of a URL's host and of each address a name resolves to. Pure:
//! nothing here resolves or connects, so every rule is tested from a table.
//!
//! Addresses are judged after the URL parser has read them (WHATWG URL
//! host parsing, which the `url` crate implements): `127.1`, `0x7f000001`,
//! `2130706433`, `0177.0.0.1` and `１２７.０.０.１` all reach this module
//! as `127.0.0.1`, so the spelling cannot get around the ranges. An IPv6
//! address that carries an IPv4 one (mapped `::ffff:a.b.c.d`, NAT64
//! `64:ff9b::a.b.c.d`, 6to4 `2002:AABB:CCDD::`) is judged as that IPv4
//! address; the deprecated IPv4-compatible form `::a.b.c.d` is refused
//! whole.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An IPv4 range refused by default: (first address, prefix length, what
/// it is).
const REFUSED_V4: &[([u8; 4], u8, &str)] = &[
    ([0, 0, 0, 0], 8, "this network (unspecified)"),
    ([10, 0, 0, 0], 8, "private (RFC 1918)"),
    ([100, 64, 0, 0], 10, "carrier-grade NAT (RFC 6598)"),
    ([127, 0, 0, 0], 8, "loopback"),
    ([169, 254, 0, 0], 16, "link-local (cloud metadata)"),
    ([172, 16, 0, 0], 12, "private (RFC 1918)"),
    ([192, 0, 0, 0], 24, "IETF protocol assignments"),
    ([192, 0, 2, 0], 24, "documentation (TEST-NET-1)"),
    ([192, 88, 99, 0], 24, "6to4 relay anycast"),
    ([192, 168, 0, 0], 16, "private (RFC 1918)"),
    ([198, 18, 0, 0], 15, "benchmarking"),
    ([198, 51, 100, 0], 24, "documentation (TEST-NET-2)"),
    ([203, 0, 113, 0], 24, "documentation (TEST-NET-3)"),
    ([224, 0, 0, 0], 4, "multicast"),
    ([240, 0, 0, 0], 4, "reserved and broadcast"),
];

/// An IPv6 range refused by default (those carrying an IPv4 address are
/// judged by it instead: see [`embedded_v4`]).
const REFUSED_V6: &[([u16; 8], u8, &str)] = &[
    ([0, 0, 0, 0, 0, 0, 0, 0], 96, "unspecified, loopback and IPv4-compatible"),
    ([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48, "local-use NAT64"),
    ([0x100, 0, 0, 0, 0, 0, 0, 0], 64, "discard-only"),
    ([0x2001, 0, 0, 0, 0, 0, 0, 0], 23, "IETF protocol assignments (Teredo, benchmarking, ORCHID)"),
    ([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, "documentation"),
    ([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, "documentation"),
    ([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16, "segment routing (SRv6)"),
    ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "unique-local"),
    ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "link-local"),
    ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, "site-local"),
    ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "multicast"),
];

/// The IPv4 address an IPv6 one stands for, where it stands for one
/// (mapped, NAT64's well-known prefix, 6to4).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(tail),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(tail),
        [0x2002, a, b, ..] => Some(Ipv4Addr::new((a >> 8) as u8, a as u8, (b >> 8) as u8, b as u8)),
        _ => None,
    }
}

/// Why `ip` is refused by default (the range it is in), or `None` for a
/// public address.
pub fn refused_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4);
            REFUSED_V4.iter().find(|(first, len, _)| prefix_v4(bits, u32::from_be_bytes(*first), *len)).map(|r| r.2)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = embedded_v4(v6) {
                return refused_range(IpAddr::V4(v4));
            }
            let bits = u128::from(v6);
            REFUSED_V6
                .iter()
                .find(|(first, len, _)| prefix_v6(bits, u128::from(Ipv6Addr::from(*first)), *len))
                .map(|r| r.2)
        }
    }
}

fn prefix_v4(bits: u32, first: u32, len: u8) -> bool {
    debug_assert!(len <= 32);
    len == 0 || (bits ^ first) >> (32 - u32::from(len)) == 0
}

fn prefix_v6(bits: u128, first: u128, len: u8) -> bool {
    debug_assert!(len <= 128);
    len == 0 || (bits ^ first) >> (128 - u32::from(len)) == 0
}

/// An address range the operator allows: `first/len`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Net {
    first: IpAddr,
    len: u8,
}

impl Net {
    fn contains(&self, ip: IpAddr) -> bool {
        match (self.first, canonical(ip)) {
            (IpAddr::V4(first), IpAddr::V4(ip)) => prefix_v4(u32::from(ip), u32::from(first), self.len),
            (IpAddr::V6(first), IpAddr::V6(ip)) => prefix_v6(u128::from(ip), u128::from(first), self.len),
            _ => false,
        }
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is (so an allowed
/// `127.0.0.1/32` also allows `::ffff:127.0.0.1`); any other as itself.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The operator's allow list: address ranges (any port), addresses on a
/// port, and names on a port. A name listed is reached on the ports listed
/// with it only, at whatever address it resolves to: the operator vouches
/// for the name, and its other ports are not asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allow {
    nets: Vec<Net>,
    sockets: Vec<(IpAddr, u16)>,
    names: Vec<(String, u16)>,
}

impl Allow {
    /// Reads entries such as `10.1.0.0/16`, `127.0.0.1`, `127.0.0.1:4101`,
    /// `[::1]:8080`, `agents.internal:8443`; an error names the entry.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Allow, String> {
        let mut allow = Allow::default();
        for entry in entries.iter().map(|e| e.as_ref().trim()).filter(|e| !e.is_empty()) {
            allow.add(entry).map_err(|why| format!("egress allow entry {entry:?}: {why}"))?;
        }
        Ok(allow)
    }

    fn add(&mut self, entry: &str) -> Result<(), &'static str> {
        if let Some((address, len)) = entry.split_once('/') {
            let first: IpAddr = address.parse().map_err(|_| "a range is ADDRESS/LENGTH")?;
            let len: u8 = len.parse().map_err(|_| "a range's length is a number")?;
            let first = canonical(first);
            if len > if first.is_ipv4() { 32 } else { 128 } {
                return Err("a range's length is too long for its address");
            }
            self.nets.push(Net { first, len });
            return Ok(());
        }
        if let Ok(ip) = entry.parse::<IpAddr>() {
            let ip = canonical(ip);
            self.nets.push(Net { first: ip, len: if ip.is_ipv4() { 32 } else { 128 } });
            return Ok(());
        }
        if let Ok(socket) = entry.parse::<std::net::SocketAddr>() {
            self.sockets.push((canonical(socket.ip()), socket.port()));
            return Ok(());
        }
        let (name, port) = entry.rsplit_once(':').ok_or("expected a range, an address, or HOST:PORT")?;
        let port: u16 = port.parse().map_err(|_| "the port is not a number")?;
        let name = normal_name(name);
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.') {
            return Err("the host is not a name");
        }
        self.names.push((name, port));
        Ok(())
    }

    /// Adds `address` on its port (the demo agents the api serves itself).
    pub fn allow_socket(&mut self, address: std::net::SocketAddr) {
        self.sockets.push((canonical(address.ip()), address.port()));
    }

    /// Whether the operator allows `ip` (on `port`, when known).
    fn admits(&self, ip: IpAddr, port: Option<u16>) -> bool {
        let ip = canonical(ip);
        self.nets.iter().any(|net| net.contains(ip)) || port.is_some_and(|p| self.sockets.contains(&(ip, p)))
    }

    fn lists_name(&self, name: &str) -> bool {
        self.names.iter().any(|(n, _)| n == name)
    }
}

/// A name as compared: lower case, without the root's trailing dot.
fn normal_name(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Whether `name` is special-use ([`shared::special_use`]): `localhost`,
/// which stands for this machine whatever a DNS server says, and the names
/// that exist nowhere (`.example`, `.test`, `.invalid`, ...). Refused
/// without a lookup, so no question about them leaves the machine.
fn is_reserved_name(name: &str) -> bool {
    shared::special_use::reserved(name).is_some()
}

/// Whether `url`'s host is a special-use name of no network
/// ([`shared::special_use::Reserved::Nowhere`]).
fn nowhere(url: &url::Url) -> bool {
    url.domain().and_then(shared::special_use::nowhere).is_some()
}

/// The destination refused. Its text says nothing about the inside (no
/// address a name resolved to, nothing of what listens there).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the broker does not call this destination")]
pub struct NotAllowed;

/// What a URL's host needs before a connection is made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// An address, judged: connect to it.
    Address,
    /// A name the operator listed with this port: any address it resolves to.
    ListedName,
    /// A name: each address it resolves to is judged ([`Policy::admits_resolved`]).
    Name,
}

/// The judgment every outbound call on a client's behalf passes.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    pub allow: Allow,
}

impl Policy {
    /// Judges a URL: http or https, a host, and that host allowed on the
    /// URL's port (a name's addresses are judged when it is resolved).
    pub fn judge(&self, url: &url::Url) -> Result<Verdict, NotAllowed> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(NotAllowed);
        }
        let port = url.port_or_known_default().ok_or(NotAllowed)?;
        match url.host().ok_or(NotAllowed)? {
            url::Host::Ipv4(ip) => self.judge_address(IpAddr::V4(ip), port).map(|_| Verdict::Address),
            url::Host::Ipv6(ip) => self.judge_address(IpAddr::V6(ip), port).map(|_| Verdict::Address),
            url::Host::Domain(name) => {
                let name = normal_name(name);
                if self.allow.names.contains(&(name.clone(), port)) {
                    return Ok(Verdict::ListedName);
                }
                // A listed name is reached on its listed ports only: the
                // resolver, which never learns the port, lets its
                // addresses through. A special-use name is never looked up.
                if self.allow.lists_name(&name) || is_reserved_name(&name) {
                    return Err(NotAllowed);
                }
                Ok(Verdict::Name)
            }
        }
    }

    /// Judges an endpoint being registered, by its text: as [`Policy::judge`],
    /// but a name that exists nowhere (`agent.example`, `x.test`) is kept.
    /// It harms nobody: every call to it is refused unresolved, and its
    /// agent is shown offline for that reason.
    pub fn judge_registered(&self, url: &url::Url) -> Result<(), NotAllowed> {
        match self.judge(url) {
            Err(NotAllowed) if matches!(url.scheme(), "http" | "https") && nowhere(url) => Ok(()),
            verdict => verdict.map(drop),
        }
    }

    /// Judges an address on a port: public, or allowed by the operator.
    pub fn judge_address(&self, ip: IpAddr, port: u16) -> Result<(), NotAllowed> {
        match refused_range(ip) {
            Some(_) if !self.allow.admits(ip, Some(port)) => Err(NotAllowed),
            _ => Ok(()),
        }
    }

    /// Whether an address `name` resolved to may be connected to. The port
    /// is not known here; [`Policy::judge`] has already refused a listed
    /// name on a port not listed with it.
    pub fn admits_resolved(&self, name: &str, ip: IpAddr) -> bool {
        let name = normal_name(name);
        if self.allow.lists_name(&name) {
            return true;
        }
        !is_reserved_name(&name) && (refused_range(ip).is_none() || self.allow.admits(ip, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str]) -> Policy {
        Policy { allow: Allow::parse(allow).unwrap() }
    }

    /// Each case: a URL as a client could write it, and whether the gate
    /// lets it through by default. No case connects anywhere.
    #[test]
    fn every_spelling_of_an_inside_address_is_refused() {
        let cases: &[(&str, bool)] = &[
            // Loopback, in each spelling the URL parser accepts.
            ("http://127.0.0.1:4000/admin", false),
            ("http://127.1/", false),
            ("http://127.0.1/", false),
            ("http://0x7f000001/", false),
            ("http://0x7f.0x0.0x0.0x1/", false),
            ("http://2130706433/", false),
            ("http://017700000001/", false),
            ("http://0177.0.0.1/", false),
            ("http://127.0.0.1./", false),
            ("http://%31%32%37.0.0.1/", false),
            ("http://\u{ff11}\u{ff12}\u{ff17}.0.0.1/", false),
            ("http://127.255.255.254/", false),
            ("http://[::1]/", false),
            ("http://[0:0:0:0:0:0:0:1]/", false),
            ("http://[::ffff:127.0.0.1]/", false),
            ("http://[::ffff:7f00:1]/", false),
            ("http://[::127.0.0.1]/", false),
            ("http://[64:ff9b::127.0.0.1]/", false),
            ("http://[2002:7f00:1::]/", false),
            ("http://localhost/", false),
            ("http://LOCALHOST./", false),
            ("http://api.localhost:4000/", false),
            // Unspecified.
            ("http://0.0.0.0/", false),
            ("http://0/", false),
            ("http://[::]/", false),
            // Private, carrier-grade NAT, link-local (cloud metadata).
            ("http://10.0.0.1/", false),
            ("http://10.255.255.255/", false),
            ("http://172.16.0.1/", false),
            ("http://172.31.255.255/", false),
            ("http://192.168.1.1/", false),
            ("http://0xc0a80101/", false),
            ("http://3232235777/", false),
            ("http://100.64.0.1/", false),
            ("http://100.127.255.254/", false),
            ("http://169.254.169.254/latest/meta-data/", false),
            ("http://[::ffff:169.254.169.254]/", false),
            ("http://[::ffff:10.0.0.1]/", false),
            ("http://[fe80::1]/", false),
            ("http://[fd00:ec2::254]/", false),
            ("http://[fc00::1]/", false),
            ("http://[fec0::1]/", false),
            // Multicast, broadcast, reserved.
            ("http://224.0.0.1/", false),
            ("http://239.255.255.250/", false),
            ("http://255.255.255.255/", false),
            ("http://240.0.0.1/", false),
            ("http://[ff02::1]/", false),
            // Documentation and benchmarking.
            ("http://192.0.2.10/", false),
            ("http://198.51.100.7/", false),
            ("http://203.0.113.9/", false),
            ("http://198.18.0.1/", false),
            ("http://198.19.255.255/", false),
            ("http://[2001:db8::1]/", false),
            ("http://[2001:2::1]/", false),
            ("http://[3fff::1]/", false),
            ("http://[2001::1]/", false),
            ("http://192.0.0.8/", false),
            ("http://[100::1]/", false),
            // Not http.
            ("file:///etc/passwd", false),
            ("ftp://93.184.215.14/", false),
            ("gopher://93.184.215.14:70/", false),
            // Public addresses and names (a name is judged again once resolved).
            ("http://93.184.215.14/", true),
            ("https://8.8.8.8/", true),
            ("http://[2606:4700:4700::1111]/", true),
            ("http://[::ffff:8.8.8.8]/", true),
            ("http://[2002:808:808::]/", true),
            ("http://172.32.0.1/", true),
            ("http://100.128.0.1/", true),
            ("http://192.169.0.1/", true),
            ("https://agents.hol.org/a2a", true),
            // Special-use names: refused unresolved (no question leaves
            // the machine).
            ("https://agents.example.com/a2a", false),
            ("http://agent.example/a2a", false),
            ("http://AGENT.EXAMPLE./", false),
            ("https://x.test/", false),
            ("https://nothing.invalid/", false),
            ("http://printer.local/", false),
            ("http://abc.onion/", false),
            ("http://example.org/", false),
            ("http://user:pw@93.184.215.14/", true),
            ("http://93.184.215.14@127.0.0.1/", false),
        ];
        let gate = policy(&[]);
        for (text, allowed) in cases {
            let verdict = url::Url::parse(text).map_err(|_| NotAllowed).and_then(|url| gate.judge(&url));
            assert_eq!(verdict.is_ok(), *allowed, "{text}: {verdict:?}");
        }
    }

    /// Each case: the allow list, a URL, and whether it passes.
    #[test]
    fn the_operator_allows_ranges_addresses_on_a_port_and_names_on_a_port() {
        let cases: &[(&[&str], &str, bool)] = &[
            (&["127.0.0.1:4101"], "http://127.0.0.1:4101/", true),
            (&["127.0.0.1:4101"], "http://127.1:4101/", true),
            (&["127.0.0.1:4101"], "http://[::ffff:127.0.0.1]:4101/", true),
            (&["127.0.0.1:4101"], "http://127.0.0.1:4102/", false),
            (&["127.0.0.1:4101"], "http://127.0.0.2:4101/", false),
            (&["10.1.0.0/16"], "http://10.1.200.3:9000/", true),
            (&["10.1.0.0/16"], "http://10.2.0.1/", false),
            (&["10.1.2.3"], "http://10.1.2.3:1/", true),
            (&["[::1]:8080"], "http://[::1]:8080/", true),
            (&["[::1]:8080"], "http://[::1]:8081/", false),
            (&["fd00::/8"], "http://[fd12::1]/", true),
            (&["agents.internal:8443"], "https://agents.internal:8443/a2a", true),
            (&["agents.internal:8443"], "https://AGENTS.internal.:8443/", true),
            (&["agents.internal:8443"], "https://agents.internal/", false),
            (&["agents.internal:8443"], "http://agents.internal:22/", false),
            (&["localhost:4101"], "http://localhost:4101/", true),
            (&["localhost:4101"], "http://localhost:4102/", false),
            // The operator may vouch for a special-use name on a port.
            (&["echo.test:4101"], "http://echo.test:4101/", true),
            (&["echo.test:4101"], "http://echo.test:4102/", false),
        ];
        for (allow, text, allowed) in cases {
            let verdict = policy(allow).judge(&url::Url::parse(text).unwrap());
            assert_eq!(verdict.is_ok(), *allowed, "{allow:?} {text}: {verdict:?}");
        }
        assert_eq!(
            policy(&["agents.internal:8443"]).judge(&url::Url::parse("https://agents.internal:8443/").unwrap()),
            Ok(Verdict::ListedName)
        );
    }

    /// Each case: the allow list, a name, an address it resolved to, and
    /// whether the connection may be made.
    #[test]
    fn a_name_is_judged_by_every_address_it_resolves_to() {
        let cases: &[(&[&str], &str, &str, bool)] = &[
            (&[], "agents.hol.org", "93.184.215.14", true),
            (&[], "agents.hol.org", "127.0.0.1", false),
            (&[], "agents.hol.org", "::ffff:127.0.0.1", false),
            (&[], "agents.hol.org", "169.254.169.254", false),
            (&[], "agents.hol.org", "fd00::1", false),
            (&[], "agents.hol.org", "2606:4700::1", true),
            (&[], "localhost", "93.184.215.14", false),
            (&[], "agents.example.com", "93.184.215.14", false),
            (&["10.0.0.0/8"], "agents.hol.org", "10.9.9.9", true),
            // An address on a port does not admit a name: the resolver never learns the port.
            (&["127.0.0.1:4101"], "agents.hol.org", "127.0.0.1", false),
            (&["agents.internal:8443"], "agents.internal", "10.0.0.5", true),
        ];
        for (allow, name, ip, admitted) in cases {
            assert_eq!(policy(allow).admits_resolved(name, ip.parse().unwrap()), *admitted, "{allow:?} {name} {ip}");
        }
    }

    /// Each case: an endpoint being registered, and whether it is kept.
    #[test]
    fn a_registered_endpoint_may_name_nowhere_but_not_this_machine() {
        for (text, kept) in [
            ("https://agent.example/a2a", true),
            ("https://agents.example.com/a2a", true),
            ("https://x.test/", true),
            ("https://agents.hol.org/a2a", true),
            ("http://localhost/", false),
            ("http://api.localhost:4000/", false),
            ("http://127.0.0.1/", false),
            ("ftp://agent.example/", false),
        ] {
            let verdict = policy(&[]).judge_registered(&url::Url::parse(text).unwrap());
            assert_eq!(verdict.is_ok(), kept, "{text}: {verdict:?}");
        }
    }

    #[test]
    fn a_bad_allow_entry_is_named() {
        for entry in ["10.0.0.0/33", "300.1.1.1/8", "host", "host:port", "bad_name:80", "/8"] {
            let error = Allow::parse(&[entry]).unwrap_err();
            assert!(error.contains(entry), "{error}");
        }
    }
}
