//! `POST /chat/message`'s body and headers: reading never panics, however
//! many header names `auth` lists (`http::HeaderMap` panics past 32,768);
//! what is read is within its bounds; a refusal is a 4xx naming what.
#![no_main]
use libfuzzer_sys::fuzz_target;

use api::chat::relay::AuthBounds;
use api::chat::{Outgoing, SendBounds};

const BOUNDS: SendBounds = SendBounds {
    max_message_bytes: 1_024,
    auth: AuthBounds { max_headers: 8, max_bytes: 512, max_held_bytes: 4_096 },
};

fuzz_target!(|data: &[u8]| {
    // A first line is the Idempotency-Key header's value; the rest the body.
    let split = data.iter().position(|b| *b == b'\n').unwrap_or(0);
    let (head, body) = data.split_at(split);
    let mut headers = http::HeaderMap::new();
    if let Ok(value) = http::HeaderValue::from_bytes(head) {
        headers.insert("idempotency-key", value);
    }
    let body = bytes::Bytes::copy_from_slice(body.get(1..).unwrap_or_default());
    match Outgoing::parse(&body, &headers, BOUNDS) {
        Ok(send) => {
            assert!(send.message().len() <= BOUNDS.max_message_bytes);
            if let Some(auth) = send.auth() {
                assert!(auth.len() <= BOUNDS.auth.max_headers);
                assert!(api::chat::relay::auth_size(auth) <= BOUNDS.auth.max_bytes);
            }
            assert!(send.idempotency_key().is_none_or(|k| k.len() <= api::idempotency::MAX_KEY_BYTES));
        }
        Err(refused) => assert!(refused.status.is_client_error(), "{}", refused.message),
    }
});
