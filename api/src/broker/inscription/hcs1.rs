//! HCS-1 files: content written to a Hedera consensus topic of its own,
//! as the HCS-1 standard lays it out.
//!
//! - The topic's memo is `<sha256>:zstd:base64`: the SHA-256 of the
//!   content before compression (hex), the compression and the encoding.
//!   The topic has a submit key and no admin key (a file that can be
//!   deleted or changed is not a valid HCS-1 file).
//! - The content is compressed with zstd, written as a data URI
//!   (`data:<mime type>;base64,<compressed bytes in base64>`), and cut into
//!   pieces; each piece is one message `{"o": <order from 0>, "c":
//!   <piece>}`, small enough for one consensus message (1,024 bytes).
//! - A reader puts the pieces in `o` order, reads the data URI, inflates
//!   it and checks its SHA-256 against the memo.
//!
//! Its address is the HRL `hcs://1/<topic id>`.

use base64::Engine as _;
use sha2::{Digest, Sha256};

/// The most bytes of one consensus message on the network.
pub const MESSAGE_MAX: usize = 1024;
/// The characters of the data URI each message carries: with the JSON
/// around it (`{"o":NNNNN,"c":""}`, at most 20 bytes), a message stays
/// within [`MESSAGE_MAX`].
pub const PIECE: usize = 1000;
/// zstd's level: the standard's tools write level 10 or so; 19 gains
/// little more on text and costs much more time.
const LEVEL: i32 = 10;

/// Content laid out as an HCS-1 file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct File {
    /// The topic memo.
    pub memo: String,
    /// The messages, in order.
    pub messages: Vec<Vec<u8>>,
    /// SHA-256 of the content, hex.
    pub hash: String,
}

/// SHA-256 of `content`, hex.
pub fn hash(content: &[u8]) -> String {
    shared::http::hex(&Sha256::digest(content))
}

/// How many messages `content` of `mime` takes, without laying it out
/// (a quote's estimate; O(n) for the compression).
pub fn messages_for(content: &[u8], mime: &str) -> std::io::Result<usize> {
    Ok(data_uri(content, mime)?.len().div_ceil(PIECE))
}

fn data_uri(content: &[u8], mime: &str) -> std::io::Result<String> {
    let compressed = zstd::bulk::compress(content, LEVEL)?;
    Ok(format!("data:{mime};base64,{}", base64::engine::general_purpose::STANDARD.encode(compressed)))
}

/// Lays `content` of `mime` out as an HCS-1 file.
pub fn encode(content: &[u8], mime: &str) -> std::io::Result<File> {
    let uri = data_uri(content, mime)?;
    debug_assert!(uri.is_ascii(), "a data URI of base64 is ASCII: pieces cut on bytes are whole characters");
    let messages: Vec<Vec<u8>> = uri
        .as_bytes()
        .chunks(PIECE)
        .enumerate()
        .map(|(o, piece)| {
            let piece = std::str::from_utf8(piece).expect("ASCII");
            serde_json::to_vec(&serde_json::json!({"o": o, "c": piece})).expect("a message serialises")
        })
        .collect();
    debug_assert!(messages.iter().all(|m| m.len() <= MESSAGE_MAX), "every message fits one consensus message");
    let hash = hash(content);
    Ok(File { memo: format!("{hash}:zstd:base64"), messages, hash })
}

/// Why messages are not a valid HCS-1 file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error("the topic memo {0:?} is not <sha256>:zstd:base64")]
    Memo(String),
    #[error("message {0} is not {{\"o\", \"c\"}}")]
    Message(usize),
    #[error("the pieces are not 0 to {0} once each")]
    Order(usize),
    #[error("the content is not a base64 data URI")]
    DataUri,
    #[error("the content does not inflate as zstd, or inflates past {0} bytes")]
    Compression(usize),
    #[error("the content's SHA-256 is not the memo's")]
    Hash,
}

