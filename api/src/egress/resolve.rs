//! Names to addresses for the gate's client: the system's resolver
//! (`getaddrinfo`, with `/etc/hosts`), or a DNS server the operator names
//! (`--egress-dns`; the tests' server on loopback). The connector is given
//! only the addresses the policy admits, so it connects to an address that
//! was judged; a name with none left is refused as [`NotAllowed`].

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use reqwest::dns::{Name, Resolve, Resolving};

use super::address::{NotAllowed, Policy};

/// Where names are looked up.
enum Names {
    System,
    Server(Box<hickory_resolver::TokioResolver>),
}

/// The gate's resolver.
pub struct Resolver {
    policy: Arc<Policy>,
    names: Arc<Names>,
}

impl Resolver {
    pub fn new(policy: Arc<Policy>, dns: Option<SocketAddr>) -> anyhow::Result<Resolver> {
        let names = match dns {
            None => Names::System,
            Some(server) => {
                let resolver = hickory_resolver::Resolver::builder_with_config(
                    name_servers(&[server]),
                    TokioRuntimeProvider::default(),
                );
                Names::Server(Box::new(resolver.build()?))
            }
        };
        Ok(Resolver { policy, names: Arc::new(names) })
    }
}

/// A resolver's configuration asking `servers` (UDP, then TCP, each on
/// its port) and no search domains.
pub fn name_servers(servers: &[SocketAddr]) -> ResolverConfig {
    let servers = servers
        .iter()
        .map(|server| {
            let connections = [ConnectionConfig::udp(), ConnectionConfig::tcp()]
                .into_iter()
                .map(|mut c| {
                    c.port = server.port();
                    c
                })
                .collect();
            NameServerConfig::new(server.ip(), true, connections)
        })
        .collect();
    ResolverConfig::from_parts(None, vec![], servers)
}

impl Names {
    async fn lookup(&self, name: &str) -> Result<Vec<IpAddr>, Box<dyn std::error::Error + Send + Sync>> {
        Ok(match self {
            Names::System => tokio::net::lookup_host((name, 0)).await?.map(|a| a.ip()).collect(),
            Names::Server(resolver) => resolver.lookup_ip(name).await?.iter().collect(),
        })
    }
}

impl Resolve for Resolver {
    fn resolve(&self, name: Name) -> Resolving {
        let (policy, names) = (self.policy.clone(), self.names.clone());
        Box::pin(async move {
            let name = name.as_str();
            let found = names.lookup(name).await?;
            let admitted: Vec<SocketAddr> = found
                .iter()
                .filter(|ip| policy.admits_resolved(name, **ip))
                .map(|ip| SocketAddr::new(*ip, 0))
                .collect();
            if admitted.is_empty() && !found.is_empty() {
                tracing::info!(name, "egress: every address of the name is refused");
                return Err(Box::new(NotAllowed) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(admitted.into_iter()) as Box<dyn Iterator<Item = SocketAddr> + Send>)
        })
    }
}
