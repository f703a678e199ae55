//! Domain names reserved for special use, which no DNS server on the
//! internet answers for: the names of RFC 6761 and RFC 2606 and the
//! others of IANA's Special-Use Domain Names registry that are never
//! resolved through DNS. The broker's egress gate refuses them without a
//! lookup (a question about `agent.example` would go off the machine for
//! a name that can never exist), and the pages say why an agent at one is
//! offline.

/// What a reserved name is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reserved {
    /// `localhost` and its subdomains: this machine (RFC 6761 section
    /// 6.3), an inside destination like a loopback address.
    ThisMachine,
    /// Names that exist on no network the broker reaches: documentation,
    /// testing, never-valid, multicast DNS, Tor, home networks.
    Nowhere(&'static str),
}

/// Each reserved domain (with all its subdomains) and what it is for.
const RESERVED: &[(&str, Reserved)] = &[
    ("localhost", Reserved::ThisMachine),
    ("example", Reserved::Nowhere("reserved for documentation by RFC 6761")),
    ("example.com", Reserved::Nowhere("reserved for documentation by RFC 2606")),
    ("example.net", Reserved::Nowhere("reserved for documentation by RFC 2606")),
    ("example.org", Reserved::Nowhere("reserved for documentation by RFC 2606")),
    ("test", Reserved::Nowhere("reserved for testing by RFC 6761")),
    ("invalid", Reserved::Nowhere("reserved as never valid by RFC 6761")),
    ("local", Reserved::Nowhere("reserved for multicast DNS on a local link by RFC 6762")),
    ("onion", Reserved::Nowhere("reserved for Tor onion services by RFC 7686")),
    ("home.arpa", Reserved::Nowhere("reserved for home networks by RFC 8375")),
];

/// What `host` is reserved for, if it is a special-use name or under one.
/// Compared as DNS compares names: in any case, with or without the
/// root's trailing dot. O(number of reserved domains).
pub fn reserved(host: &str) -> Option<Reserved> {
    let host = host.strip_suffix('.').unwrap_or(host);
    RESERVED.iter().find_map(|(domain, what)| {
        let under = host.len() > domain.len()
            && host.as_bytes()[host.len() - domain.len() - 1] == b'.'
            && host[host.len() - domain.len()..].eq_ignore_ascii_case(domain);
        (under || host.eq_ignore_ascii_case(domain)).then_some(*what)
    })
}

/// What `host` is reserved for when it is a name of no network
/// ([`Reserved::Nowhere`]), in words; `None` for any other host.
pub fn nowhere(host: &str) -> Option<&'static str> {
    match reserved(host)? {
        Reserved::Nowhere(what) => Some(what),
        Reserved::ThisMachine => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each case: a host, and what it is reserved for (`None`: an
    /// ordinary name).
    #[test]
    fn reserved_names_and_only_they_are_known() {
        let of_no_network = |n: &str| nowhere(n).is_some();
        let cases: &[(&str, Option<bool>)] = &[
            ("localhost", Some(false)),
            ("LocalHost.", Some(false)),
            ("api.localhost", Some(false)),
            ("example", Some(true)),
            ("support-agent.example", Some(true)),
            ("a.b.EXAMPLE.", Some(true)),
            ("example.com", Some(true)),
            ("agents.example.com", Some(true)),
            ("www.example.net", Some(true)),
            ("example.org", Some(true)),
            ("x.test", Some(true)),
            ("nothing.invalid", Some(true)),
            ("printer.local", Some(true)),
            ("abc.onion", Some(true)),
            ("router.home.arpa", Some(true)),
            // Ordinary names, some near a reserved one.
            ("examples.com", None),
            ("myexample.com", None),
            ("example.co", None),
            ("example.com.au", None),
            ("notlocalhost", None),
            ("localhost.dev", None),
            ("test.dev", None),
            ("contest", None),
            ("arpa", None),
            ("hol.org", None),
            ("", None),
        ];
        for (host, expected) in cases {
            let found = reserved(host).map(|_| of_no_network(host));
            assert_eq!(found, *expected, "{host}");
        }
    }
}
