//! One request as a handler sees it: everything the pipeline has read and
//! decided before the handler runs.

use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use warp::http::{HeaderMap, Method};

use crate::app::App;
use crate::published::Build;
use crate::reply::Error;

pub struct Request {
    pub app: Arc<App>,
    pub method: Method,
    /// The path in normal form, as matched (a trailing `/` dropped).
    pub path: String,
    /// The pattern's parameters, percent-decoded.
    pub params: Params,
    /// The raw query string, without `?`.
    pub query: String,
    pub headers: HeaderMap,
    /// The body, read up to the operation's bound (empty when the
    /// operation reads none).
    pub body: Bytes,
    /// Who is asking: the peer, or the address a trusted proxy forwarded.
    pub client: IpAddr,
    /// The build published when the request arrived; a swap meanwhile
    /// does not change what this request sees.
    pub build: Option<Arc<Build>>,
}

impl Request {
    /// The published build, or 503 while there is none.
    pub fn build(&self) -> Result<&Build, Error> {
        self.build.as_deref().ok_or_else(Error::unavailable)
    }

    /// The query parameter `name`, decoded (`+` is a space); 400 when it
    /// is given more than once.
    pub fn query_value(&self, name: &'static str) -> Result<Option<String>, Error> {
        let mut values = form_urlencoded::parse(self.query.as_bytes()).filter(|(k, _)| k == name);
        match (values.next(), values.next()) {
            (_, Some(_)) => Err(almanac::http::BadParameter::repeated(name).into()),
            (value, None) => Ok(value.map(|(_, v)| v.into_owned())),
        }
    }
}

/// Path parameters, each percent-decoded once.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Params(Vec<(String, String)>);

impl Params {
    pub fn new(decoded: Vec<(String, String)>) -> Params {
        Params(decoded)
    }

    /// The parameter `name`; the table guarantees that its pattern has it.
    pub fn get(&self, name: &str) -> &str {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).unwrap_or_default()
    }
}
