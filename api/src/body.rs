//! Request bodies, read up to a bound: a body declared or streamed larger
//! than the bound is refused, so no client can make the api hold more than
//! the bound in memory. A streamed body that passes the bound is read on
//! and discarded, up to the bound again: a client that sent a little too
//! much in one go then reads its 413 instead of a reset connection (closing
//! a socket with unread data resets it).

use bytes::{Buf, Bytes};
use futures_util::{Stream, StreamExt};
use warp::http::{header, HeaderMap};

#[derive(Debug, PartialEq, Eq)]
pub enum BodyError {
    /// Larger than the bound (413).
    TooLarge,
    /// The connection failed while the body arrived (400).
    Unreadable,
}

/// Reads a request body, refusing it once it passes `limit` bytes,
/// declared (`Content-Length`: nothing is read) or streamed (up to `limit`
/// more bytes are then read and dropped).
pub async fn read_body<S, B, E>(headers: &HeaderMap, body: S, limit: usize) -> Result<Bytes, BodyError>
where
    S: Stream<Item = Result<B, E>>,
    B: Buf,
{
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge);
    }
    let mut body = std::pin::pin!(body);
    let mut bytes = Vec::new();
    while let Some(chunk) = body.next().await {
        let mut chunk = chunk.map_err(|_| BodyError::Unreadable)?;
        if bytes.len() + chunk.remaining() > limit {
            drop(bytes);
            let mut dropped = 0usize;
            while let Some(Ok(chunk)) = body.next().await {
                dropped += chunk.remaining();
                if dropped > limit {
                    break;
                }
            }
            return Err(BodyError::TooLarge);
        }
        while chunk.has_remaining() {
            let part = chunk.chunk();
            bytes.extend_from_slice(part);
            let n = part.len();
            chunk.advance(n);
        }
    }
    Ok(Bytes::from(bytes))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

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
        let stream = futures_util::stream::iter(chunks).inspect(|_| {
            pulled.fetch_add(1, Ordering::SeqCst);
        });
        let got = read_body(&headers, stream, limit).await;
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
