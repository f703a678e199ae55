//! Server-sent events (the WHATWG HTML standard's `text/event-stream`):
//! reading an agent's stream incrementally, and writing ours.
//!
//! Reading keeps only what an event's `data` needs: lines are split on
//! CRLF, LF or CR; `data:` lines (one optional space after the colon) are
//! joined with `\n`; a blank line ends the event; comments (`:`) and the
//! other fields (`event`, `id`, `retry`) are skipped. A line longer than
//! the bound ends the stream with an error instead of growing without end.

use super::turn::Failure;

/// The events (their `data`) of a streamed response as they arrive,
/// within `max_bytes` all told. A body that breaks, grows past the bound
/// or carries an overlong line ends the stream with a failure naming
/// `who` sent it (`agent`, `provider`); the end of the body ends it.
pub fn events(
    response: reqwest::Response,
    max_bytes: usize,
    who: &'static str,
) -> futures_util::stream::BoxStream<'static, Result<String, Failure>> {
    use futures_util::StreamExt;
    struct State {
        bytes: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
        decoder: Decoder,
        pending: std::collections::VecDeque<String>,
        received: usize,
        failed: bool,
    }
    let state = State {
        bytes: response.bytes_stream().boxed(),
        decoder: Decoder::new(max_bytes),
        pending: Default::default(),
        received: 0,
        failed: false,
    };
    futures_util::stream::unfold(state, move |mut state| async move {
        loop {
            if let Some(data) = state.pending.pop_front() {
                return Some((Ok(data), state));
            }
            if state.failed {
                return None;
            }
            let failure = match state.bytes.next().await? {
                Err(e) => Failure::broke(&e, who),
                Ok(bytes) => {
                    state.received += bytes.len();
                    if state.received > max_bytes {
                        Failure::Garbage(format!("the {who}'s stream passed {max_bytes} bytes"))
                    } else {
                        match state.decoder.feed(&bytes) {
                            Ok(events) => {
                                state.pending.extend(events);
                                continue;
                            }
                            Err(TooLong) => Failure::Garbage(format!("the {who}'s stream has an overlong line")),
                        }
                    }
                }
            };
            state.failed = true;
            return Some((Err(failure), state));
        }
    })
    .boxed()
}

/// Decodes events from chunks as they arrive.
pub struct Decoder {
    /// Bytes of the line being read.
    line: Vec<u8>,
    /// The `data` of the event being read.
    data: Option<String>,
    /// A CR ended the last line; a LF right after it is the same break.
    after_cr: bool,
    max_line: usize,
}

/// A line longer than the decoder's bound.
#[derive(Debug, PartialEq, Eq)]
pub struct TooLong;

impl Decoder {
    pub fn new(max_line: usize) -> Decoder {
        Decoder { line: Vec::new(), data: None, after_cr: false, max_line }
    }

    /// Feeds `chunk`; returns the `data` of each event it completes.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<String>, TooLong> {
        let mut events = Vec::new();
        for &byte in chunk {
            if self.after_cr {
                self.after_cr = false;
                if byte == b'\n' {
                    continue;
                }
            }
            match byte {
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(event) = self.line_done(&line) {
                        events.push(event);
                    }
                }
                _ if self.line.len() >= self.max_line => return Err(TooLong),
                _ => self.line.push(byte),
            }
        }
        Ok(events)
    }

    fn line_done(&mut self, line: &[u8]) -> Option<String> {
        if line.is_empty() {
            return self.data.take();
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.split_once(':') {
            Some(("", _)) => return None,
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (text.as_ref(), ""),
        };
        if field == "data" {
            match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            }
        }
        None
    }
}

/// One event as we send it: a `data:` line per line of `json` (which,
/// compact, has none) and the blank line that ends it.
pub fn event(json: &serde_json::Value) -> bytes::Bytes {
    bytes::Bytes::from(format!("data: {json}\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each case: the chunks as they arrive, and the events' data.
    #[test]
    fn events_are_read_across_chunks_and_line_endings() {
        let check = |chunks: &[&str], expected: &[&str]| {
            let mut decoder = Decoder::new(1024);
            let got: Vec<String> = chunks.iter().flat_map(|c| decoder.feed(c.as_bytes()).unwrap()).collect();
            assert_eq!(got, expected, "{chunks:?}");
        };
        check(&["data: {\"a\":1}\n\n"], &["{\"a\":1}"]);
        check(&["da", "ta: x\n", "\n"], &["x"]);
        check(&["data: x\r\n\r\ndata: y\r\r"], &["x", "y"]);
        check(&["data: x\r", "\n\r", "\n"], &["x"]);
        check(&["data:one\ndata: two\n\n"], &["one\ntwo"]);
        check(&[": a comment\nevent: message\nid: 3\ndata: z\n\n"], &["z"]);
        check(&["event: ping\n\n"], &[]);
        check(&["data\n\n"], &[""]);
        check(&["data: unfinished"], &[]);
    }

    #[test]
    fn a_line_past_the_bound_is_refused() {
        let mut decoder = Decoder::new(8);
        assert_eq!(decoder.feed(b"data: 12"), Ok(vec![]));
        assert_eq!(decoder.feed(b"3"), Err(TooLong));
    }

    #[test]
    fn our_events_are_one_data_line_and_a_blank_line() {
        let written = event(&serde_json::json!({"type": "event", "content": {"kind": "message", "text": "a\nb"}}));
        assert_eq!(
            &written[..],
            b"data: {\"content\":{\"kind\":\"message\",\"text\":\"a\\nb\"},\"type\":\"event\"}\n\n"
        );
        let mut decoder = Decoder::new(1024);
        let read = decoder.feed(&written).unwrap();
        assert_eq!(serde_json::from_str::<serde_json::Value>(&read[0]).unwrap()["content"]["text"], "a\nb");
    }
}
