//! A DNS server on 127.0.0.1 (UDP) for the api's resolver in tests
//! (`--egress-dns`): it answers `A` queries for the names it was given,
//! `NOERROR` with no answer for their other types, `NXDOMAIN` for any
//! other name, and `FORMERR` for what is not one query (RFC 1035 section
//! 4.1), as a real server does. It counts the queries it answered.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

pub struct DnsServer {
    pub addr: SocketAddr,
    /// Queries answered, whatever the answer.
    pub queries: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl DnsServer {
    /// Serves `names` (lower case, without the trailing dot) to their addresses.
    pub async fn start(names: &[(&str, Ipv4Addr)]) -> DnsServer {
        let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let names: HashMap<String, Ipv4Addr> = names.iter().map(|(n, ip)| (n.to_string(), *ip)).collect();
        let queries = Arc::new(AtomicUsize::new(0));
        let counted = queries.clone();
        let task = tokio::spawn(async move {
            let mut buffer = [0u8; 1500];
            while let Ok((n, from)) = socket.recv_from(&mut buffer).await {
                if let Some(answer) = answer(&buffer[..n], &names) {
                    counted.fetch_add(1, Ordering::SeqCst);
                    let _ = socket.send_to(&answer, from).await;
                }
            }
        });
        DnsServer { addr, queries, task }
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

const TYPE_A: u16 = 1;
const CLASS_IN: u16 = 1;

/// The answer to one message (none to what is not a query at all).
fn answer(query: &[u8], names: &HashMap<String, Ipv4Addr>) -> Option<Vec<u8>> {
    let header = query.get(..12)?;
    let flags = u16::from_be_bytes([header[2], header[3]]);
    if flags & 0x8000 != 0 {
        return None;
    }
    let reply = |rcode: u16, question: &[u8], answers: &[Ipv4Addr]| {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&header[..2]);
        // QR, the query's opcode and RD, RA, the code.
        out.extend_from_slice(&(0x8000 | (flags & 0x7900) | 0x0080 | rcode).to_be_bytes());
        out.extend_from_slice(&(u16::from(!question.is_empty())).to_be_bytes());
        out.extend_from_slice(&(answers.len() as u16).to_be_bytes());
        out.extend_from_slice(&[0, 0, 0, 0]);
        out.extend_from_slice(question);
        for ip in answers {
            // The question's name by a pointer to offset 12.
            out.extend_from_slice(&[0xc0, 12]);
            out.extend_from_slice(&TYPE_A.to_be_bytes());
            out.extend_from_slice(&CLASS_IN.to_be_bytes());
            out.extend_from_slice(&60u32.to_be_bytes());
            out.extend_from_slice(&4u16.to_be_bytes());
            out.extend_from_slice(&ip.octets());
        }
        out
    };
    let formerr = || Some(reply(1, &[], &[]));
    if u16::from_be_bytes([header[4], header[5]]) != 1 || (flags >> 11) & 0xf != 0 {
        return formerr();
    }
    // The question: labels, then type and class.
    let (mut at, mut labels) = (12, Vec::new());
    loop {
        let Some(&len) = query.get(at) else { return formerr() };
        at += 1;
        if len == 0 {
            break;
        }
        if len & 0xc0 != 0 {
            return formerr();
        }
        let Some(label) = query.get(at..at + len as usize) else { return formerr() };
        labels.push(String::from_utf8_lossy(label).to_ascii_lowercase());
        at += len as usize;
    }
    let Some(tail) = query.get(at..at + 4) else { return formerr() };
    let (kind, class) = (u16::from_be_bytes([tail[0], tail[1]]), u16::from_be_bytes([tail[2], tail[3]]));
    let question = &query[12..at + 4];
    match names.get(&labels.join(".")) {
        None => Some(reply(3, question, &[])),
        Some(ip) if kind == TYPE_A && class == CLASS_IN => Some(reply(0, question, &[*ip])),
        Some(_) => Some(reply(0, question, &[])),
    }
}