/// The content and its mime type, read back from a topic's `memo` and its
/// messages (in any order), inflating to at most `max_bytes`.
pub fn decode(memo: &str, messages: &[Vec<u8>], max_bytes: usize) -> Result<(Vec<u8>, String), Invalid> {
    let mut parts = memo.split(':');
    let (Some(expected), Some("zstd"), Some("base64"), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Invalid::Memo(memo.to_string()));
    };
    #[derive(serde::Deserialize)]
    struct Piece {
        o: usize,
        c: String,
    }
    let mut pieces: Vec<Piece> = messages
        .iter()
        .enumerate()
        .map(|(n, m)| serde_json::from_slice(m).map_err(|_| Invalid::Message(n)))
        .collect::<Result<_, _>>()?;
    pieces.sort_by_key(|p| p.o);
    if pieces.iter().enumerate().any(|(n, p)| p.o != n) {
        return Err(Invalid::Order(pieces.len().saturating_sub(1)));
    }
    let uri: String = pieces.into_iter().map(|p| p.c).collect();
    let (head, data) = uri.strip_prefix("data:").and_then(|rest| rest.split_once(',')).ok_or(Invalid::DataUri)?;
    let mime = head.strip_suffix(";base64").ok_or(Invalid::DataUri)?;
    let compressed = base64::engine::general_purpose::STANDARD.decode(data).map_err(|_| Invalid::DataUri)?;
    let content = zstd::bulk::decompress(&compressed, max_bytes).map_err(|_| Invalid::Compression(max_bytes))?;
    if hash(&content) != expected {
        return Err(Invalid::Hash);
    }
    Ok((content, mime.to_string()))
}

/// The HRL of a file on `topic`.
pub fn hrl(topic: &str) -> String {
    format!("hcs://1/{topic}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_reads_back_as_written_in_any_order() {
        let text = "an agent's manifest, ".repeat(400);
        let noise: Vec<u8> = (0..9000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for (content, mime) in [(text.as_bytes(), "text/markdown"), (&noise[..], "image/png"), (&b""[..], "text/plain")]
        {
            let file = encode(content, mime).unwrap();
            assert_eq!(file.memo, format!("{}:zstd:base64", hash(content)));
            assert!(file.memo.len() <= 100, "a topic memo is 100 bytes at most");
            assert!(file.messages.iter().all(|m| m.len() <= MESSAGE_MAX));
            assert_eq!(file.messages.len(), messages_for(content, mime).unwrap());
            let mut shuffled = file.messages.clone();
            shuffled.reverse();
            assert_eq!(decode(&file.memo, &shuffled, 1 << 20).unwrap(), (content.to_vec(), mime.to_string()));
        }
    }

    #[test]
    fn what_is_not_a_valid_file_is_named() {
        let file = encode(&b"hello, ledger".repeat(200), "text/plain").unwrap();
        let other = encode(b"another", "text/plain").unwrap();
        let cases: Vec<(&str, Vec<Vec<u8>>, usize, Invalid)> = vec![
            ("abc:gzip:base64", file.messages.clone(), 1 << 20, Invalid::Memo("abc:gzip:base64".into())),
            (&other.memo, file.messages.clone(), 1 << 20, Invalid::Hash),
            (&file.memo, vec![b"not json".to_vec()], 1 << 20, Invalid::Message(0)),
            (&file.memo, vec![br#"{"o":1,"c":"x"}"#.to_vec()], 1 << 20, Invalid::Order(0)),
            (&file.memo, vec![br#"{"o":0,"c":"plain text"}"#.to_vec()], 1 << 20, Invalid::DataUri),
            (&file.memo, file.messages.clone(), 10, Invalid::Compression(10)),
        ];
        for (memo, messages, max, invalid) in cases {
            assert_eq!(decode(memo, &messages, max), Err(invalid.clone()), "{invalid}");
        }
        assert_eq!(hrl("0.0.5001"), "hcs://1/0.0.5001");
    }
}
