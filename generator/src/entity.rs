//! Ledger entity ids (`shard.realm.num`), used for accounts and topics alike.
//!
//! Hedera writes accounts and topics the same way. A user may append the
//! five-letter checksum (`0.0.123-vfmkw`); it names the same entity, so it is
//! dropped when parsing and never written back.

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

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || InvalidEntityId(text.to_string());
        let id = match text.split_once('-') {
            Some((id, checksum)) => {
                let checksum_ok = checksum.len() == 5 && checksum.bytes().all(|b| b.is_ascii_lowercase());
                if !checksum_ok {
                    return Err(bad());
                }
                id
            }
            None => text,
        };
        let mut parts = id.split('.');
        let mut next = || -> Result<u64, InvalidEntityId> {
            let part = parts.next().ok_or_else(bad)?;
            // Digits only: `u64::from_str` would also take a leading `+`.
            if part.is_empty() || part.len() > 19 || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            part.parse().map_err(|_| bad())
        };
        let parsed = EntityId::new(next()?, next()?, next()?);
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(parsed)
    }
}

impl fmt::Display for EntityId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.shard, self.realm, self.num)
    }
}

impl serde::Serialize for EntityId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
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
        check("0.0.0123", Some("0.0.123")); // leading zeros name the same entity
        check("0.0.123-VFMKW", None); // checksums are lower-case letters
        check("0.0.123-abc", None);
        check("0.0", None);
        check("0.0.1.2", None);
        check("0.0.+1", None);
        check("0.0.-1", None);
        check("a.b.c", None);
        check("", None);
        check("0.0.99999999999999999999", None); // overflows u64
        check(" 0.0.1", None);
    }

    #[test]
    fn orders_numerically() {
        let a: EntityId = "0.0.9".parse().unwrap();
        let b: EntityId = "0.0.10".parse().unwrap();
        assert!(a < b);
    }
}
