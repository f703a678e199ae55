//! What the registry writes, as HCS-26 (decentralised agent skills) lays
//! it out, in the forms the standards SDK's resolver reads:
//!
//! - the **directory** (discovery) topic, memo `hcs-26:0:86400:0`: one
//!   `register` entry per skill, `{p, op, t_id: <its version topic>,
//!   account_id, metadata: {name, description, author, license, …}}`;
//!   the entry's sequence number is the skill's uid;
//! - a skill's **version** topic, memo `hcs-26:0:86400:1`: one `register`
//!   entry per version, `{p, op, skill_uid, version, t_id: <manifest's
//!   HCS-1 topic>, checksum: "sha256:<manifest's hash>", status}`;
//! - the **manifest**, an HCS-1 file of `application/json`: the skill's
//!   metadata and `files: [{path, hrl, sha256, mime}]`, `SKILL.md` among
//!   them.
//!
//! Each entry is one consensus message, and its transaction's memo names
//! the operation (`hcs-26:op:<operation>:<topic type>`). Pure.

use serde_json::{json, Value};

use super::package::Package;

pub const DIRECTORY_MEMO: &str = "hcs-26:0:86400:0";
pub const VERSIONS_MEMO: &str = "hcs-26:0:86400:1";
/// The transaction memo of a `register` on the directory.
pub const REGISTER_SKILL: &str = "hcs-26:op:0:0";
/// The transaction memo of a `register` on a version topic.
pub const REGISTER_VERSION: &str = "hcs-26:op:0:1";
/// What a manifest names as its license when the package names none.
pub const UNLICENSED: &str = "UNLICENSED";

/// A file as the manifest lists it.
pub struct Written<'a> {
    pub path: &'a str,
    pub topic: &'a str,
    /// SHA-256, hex.
    pub sha256: &'a str,
    pub mime: &'a str,
}

/// What the directory entry says of a skill (what fits one message; the
/// manifest says the rest).
fn metadata(package: &Package, publisher: &str) -> Value {
    json!({
        "name": package.name,
        "description": package.description,
        "author": package.author.as_deref().unwrap_or(publisher),
        "license": package.license.as_deref().unwrap_or(UNLICENSED),
    })
}

/// The manifest of `package`'s version, its files written as `written`.
pub fn manifest(package: &Package, publisher: &str, written: &[Written<'_>]) -> Vec<u8> {
    let mut manifest = metadata(package, publisher);
    // HCS-26's `tags` are numbered categories; the package's words go
    // beside them.
    if !package.tags.is_empty() {
        manifest["keywords"] = json!(package.tags);
    }
    if let Some(category) = &package.category {
        manifest["category"] = json!(category);
    }
    manifest["version"] = json!(package.version.to_string());
    manifest["files"] = written
        .iter()
        .map(|w| json!({"path": w.path, "hrl": format!("hcs://1/{}", w.topic), "sha256": w.sha256, "mime": w.mime}))
        .collect();
    serde_json::to_vec(&manifest).expect("a manifest serialises")
}

/// The directory entry of a skill whose versions are on `version_topic`.
pub fn register_skill(package: &Package, publisher: &str, version_topic: &str) -> Vec<u8> {
    let entry = json!({
        "p": "hcs-26",
        "op": "register",
        "t_id": version_topic,
        "account_id": publisher,
        "metadata": metadata(package, publisher),
    });
    serde_json::to_vec(&entry).expect("an entry serialises")
}

/// The version topic's entry of `version`, whose manifest is the HCS-1
/// file on `manifest_topic` with SHA-256 `manifest_sha256`.
pub fn register_version(uid: i64, version: &str, manifest_topic: &str, manifest_sha256: &str) -> Vec<u8> {
    let entry = json!({
        "p": "hcs-26",
        "op": "register",
        "skill_uid": uid,
        "version": version,
        "t_id": manifest_topic,
        "checksum": format!("sha256:{manifest_sha256}"),
        "status": "active",
    });
    serde_json::to_vec(&entry).expect("an entry serialises")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::inscription::hcs1::MESSAGE_MAX;
    use crate::broker::skills::package::{File, Role, DESCRIPTION_MAX};

    fn package(description: &str) -> Package {
        Package {
            name: "a".repeat(64),
            version: semver::Version::parse("1.2.3-beta.1").unwrap(),
            description: description.into(),
            tags: vec!["search".into()],
            category: None,
            license: Some("x".repeat(100)),
            author: Some("y".repeat(100)),
            files: vec![File {
                name: "SKILL.md".into(),
                mime: "text/markdown".into(),
                role: Role::SkillMd,
                bytes: vec![],
            }],
        }
    }

    #[test]
    fn entries_fit_one_message_and_read_as_the_sdk_reads_them() {
        // The largest fields a package may have, of plain text (one that
        // JSON escapes is measured when it is sent: `super::entry_fits`).
        let worst = package(&"d".repeat(DESCRIPTION_MAX));
        let entry = register_skill(&worst, "0.0.1001", "0.0.9999999999");
        assert!(entry.len() <= MESSAGE_MAX, "{} bytes", entry.len());
        let read: Value = serde_json::from_slice(&entry).unwrap();
        assert_eq!(
            (read["p"].as_str(), read["op"].as_str(), read["t_id"].as_str()),
            (Some("hcs-26"), Some("register"), Some("0.0.9999999999"))
        );
        let version = register_version(7, "1.2.3-beta.1", "0.0.5001", &"ab".repeat(32));
        let read: Value = serde_json::from_slice(&version).unwrap();
        assert_eq!(read["skill_uid"], 7);
        assert_eq!(read["checksum"].as_str().unwrap().len(), "sha256:".len() + 64);
        let written = [Written { path: "SKILL.md", topic: "0.0.5002", sha256: "00", mime: "text/markdown" }];
        let manifest: Value = serde_json::from_slice(&manifest(&package("finds"), "0.0.1001", &written)).unwrap();
        assert_eq!(manifest["files"][0]["hrl"], "hcs://1/0.0.5002");
        assert_eq!(manifest["version"], "1.2.3-beta.1");
        assert_eq!(manifest["keywords"], json!(["search"]));
    }
}
