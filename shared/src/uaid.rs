//! HCS-14 Universal Agent IDs: `uaid:aid:{id};{params}` (a deterministic
//! id: base58 of the SHA-384 of an agent's canonical JSON) and
//! `uaid:did:{id};{params}` (the method-specific id of an existing DID).
//!
//! Parameters are emitted in the standard's order: `uid` (required, `0`
//! when not applicable), `registry`, `proto`, `nativeId`, `domain`, `src`;
//! parameters this version does not know are kept, after those, in the
//! order given (the standard evolves by adding parameters).
//!
//! Pure: no IO.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha384};

/// The parameters HCS-14 names, in the order they are written.
pub const KNOWN_PARAMS: [&str; 6] = ["uid", "registry", "proto", "nativeId", "domain", "src"];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// `aid`: derived from canonical agent data.
    Aid,
    /// `did`: an existing W3C DID's method-specific id.
    Did,
}

impl Target {
    pub fn as_str(self) -> &'static str {
        match self {
            Target::Aid => "aid",
            Target::Did => "did",
        }
    }
}

/// A valid UAID. It reads and writes as its text (serde included), which
/// is always the canonical spelling: parameters in the standard order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Uaid {
    /// The canonical text; first, so that ordering is by text.
    text: String,
    pub target: Target,
    pub id: String,
    /// `(key, value)` in canonical order; `uid` is always first.
    pub params: Vec<(String, String)>,
}

impl Uaid {
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl std::ops::Deref for Uaid {
    type Target = str;

    fn deref(&self) -> &str {
        &self.text
    }
}

impl AsRef<str> for Uaid {
    fn as_ref(&self) -> &str {
        &self.text
    }
}

impl PartialEq<str> for Uaid {
    fn eq(&self, other: &str) -> bool {
        self.text == other
    }
}

impl PartialEq<&str> for Uaid {
    fn eq(&self, other: &&str) -> bool {
        self.text == *other
    }
}

impl PartialEq<String> for Uaid {
    fn eq(&self, other: &String) -> bool {
        &self.text == other
    }
}

impl serde::Serialize for Uaid {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

/// On the wire a UAID is its canonical text.
impl schemars::JsonSchema for Uaid {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Uaid".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^uaid:(aid|did):",
            "description": "An HCS-14 universal agent id in its canonical form."
        })
    }
}

impl<'de> serde::Deserialize<'de> for Uaid {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Uaid, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UaidError {
    #[error("a UAID starts with uaid:aid: or uaid:did:")]
    Scheme,
    #[error("the id part is empty or holds a reserved character (; ? # or whitespace)")]
    Id,
    #[error("parameter {0:?} is not key=value with a non-empty key and value")]
    Param(String),
    #[error("parameter {0:?} appears twice")]
    Duplicate(String),
    #[error("the uid parameter is required (0 when not applicable)")]
    MissingUid,
    #[error("agent field {0} is required and must not be empty")]
    MissingField(&'static str),
    #[error("skill {0} is in the reserved range 40-99")]
    ReservedSkill(u64),
}

impl Uaid {
    /// The value of parameter `key`.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Builds a UAID, putting `params` in canonical order and `uid` (default
    /// `0`) first.
    pub fn new(target: Target, id: &str, params: &[(&str, &str)]) -> Result<Uaid, UaidError> {
        check_id(id)?;
        let mut owned: Vec<(String, String)> = Vec::new();
        for (k, v) in params {
            check_param(k, v)?;
            if owned.iter().any(|(seen, _)| seen == k) {
                return Err(UaidError::Duplicate(k.to_string()));
            }
            owned.push((k.to_string(), v.to_string()));
        }
        if !owned.iter().any(|(k, _)| k == "uid") {
            owned.push(("uid".into(), "0".into()));
        }
        let params = canonical_order(owned);
        let mut text = format!("uaid:{}:{id}", target.as_str());
        for (k, v) in &params {
            text.push_str(&format!(";{k}={v}"));
        }
        Ok(Uaid { text, target, id: id.to_string(), params })
    }
}

fn check_id(id: &str) -> Result<(), UaidError> {
    if id.is_empty() || id.contains([';', '?', '#']) || id.chars().any(char::is_whitespace) {
        return Err(UaidError::Id);
    }
    Ok(())
}

fn check_param(key: &str, value: &str) -> Result<(), UaidError> {
    let bad = key.is_empty()
        || value.is_empty()
        || key.contains(['=', ';'])
        || value.contains(';')
        || key.chars().chain(value.chars()).any(char::is_whitespace);
    if bad {
        return Err(UaidError::Param(format!("{key}={value}")));
    }
    Ok(())
}

/// Known parameters in the standard's order, then the others as given.
fn canonical_order(mut params: Vec<(String, String)>) -> Vec<(String, String)> {
    let rank = |k: &str| KNOWN_PARAMS.iter().position(|known| *known == k).unwrap_or(KNOWN_PARAMS.len());
    // Stable: unknown parameters keep their relative order.
    params.sort_by_key(|(k, _)| rank(k));
    params
}

impl FromStr for Uaid {
    type Err = UaidError;

