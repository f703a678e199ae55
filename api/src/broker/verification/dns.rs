//! DNS TXT proofs: the TXT records at `_agent.<nativeId>`, the name the
//! HCS-14 AID resolution profile (`hcs-14.profile.aid-dns-web`) gives an
//! agent whose `nativeId` is a domain, read through a DNS resolver against
//! the nameservers the operator names (`--verification-dns`) or the
//! system's (`/etc/resolv.conf`).
//!
//! A record proves ownership when one of its `;`-separated fields is
//! `verification=<code>` (beside the AID profile's own `v=`, `uri=`,
//! `proto=` fields) or when its whole text is the code. Nothing is
//! cached: every check asks the nameservers, so a record added after a
//! failed attempt counts at the next one, and a record removed is seen
//! gone at the next re-check.

use std::net::SocketAddr;
use std::time::Duration;

use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::RData;
use hickory_resolver::TokioResolver;

use crate::store::verification::Found;

/// The field of a TXT record that carries a challenge's code.
pub const FIELD: &str = "verification";

/// The TXT name of an agent whose `nativeId` is `domain`.
pub fn record_name(domain: &str) -> String {
    format!("_agent.{}", domain.trim_end_matches('.'))
}

/// Whether `native_id` is a domain name (an FQDN: two labels or more of
/// letters, digits and hyphens), which the AID profile applies to.
pub fn is_domain(native_id: &str) -> bool {
    let name = native_id.trim_end_matches('.');
    let labels: Vec<&str> = name.split('.').collect();
    name.len() <= 253
        && labels.len() >= 2
        && labels.iter().all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
        && !labels.last().is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether one TXT record's text proves `code`.
pub fn proves(text: &str, code: &str) -> bool {
    text.trim() == code
        || text
            .split(';')
            .any(|field| field.split_once('=').is_some_and(|(key, value)| key.trim() == FIELD && value.trim() == code))
}

/// The resolver verification reads TXT records with.
pub struct Txt {
    resolver: TokioResolver,
}

impl Txt {
    /// Against `servers` (none: the system's), each query given `timeout`.
    pub fn new(servers: &[SocketAddr], timeout: Duration) -> anyhow::Result<Txt> {
        let mut builder = match servers {
            [] => TokioResolver::builder_tokio()?,
            servers => TokioResolver::builder_with_config(
                crate::egress::resolve::name_servers(servers),
                TokioRuntimeProvider::default(),
            ),
        };
        let options = builder.options_mut();
        options.cache_size = 0;
        options.timeout = timeout;
        options.attempts = 1;
        Ok(Txt { resolver: builder.build()? })
    }

    /// What the TXT records at `name` say of `code`.
    pub async fn check(&self, name: &str, code: &str) -> Found {
        // Fully qualified: no search domains are tried.
        let query = format!("{}.", name.trim_end_matches('.'));
        match self.resolver.txt_lookup(query).await {
            Ok(lookup) => {
                let texts: Vec<String> = lookup
                    .answers()
                    .iter()
                    .filter_map(|record| match &record.data {
                        // A record's strings are one text, in order (RFC 7208 section 3.3).
                        RData::TXT(txt) => Some(txt.txt_data.iter().map(|s| String::from_utf8_lossy(s)).collect()),
                        _ => None,
                    })
                    .collect();
                match texts.iter().any(|text| proves(text, code)) {
                    true => Found::Present,
                    false if texts.is_empty() => Found::Gone(format!("no TXT record at {name}")),
                    false => Found::Gone(format!("the TXT records at {name} do not hold this challenge's code")),
                }
            }
            Err(e) if e.is_no_records_found() || e.is_nx_domain() => Found::Gone(format!("no TXT record at {name}")),
            Err(e) => {
                tracing::info!(name, error = %e, "verification: a TXT lookup failed");
                Found::Unknown(format!("the nameservers did not answer for {name}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_records_prove_a_code() {
        let code = "almanac-7f3a";
        let cases = [
            ("almanac-7f3a", true),
            ("  almanac-7f3a ", true),
            ("v=aid1;uri=https://a.example/a2a;proto=a2a;verification=almanac-7f3a", true),
            ("v=aid1; verification = almanac-7f3a ;proto=a2a", true),
            ("v=aid1;uri=https://a.example/a2a;proto=a2a", false),
            ("verification=almanac-7f3b", false),
            ("verification=almanac-7f3a0", false),
            ("xverification=almanac-7f3a", false),
            ("almanac-7f3a extra", false),
            ("", false),
        ];
        for (text, proven) in cases {
            assert_eq!(proves(text, code), proven, "{text:?}");
        }
    }

    #[test]
    fn which_native_ids_are_domains() {
        let cases = [
            ("agent.example.com", true),
            ("support-agent.example.com.", true),
            ("example", false),
            ("hedera:testnet:0.0.123", false),
            ("eip155:1:0xabc", false),
            ("10.0.0.1", false),
            ("-bad.example", false),
            ("a..example", false),
            ("name with space.example", false),
        ];
        for (native, domain) in cases {
            assert_eq!(is_domain(native), domain, "{native:?}");
        }
        assert_eq!(record_name("agent.example.com."), "_agent.agent.example.com");
    }
}
