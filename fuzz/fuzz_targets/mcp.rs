//! The MCP endpoint's checks: headers (Host, Origin, the MCP headers, in
//! any number) and the JSON-RPC envelope never panic, and every answer is
//! an HTTP status with JSON or no body.
#![no_main]
use libfuzzer_sys::fuzz_target;

const NAMES: [&str; 6] = ["host", "origin", "mcp-method", "mcp-name", "mcp-protocol-version", "content-type"];

fuzz_target!(|data: &[u8]| {
    // Lines before the first empty one are header values, each given to
    // the header its first byte picks; the rest is the body.
    let split = data.windows(2).position(|w| w == b"\n\n").unwrap_or(data.len());
    let (head, body) = data.split_at(split);
    let mut headers = http::HeaderMap::new();
    for line in head.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let name = NAMES[line[0] as usize % NAMES.len()];
        if let Ok(value) = http::HeaderValue::from_bytes(&line[1..]) {
            headers.append(name, value);
        }
    }
    let body = bytes::Bytes::copy_from_slice(body.get(2..).unwrap_or_default());
    let access = api::guard::mcp::Access::loopback();
    let reply = api::guard::mcp::respond(&access, None, &headers, &body);
    let status = reply.status().as_u16();
    assert!((200..600).contains(&status));
});