    fn from_str(text: &str) -> Result<Uaid, UaidError> {
        let (target, rest) = if let Some(rest) = text.strip_prefix("uaid:aid:") {
            (Target::Aid, rest)
        } else if let Some(rest) = text.strip_prefix("uaid:did:") {
            (Target::Did, rest)
        } else {
            return Err(UaidError::Scheme);
        };
        let mut parts = rest.split(';');
        let id = parts.next().unwrap_or_default();
        let mut params = Vec::new();
        for part in parts {
            let (k, v) = part.split_once('=').ok_or_else(|| UaidError::Param(part.to_string()))?;
            params.push((k, v));
        }
        if !params.iter().any(|(k, _)| *k == "uid") {
            check_id(id)?;
            return Err(UaidError::MissingUid);
        }
        Uaid::new(target, id, &params)
    }
}

impl fmt::Display for Uaid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The six inputs of an `aid` id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentData {
    pub registry: String,
    pub name: String,
    pub version: String,
    pub protocol: String,
    pub native_id: String,
    pub skills: Vec<u64>,
}

/// The canonical JSON the `aid` id hashes: strings trimmed, `registry` and
/// `protocol` lower-cased, skills sorted, keys in the order `skills, name,
/// nativeId, protocol, registry, version`, no whitespace.
pub fn canonical_json(agent: &AgentData) -> Result<String, UaidError> {
    let field = |name: &'static str, value: &str| -> Result<String, UaidError> {
        let trimmed = value.trim();
        if trimmed.is_empty() {
            return Err(UaidError::MissingField(name));
        }
        Ok(trimmed.to_string())
    };
    let registry = field("registry", &agent.registry)?.to_lowercase();
    let name = field("name", &agent.name)?;
    let version = field("version", &agent.version)?;
    let protocol = field("protocol", &agent.protocol)?.to_lowercase();
    let native_id = field("nativeId", &agent.native_id)?;
    if let Some(reserved) = agent.skills.iter().find(|s| (40..100).contains(*s)) {
        return Err(UaidError::ReservedSkill(*reserved));
    }
    let mut skills = agent.skills.clone();
    skills.sort_unstable();
    let text = |s: &str| serde_json::to_string(s).expect("strings serialise");
    Ok(format!(
        "{{\"skills\":{},\"name\":{},\"nativeId\":{},\"protocol\":{},\"registry\":{},\"version\":{}}}",
        serde_json::to_string(&skills).expect("numbers serialise"),
        text(&name),
        text(&native_id),
        text(&protocol),
        text(&registry),
        text(&version)
    ))
}

/// The `aid` id of an agent: base58 (Bitcoin alphabet) of the SHA-384 of
/// its canonical JSON.
pub fn aid_id(agent: &AgentData) -> Result<String, UaidError> {
    let digest = Sha384::digest(canonical_json(agent)?.as_bytes());
    Ok(bs58::encode(digest).into_string())
}

/// The full `uaid:aid:` of an agent, with its routing parameters.
pub fn aid(agent: &AgentData, uid: Option<&str>) -> Result<Uaid, UaidError> {
    let id = aid_id(agent)?;
    let registry = agent.registry.trim().to_lowercase();
    let protocol = agent.protocol.trim().to_lowercase();
    Uaid::new(
        Target::Aid,
        &id,
        &[
            ("uid", uid.unwrap_or("0")),
            ("registry", &registry),
            ("proto", &protocol),
            ("nativeId", agent.native_id.trim()),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(registry: &str, name: &str, protocol: &str, native_id: &str, skills: &[u64]) -> AgentData {
        AgentData {
            registry: registry.into(),
            name: name.into(),
            version: "1.0.0".into(),
            protocol: protocol.into(),
            native_id: native_id.into(),
            skills: skills.to_vec(),
        }
    }

    /// Parses `text`: `Ok(canonical)` or the error expected; serde reads
    /// and writes the same (a UAID in JSON is its canonical text).
    fn check(text: &str, expected: Result<&str, UaidError>) {
        let parsed = text.parse::<Uaid>().map(|u| u.to_string());
        assert_eq!(parsed.as_deref().map_err(Clone::clone), expected, "{text}");
        let read = serde_json::from_value::<Uaid>(serde_json::json!(text));
        match expected {
            Ok(canonical) => {
                let uaid = read.unwrap();
                assert_eq!(uaid.as_str(), canonical, "{text}");
                assert_eq!(serde_json::to_value(&uaid).unwrap(), serde_json::json!(canonical), "{text}");
            }
            Err(e) => assert!(read.unwrap_err().to_string().contains(&e.to_string()), "{text}"),
        }
    }

    #[test]
    fn parse_and_format() {
        // The standard's examples (their ids are illustrative, not hashes).
        check(
            "uaid:aid:QmX4fB9XpS3yKqP8MHTbcQW7R6wN4PrGHz;uid=0;registry=hol;nativeId=hedera:testnet:0.0.123456",
            Ok("uaid:aid:QmX4fB9XpS3yKqP8MHTbcQW7R6wN4PrGHz;uid=0;registry=hol;nativeId=hedera:testnet:0.0.123456"),
        );
        check(
            "uaid:did:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK;uid=0;proto=hcs-10;nativeId=hedera:testnet:0.0.123456",
            Ok("uaid:did:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK;uid=0;proto=hcs-10;nativeId=hedera:testnet:0.0.123456"),
        );
        // Parameters come back in the standard's order; unknown ones last.
        check(
            "uaid:aid:abc;nativeId=microsoft.com;registry=microsoft;uid=customer-support-assistant",
            Ok("uaid:aid:abc;uid=customer-support-assistant;registry=microsoft;nativeId=microsoft.com"),
        );
        check("uaid:aid:abc;future=1;uid=0;domain=a.example", Ok("uaid:aid:abc;uid=0;domain=a.example;future=1"));
        check(
            "uaid:did:pkh:eip155:1:0xAbC;uid=0;nativeId=eip155:1:0xAbC",
            Ok("uaid:did:pkh:eip155:1:0xAbC;uid=0;nativeId=eip155:1:0xAbC"),
        );
        check("uaid:aid:abc;uid=1:42;registry=erc-8004", Ok("uaid:aid:abc;uid=1:42;registry=erc-8004"));
        // Errors.
        check("did:aid:abc;uid=0", Err(UaidError::Scheme));
        check("uaid:xyz:abc;uid=0", Err(UaidError::Scheme));
        check("uaid:aid:;uid=0", Err(UaidError::Id));
        check("uaid:aid:a b;uid=0", Err(UaidError::Id));
        check("uaid:aid:ab?c;uid=0", Err(UaidError::Id));
        check("uaid:aid:abc", Err(UaidError::MissingUid));
        check("uaid:aid:abc;registry=hol", Err(UaidError::MissingUid));
        check("uaid:aid:abc;uid=0;registry", Err(UaidError::Param("registry".into())));
        check("uaid:aid:abc;uid=0;registry=", Err(UaidError::Param("registry=".into())));
        check("uaid:aid:abc;uid=0;uid=1", Err(UaidError::Duplicate("uid".into())));
        check("uaid:aid:abc;uid=0;", Err(UaidError::Param(String::new())));
    }

    #[test]
    fn canonical_json_follows_the_standard() {
        // Test vector 1 of HCS-14, with surrounding space and upper case that
        // normalisation removes.
        let mut a = agent(" HOL ", "Support Agent ", "HCS-10", "hedera:testnet:0.0.123456", &[17, 0]);
        assert_eq!(
            canonical_json(&a).unwrap(),
            r#"{"skills":[0,17],"name":"Support Agent","nativeId":"hedera:testnet:0.0.123456","protocol":"hcs-10","registry":"hol","version":"1.0.0"}"#
        );
        let same = agent("hol", "Support Agent", "hcs-10", "hedera:testnet:0.0.123456", &[0, 17]);
        assert_eq!(aid_id(&a).unwrap(), aid_id(&same).unwrap(), "normalisation makes equal ids");
        // The id is base58 of 48 bytes.
        let id = aid_id(&a).unwrap();
        assert_eq!(bs58::decode(&id).into_vec().unwrap().len(), 48);
        assert_eq!(
            bs58::decode(&id).into_vec().unwrap(),
            Sha384::digest(canonical_json(&a).unwrap().as_bytes()).to_vec()
        );
        // Any change to the six inputs changes the id; routing does not.
        for change in [
            |x: &mut AgentData| x.name.push('!'),
            |x: &mut AgentData| x.version = "1.0.1".into(),
            |x: &mut AgentData| x.native_id.push('7'),
            |x: &mut AgentData| x.skills.push(4),
        ] {
            let mut b = same.clone();
            change(&mut b);
            assert_ne!(aid_id(&b).unwrap(), id);
        }
        // Names needing JSON escapes.
        a.name = "Agent \"Q\" \\ ü".into();
        assert!(canonical_json(&a).unwrap().contains(r#""name":"Agent \"Q\" \\ ü""#));
    }

    #[test]
    fn agent_data_is_validated() {
        let ok = agent("hol", "n", "a2a", "example.com", &[0, 39, 100, 10102]);
        assert!(aid_id(&ok).is_ok());
        let mut bad = ok.clone();
        bad.name = "  ".into();
        assert_eq!(aid_id(&bad), Err(UaidError::MissingField("name")));
        let mut reserved = ok.clone();
        reserved.skills.push(40);
        assert_eq!(aid_id(&reserved), Err(UaidError::ReservedSkill(40)));
        let full = aid(&ok, Some("my-agent")).unwrap();
        assert_eq!(
            full.to_string(),
            format!("uaid:aid:{};uid=my-agent;registry=hol;proto=a2a;nativeId=example.com", aid_id(&ok).unwrap())
        );
        assert_eq!(full.to_string().parse::<Uaid>().unwrap(), full);
    }
}
