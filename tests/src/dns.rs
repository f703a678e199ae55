//! A DNS server on 127.0.0.1 (UDP) for the api's resolvers in tests
//! (`--egress-dns`, `--verification-dns`): authoritative for the names it
//! holds, it answers `A` and `TXT` queries with their records, `NOERROR`
//! with no answer for a held name's other types, `NXDOMAIN` for any other
//! name, and `FORMERR` for what is not one query (RFC 1035 section 4.1),
//! as a real server does. Records can be set and removed while it runs (a
//! record published late, one taken down). It counts the queries it
//! answered, and can be told to answer none ([`DnsServer::silence`]).

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// One name's records.
#[derive(Clone, Default)]
struct Records {
    a: Vec<Ipv4Addr>,
    /// Each TXT record as its strings.
    txt: Vec<Vec<String>>,
}

type Zone = Arc<Mutex<HashMap<String, Records>>>;

pub struct DnsServer {
    pub addr: SocketAddr,
    /// Queries answered, whatever the answer.
    pub queries: Arc<AtomicUsize>,
    zone: Zone,
    /// While set, queries are read and not answered.
    silent: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl DnsServer {
    /// Serves `names` (lower case, without the trailing dot) to their addresses.
    pub async fn start(names: &[(&str, Ipv4Addr)]) -> DnsServer {
        let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = socket.local_addr().unwrap();
        let zone: Zone = Arc::default();
        for (name, ip) in names {
            zone.lock().unwrap().entry(name.to_string()).or_default().a.push(*ip);
        }
        let queries = Arc::new(AtomicUsize::new(0));
        let silent = Arc::new(AtomicBool::new(false));
        let (counted, held, quiet) = (queries.clone(), zone.clone(), silent.clone());
        let task = tokio::spawn(async move {
            let mut buffer = [0u8; 1500];
            while let Ok((n, from)) = socket.recv_from(&mut buffer).await {
                if quiet.load(Ordering::SeqCst) {
                    continue;
                }
                let answer = answer(&buffer[..n], &held.lock().unwrap());
                if let Some(answer) = answer {
                    counted.fetch_add(1, Ordering::SeqCst);
                    let _ = socket.send_to(&answer, from).await;
                }
            }
        });
        DnsServer { addr, queries, zone, silent, task }
    }

    /// Stops answering (a server down behind a live address), or answers
    /// again.
    pub fn silence(&self, silent: bool) {
        self.silent.store(silent, Ordering::SeqCst);
    }

    /// Sets the TXT records of `name` (each record one string), replacing
    /// any it had; none removes them.
    pub fn set_txt(&self, name: &str, records: &[&str]) {
        let mut zone = self.zone.lock().unwrap();
        let held = zone.entry(name.to_ascii_lowercase()).or_default();
        held.txt = records.iter().map(|r| vec![r.to_string()]).collect();
        if held.a.is_empty() && held.txt.is_empty() {
            zone.remove(&name.to_ascii_lowercase());
        }
    }

    /// Sets one TXT record of `name` made of several strings (as a long
    /// record is split into strings of 255 bytes at most).
    pub fn set_txt_strings(&self, name: &str, strings: &[&str]) {
        let mut zone = self.zone.lock().unwrap();
        zone.entry(name.to_ascii_lowercase()).or_default().txt = vec![strings.iter().map(|s| s.to_string()).collect()];
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

const TYPE_A: u16 = 1;
const TYPE_TXT: u16 = 16;
const CLASS_IN: u16 = 1;

/// The answer to one message (none to what is not a query at all).
fn answer(query: &[u8], zone: &HashMap<String, Records>) -> Option<Vec<u8>> {
    let header = query.get(..12)?;
    let flags = u16::from_be_bytes([header[2], header[3]]);
    if flags & 0x8000 != 0 {
        return None;
    }
    // Each answer as its type and its data.
    let reply = |rcode: u16, question: &[u8], answers: &[(u16, Vec<u8>)]| {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&header[..2]);
        // QR, the query's opcode and RD, AA (authoritative), RA, the code.
        let authoritative = if question.is_empty() { 0 } else { 0x0400 };
        out.extend_from_slice(&(0x8000 | (flags & 0x7900) | authoritative | 0x0080 | rcode).to_be_bytes());
        out.extend_from_slice(&(u16::from(!question.is_empty())).to_be_bytes());
        out.extend_from_slice(&(answers.len() as u16).to_be_bytes());
        out.extend_from_slice(&[0, 0, 0, 0]);
        out.extend_from_slice(question);
        for (kind, data) in answers {
            // The question's name by a pointer to offset 12.
            out.extend_from_slice(&[0xc0, 12]);
            out.extend_from_slice(&kind.to_be_bytes());
            out.extend_from_slice(&CLASS_IN.to_be_bytes());
            out.extend_from_slice(&60u32.to_be_bytes());
            out.extend_from_slice(&(data.len() as u16).to_be_bytes());
            out.extend_from_slice(data);
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
    let Some(records) = zone.get(&labels.join(".")) else { return Some(reply(3, question, &[])) };
    let answers: Vec<(u16, Vec<u8>)> = match (kind, class) {
        (TYPE_A, CLASS_IN) => records.a.iter().map(|ip| (TYPE_A, ip.octets().to_vec())).collect(),
        (TYPE_TXT, CLASS_IN) => records
            .txt
            .iter()
            .map(|strings| {
                // Character-strings: a length byte, then at most 255 bytes.
                let data = strings.iter().flat_map(|s| {
                    debug_assert!(s.len() <= 255, "a TXT string is 255 bytes at most");
                    std::iter::once(s.len() as u8).chain(s.bytes())
                });
                (TYPE_TXT, data.collect())
            })
            .collect(),
        _ => Vec::new(),
    };
    Some(reply(0, question, &answers))
}
