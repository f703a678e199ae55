//! Request bodies, read up to a bound: a body declared or streamed larger
//! than the bound is refused, so no client can make the api hold more than
//! the bound in memory. A streamed body that passes the bound is read on
//! and discarded, up to the bound again: a client that sent a little too
//! much in one go then reads its 413 instead of a reset connection (closing
//! a socket with unread data resets it).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use warp::http::{header, HeaderMap};

#[derive(Debug, PartialEq, Eq)]
pub enum BodyError {
    /// Larger than the bound (413).
    TooLarge,
    /// The connection failed while the body arrived (400).
    Unreadable,
    /// The body did not arrive within its deadline (408).
    TooSlow,
}

/// Reads a request body, refusing it once it passes `limit` bytes,
/// declared (`Content-Length`: nothing is read) or streamed (up to `limit`
/// more bytes are then read and dropped), or when it is not all there
/// within `deadline`.
pub async fn read_body<B>(headers: &HeaderMap, body: B, limit: usize, deadline: Duration) -> Result<Bytes, BodyError>
where
    B: http_body::Body<Data = Bytes>,
{
    tokio::time::timeout(deadline, read_bounded(headers, body, limit)).await.unwrap_or(Err(BodyError::TooSlow))
}

async fn read_bounded<B>(headers: &HeaderMap, body: B, limit: usize) -> Result<Bytes, BodyError>
where
    B: http_body::Body<Data = Bytes>,
{
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge);
    }
    let mut body = std::pin::pin!(body);
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        // Trailers carry nothing a handler reads.
        let Ok(chunk) = frame.map_err(|_| BodyError::Unreadable)?.into_data() else { continue };
        if bytes.len() + chunk.len() > limit {
            drop(bytes);
            let mut dropped = 0usize;
            while let Some(Ok(frame)) = body.frame().await {
                dropped += frame.data_ref().map_or(0, Bytes::len);
                if dropped > limit {
                    break;
                }
            }
            return Err(BodyError::TooLarge);
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(bytes))
}

/// The dotted path of the first key that appears twice in one object of
/// `body`, if any (serde_json keeps the last of them, a derived struct
/// refuses them: one rule for every body). `None` for a body that is not
/// JSON, which the parse itself refuses. O(size of the body).
pub fn duplicate_key(body: &[u8]) -> Option<String> {
    use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
    use std::fmt;

    /// Walks a value; `Err` carries the path of a duplicate.
    struct Walk(String);

    impl<'de> DeserializeSeed<'de> for Walk {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
            deserializer.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Walk {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
            let mut i = 0;
            while items.next_element_seed(Walk(format!("{}[{i}]", self.0)))?.is_some() {
                i += 1;
            }
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<(), A::Error> {
            let mut seen = std::collections::HashSet::new();
            while let Some(key) = entries.next_key::<String>()? {
                let path = if self.0.is_empty() { key.clone() } else { format!("{}.{key}", self.0) };
                if !seen.insert(key) {
                    return Err(serde::de::Error::custom(path));
                }
                entries.next_value_seed(Walk(path))?;
            }
            Ok(())
        }
    }

    let mut json = serde_json::Deserializer::from_slice(body);
    match Walk(String::new()).deserialize(&mut json) {
        Err(e) if e.is_data() => {
            let text = e.to_string();
            // serde_json appends " at line L column C".
            Some(text.rsplit_once(" at line ").map_or(text.clone(), |(path, _)| path.to_string()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures_util::StreamExt;

    use super::*;

    type Chunk = Result<Bytes, std::io::Error>;

    /// (declared length, chunks, bound) → what is read, and how many chunks
    /// were pulled from the stream.
    async fn check(
        declared: Option<u64>,
        chunks: Vec<Chunk>,
        limit: usize,
        expected: Result<&[u8], BodyError>,
    ) -> usize {
        let mut headers = HeaderMap::new();
        if let Some(n) = declared {
            headers.insert(header::CONTENT_LENGTH, n.into());
        }
        let pulled = AtomicUsize::new(0);
        let stream = futures_util::stream::iter(chunks).map(|chunk| {
            pulled.fetch_add(1, Ordering::SeqCst);
            chunk.map(http_body::Frame::data)
        });
        let body = http_body_util::StreamBody::new(stream);
        let got = read_body(&headers, body, limit, Duration::from_secs(5)).await;
        assert_eq!(got.as_deref(), expected.as_ref().map(|b| *b), "{declared:?}, bound {limit}");
        pulled.load(Ordering::SeqCst)
    }

    fn chunks(parts: &[&'static str]) -> Vec<Chunk> {
        parts.iter().map(|p| Ok(Bytes::from_static(p.as_bytes()))).collect()
    }

    #[tokio::test]
    async fn bounded_reads() {
        check(None, chunks(&["ab", "cd"]), 4, Ok(b"abcd")).await;
        check(Some(4), chunks(&["ab", "cd"]), 4, Ok(b"abcd")).await;
        check(None, vec![], 4, Ok(b"")).await;
        check(None, chunks(&["ab", "cd", "e"]), 4, Err(BodyError::TooLarge)).await;
        let broken = vec![Ok(Bytes::from_static(b"ab")), Err(std::io::Error::other("reset"))];
        check(None, broken, 4, Err(BodyError::Unreadable)).await;
    }

    #[tokio::test]
    async fn a_body_that_does_not_arrive_in_time_is_refused() {
        let headers = HeaderMap::new();
        let first = futures_util::stream::iter([Ok::<_, std::io::Error>(http_body::Frame::data(Bytes::from("ab")))]);
        // The rest never comes, so the deadline is the only way out,
        // however long it is.
        let stalled = first.chain(futures_util::stream::pending());
        let body = http_body_util::StreamBody::new(stalled);
        let got = read_body(&headers, body, 4, Duration::from_millis(20)).await;
        assert_eq!(got, Err(BodyError::TooSlow));
    }

    #[tokio::test]
    async fn a_body_over_the_bound_is_not_read_further_than_the_bound_again() {
        // Declared too large: refused before a byte is read.
        let pulled = check(Some(5), chunks(&["abcde"]), 4, Err(BodyError::TooLarge)).await;
        assert_eq!(pulled, 0);
        // Streamed a little too large: the rest is read and dropped.
        let pulled = check(None, chunks(&["abc", "de", "f"]), 4, Err(BodyError::TooLarge)).await;
        assert_eq!(pulled, 3);
        // Streamed far too large: dropping stops past the bound again.
        let pulled = check(None, chunks(&["abc", "de", "fgh", "ijk", "lmn", "opq"]), 4, Err(BodyError::TooLarge)).await;
        assert_eq!(pulled, 4);
    }
}
