//! Ledger entity ids (`shard.realm.num`), used for accounts and topics alike.
//!
//! Hedera writes accounts and topics the same way: `shard.realm.num`, ASCII
//! digits without leading zeros (`0` alone is fine), nothing around them. A
//! user may append the five-letter checksum (`0.0.123-vfmkw`); it names the
//! same entity, so it is dropped when parsing and never written back. Any
//! other spelling is no id: read loosely, `0.0.0123` would name 0.0.123, a
//! different account than the writer's.

use std::fmt;
use std::str::FromStr;

/// An account or topic id. Ordered numerically (shard, realm, num), which is
/// the order holders and accounts are listed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntityId {
    pub shard: u64,
    pub realm: u64,
    pub num: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid entity id {0:?}: expected shard.realm.num with an optional -checksum")]
pub struct InvalidEntityId(pub String);

impl EntityId {
    pub const fn new(shard: u64, realm: u64, num: u64) -> Self {
        EntityId { shard, realm, num }
    }
}

impl FromStr for EntityId {
    type Err = InvalidEntityId;

    /// One pass over the bytes: a build parses millions of ids.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || InvalidEntityId(text.to_string());
        let bytes = text.as_bytes();
        let id = match bytes.iter().position(|&b| b == b'-') {
            Some(dash) => {
                let checksum = &bytes[dash + 1..];
                if checksum.len() != 5 || !checksum.iter().all(|b| b.is_ascii_lowercase()) {
                    return Err(bad());
                }
                &bytes[..dash]
            }
            None => bytes,
        };
        let mut parts = [0u64; 3];
        let mut part = 0;
        let mut digits = 0;
        for &b in id {
            match b {
                // No leading zeros (`0` alone is fine): `0.0.0123` is not a
                // spelling of 0.0.123 but no id at all.
                b'0'..=b'9' if digits == 1 && parts[part] == 0 => return Err(bad()),
                b'0'..=b'9' => {
                    // Digits only: `u64::from_str` would also take a `+`.
                    digits += 1;
                    parts[part] =
                        parts[part].checked_mul(10).and_then(|n| n.checked_add(u64::from(b - b'0'))).ok_or_else(bad)?;
                }
                b'.' if digits > 0 && part < 2 => {
                    part += 1;
                    digits = 0;
                }
                _ => return Err(bad()),
            }
        }
        if part != 2 || digits == 0 {
            return Err(bad());
        }
        Ok(EntityId::new(parts[0], parts[1], parts[2]))
    }
}

impl EntityId {
    /// The id as text, formatted on the stack: a build writes millions of
    /// ids (warehouse columns, rendered files), and this skips both the
    /// allocation of `to_string` and the `fmt` machinery.
    pub fn text(&self) -> IdText {
        let mut text = IdText { bytes: [0; IdText::CAPACITY], len: 0 };
        text.push(self.shard);
        text.bytes[text.len] = b'.';
        text.len += 1;
        text.push(self.realm);
        text.bytes[text.len] = b'.';
        text.len += 1;
        text.push(self.num);
        text
    }
}

/// An [`EntityId`]'s text: three numbers of at most 20 digits and two dots.
#[derive(Clone, Copy)]
pub struct IdText {
    bytes: [u8; IdText::CAPACITY],
    len: usize,
}

impl IdText {
    const CAPACITY: usize = 62;

    fn push(&mut self, mut n: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let width = digits.len() - i;
        self.bytes[self.len..self.len + width].copy_from_slice(&digits[i..]);
        self.len += width;
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII digits and dots are ever written.
        std::str::from_utf8(&self.bytes[..self.len]).expect("ascii")
    }
}

impl AsRef<str> for IdText {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for EntityId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text().as_str())
    }
}

impl serde::Serialize for EntityId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.text().as_str())
    }
}

/// On the wire an id is its `shard.realm.num` text.
impl schemars::JsonSchema for EntityId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "EntityId".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^[0-9]+\\.[0-9]+\\.[0-9]+$",
            "description": "A Hedera entity id (account or topic), `shard.realm.num`."
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Option<&str>) {
        let parsed = text.parse::<EntityId>().ok().map(|id| id.to_string());
        assert_eq!(parsed.as_deref(), expected, "parsing {text:?}");
    }

    #[test]
    fn parses_and_normalises() {
        check("0.0.4350190", Some("0.0.4350190"));
        check("1.2.3", Some("1.2.3"));
        check("0.0.123-vfmkw", Some("0.0.123")); // checksum dropped
        check("0.0.0123", None); // no leading zeros
        check("00.0.1234", None);
        check("0.00.1234", None);
        check("0.0.00", None);
        check("0.0.0", Some("0.0.0")); // zero alone is fine
        check("10.20.30", Some("10.20.30"));
        check("0.0.1234 ", None);
        check("0.0.1234\n", None);
        check("0.0.１２３", None); // ASCII digits only
        check("0.0.123-VFMKW", None); // checksums are lower-case letters
        check("0.0.123-abc", None);
        check("0.0", None);
        check("0.0.1.2", None);
        check("0.0.+1", None);
        check("0.0.-1", None);
        check("a.b.c", None);
        check("", None);
        check("0.0.99999999999999999999", None); // overflows u64
        check("0.0.18446744073709551615", Some("0.0.18446744073709551615")); // u64::MAX
        check("0.0.18446744073709551616", None);
        check("0..1", None);
        check(".0.1", None);
        check("0.0.", None);
        check("0.0.1-", None);
        check("0.0.1-vfmkwx", None);
        check(" 0.0.1", None);
    }

    #[test]
    fn formats_every_width() {
        for id in [
            EntityId::new(0, 0, 0),
            EntityId::new(0, 0, 9),
            EntityId::new(0, 0, 10),
            EntityId::new(12, 345, 4350190),
            EntityId::new(u64::MAX, u64::MAX, u64::MAX),
        ] {
            let expected = format!("{}.{}.{}", id.shard, id.realm, id.num);
            assert_eq!(id.text().as_str(), expected);
            assert_eq!(id.to_string(), expected);
            assert_eq!(serde_json::to_string(&id).unwrap(), format!("\"{expected}\""));
        }
    }

    #[test]
    fn orders_numerically() {
        let a: EntityId = "0.0.9".parse().unwrap();
        let b: EntityId = "0.0.10".parse().unwrap();
        assert!(a < b);
    }
}
