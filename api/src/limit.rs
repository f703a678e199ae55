//! Application-level rate limits (section B): one GCRA bucket per client,
//! separate quotas for the guard JSON routes and the MCP endpoint.
//!
//! - A client is its IP address, with IPv6 grouped by /64 (one host
//!   usually owns a whole /64). `X-Forwarded-For` is read only when the peer
//!   is a configured proxy; the client is then the nearest address in it
//!   that is not a proxy.
//! - Memory is bounded: a periodic [`Limiter::clean`] drops buckets that are
//!   back to full, and once `max_clients` buckets are tracked, further
//!   clients share one overflow bucket until the next cleanup.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use warp::http::HeaderMap;

/// Requests per minute and the burst allowed above that pace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    pub per_minute: u32,
    pub burst: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Key {
    Client(IpAddr),
    /// Every client beyond `max_clients`, until the next cleanup.
    Overflow,
}

pub struct Limiter {
    buckets: DefaultKeyedRateLimiter<Key>,
    max_clients: usize,
}

impl Limiter {
    pub fn new(rate: Rate, max_clients: usize) -> Limiter {
        let per_minute = NonZeroU32::new(rate.per_minute.max(1)).expect("non-zero");
        let burst = NonZeroU32::new(rate.burst.max(1)).expect("non-zero");
        Limiter {
            buckets: DefaultKeyedRateLimiter::keyed(Quota::per_minute(per_minute).allow_burst(burst)),
            max_clients,
        }
    }

    /// `Ok` to go ahead, or how long the client must wait.
    pub fn check(&self, client: IpAddr) -> Result<(), Duration> {
        let key = if self.buckets.len() >= self.max_clients { Key::Overflow } else { Key::Client(client) };
        self.buckets.check_key(&key).map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }

    /// Drops the buckets of clients back at full allowance.
    pub fn clean(&self) {
        self.buckets.retain_recent();
        self.buckets.shrink_to_fit();
    }

    /// Buckets tracked now.
    pub fn tracked(&self) -> usize {
        self.buckets.len()
    }
}

/// The client a request counts against.
pub fn client(peer: SocketAddr, headers: &HeaderMap, proxies: &[IpAddr]) -> IpAddr {
    let peer = peer.ip();
    let mut client = peer;
    if proxies.contains(&peer) {
        // Right to left: the nearest hop that is not one of our proxies.
        let hops = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .collect::<Vec<_>>();
        for hop in hops.iter().rev() {
            match hop.parse::<IpAddr>() {
                Ok(ip) if proxies.contains(&ip) => continue,
                Ok(ip) => {
                    client = ip;
                    break;
                }
                Err(_) => break,
            }
        }
    }
    group(client)
}

/// IPv6 addresses by /64; IPv4 (and IPv4-mapped IPv6) by address.
fn group(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
        v4 => v4,
    }
}

/// `Retry-After` in whole seconds, rounded up (a client retrying sooner
/// would be refused again).
/// 429 with `Retry-After` when the client is over its quota.
pub fn rate_limited(wait: Duration) -> crate::reply::Error {
    let seconds = retry_after(wait);
    let message = format!("too many requests; retry in {seconds} s");
    crate::reply::Error::new(warp::http::StatusCode::TOO_MANY_REQUESTS, "rate_limited", message)
        .with(warp::http::header::RETRY_AFTER, seconds.into())
}

pub fn retry_after(wait: Duration) -> u64 {
    wait.as_nanos().div_ceil(1_000_000_000).max(1) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_grouped_and_proxies_trusted_only_when_configured() {
        let proxy: IpAddr = "10.0.0.1".parse().unwrap();
        let check = |peer: &str, xff: Option<&str>, proxies: &[IpAddr], expected: &str| {
            let mut headers = HeaderMap::new();
            if let Some(xff) = xff {
                headers.insert("x-forwarded-for", xff.parse().unwrap());
            }
            let peer: SocketAddr = peer.parse().unwrap();
            assert_eq!(client(peer, &headers, proxies), expected.parse::<IpAddr>().unwrap(), "{peer} {xff:?}");
        };
        check("192.0.2.7:5000", None, &[], "192.0.2.7");
        check("[2001:db8:1:2:3:4:5:6]:5000", None, &[], "2001:db8:1:2::");
        check("[::ffff:192.0.2.7]:5000", None, &[], "192.0.2.7");
        // Not from a proxy: the header is the client's own claim.
        check("192.0.2.7:5000", Some("203.0.113.9"), &[proxy], "192.0.2.7");
        check("10.0.0.1:5000", Some("203.0.113.9"), &[proxy], "203.0.113.9");
        check("10.0.0.1:5000", Some("198.51.100.1, 203.0.113.9, 10.0.0.1"), &[proxy], "203.0.113.9");
        check("10.0.0.1:5000", Some("2001:db8::1"), &[proxy], "2001:db8::");
        check("10.0.0.1:5000", Some("garbage"), &[proxy], "10.0.0.1");
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after(Duration::from_millis(1)), 1);
        assert_eq!(retry_after(Duration::from_millis(1000)), 1);
        assert_eq!(retry_after(Duration::from_millis(1001)), 2);
    }

    #[test]
    fn quota_then_refusal_and_bounded_memory() {
        let limiter = Limiter::new(Rate { per_minute: 60, burst: 3 }, 100);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        for _ in 0..3 {
            assert!(limiter.check(a).is_ok());
        }
        let wait = limiter.check(a).unwrap_err();
        assert!(wait > Duration::ZERO && wait <= Duration::from_secs(1), "{wait:?}");
        for i in 0..10_000u32 {
            let _ = limiter.check(IpAddr::from(i.to_be_bytes()));
        }
        assert!(limiter.tracked() <= 101, "{} buckets tracked", limiter.tracked());
    }
}
