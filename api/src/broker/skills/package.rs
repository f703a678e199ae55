//! A skill package as a publisher sends it (`POST /skills/quote` and
//! `/skills/publish`: `files: [{name, base64, mimeType?, role?}]`), read
//! and checked before anything is priced or written: its `skill.json`
//! (the skill's name, semantic version, description, tags, license and
//! author, which HCS-26's directory entry and manifest carry), its
//! `SKILL.md`, an optional icon and other files, within the registry's
//! bounds. Pure: no store, no network.

use base64::Engine as _;
use serde::Deserialize;

shared::vocabulary! {
    /// What a file is to the skill: `skill-md` (its `SKILL.md`),
    /// `skill-json` (its manifest), `skill-icon`, or any other `file`.
    Role, ROLES {
        SkillMd = "skill-md",
        SkillJson = "skill-json",
        SkillIcon = "skill-icon",
        File = "file",
    }
}

/// The registry's bounds on a package.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub max_files: usize,
    pub max_total_bytes: usize,
}

/// A file as sent.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Sent {
    pub name: String,
    pub base64: String,
    #[serde(default)]
    pub mime_type: Option<String>,
    #[serde(default)]
    pub role: Option<String>,
}

/// A file read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct File {
    pub name: String,
    pub mime: String,
    pub role: Role,
    pub bytes: Vec<u8>,
}

/// A package read and checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Package {
    pub name: String,
    pub version: semver::Version,
    pub description: String,
    pub tags: Vec<String>,
    pub category: Option<String>,
    /// `None`: the manifest names none (written `UNLICENSED`).
    pub license: Option<String>,
    /// `None`: the publisher is the author.
    pub author: Option<String>,
    /// In the order sent.
    pub files: Vec<File>,
}

/// Why a package is refused: the field at fault and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct Refused {
    pub field: String,
    pub message: String,
}

fn refused(field: impl Into<String>, message: impl Into<String>) -> Refused {
    Refused { field: field.into(), message: message.into() }
}

/// Whether `name` is a skill name: 1 to 64 lower-case letters, digits
/// and single hyphens, a letter or digit at each end.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// The role a file takes when its sender names none.
fn role_of(name: &str) -> Role {
    let lower = name.to_ascii_lowercase();
    match lower.as_str() {
        "skill.md" => Role::SkillMd,
        "skill.json" => Role::SkillJson,
        _ if lower.starts_with("icon.") => Role::SkillIcon,
        _ => Role::File,
    }
}

/// The mime type a file takes when its sender names none.
fn mime_of(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, ext)| ext.to_ascii_lowercase()).as_deref() {
        Some("md") => "text/markdown",
        Some("json") => "application/json",
        Some("png") => "image/png",
        Some("svg") => "image/svg+xml",
        Some("txt") => "text/plain",
        Some("py") => "text/x-python",
        Some("js" | "mjs") => "text/javascript",
        Some("ts") => "text/x-typescript",
        _ => "application/octet-stream",
    }
}

/// The manifest's fields the registry reads.
#[derive(Deserialize)]
struct Manifest {
    name: Option<String>,
    version: Option<String>,
    description: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    category: Option<String>,
    license: Option<String>,
    author: Option<String>,
}

/// The bytes of a manifest's text field, at most: the directory entry
/// that carries them is one consensus message.
pub const DESCRIPTION_MAX: usize = 500;
const SHORT_MAX: usize = 100;

/// `text` trimmed, if it is not empty: at most `max` bytes, with no
/// control characters but line breaks and tabs.
fn bounded(field: &str, text: Option<String>, max: usize) -> Result<Option<String>, Refused> {
    let control = |c: char| c.is_control() && !matches!(c, '\n' | '\r' | '\t');
    match text.map(|t| t.trim().to_string()).filter(|t| !t.is_empty()) {
        Some(t) if t.len() > max || t.chars().any(control) => {
            Err(refused(field, format!("at most {max} bytes, without control characters")))
        }
        other => Ok(other),
    }
}

/// Reads `sent` as a package within `bounds`.
pub fn read(sent: &[Sent], bounds: Bounds) -> Result<Package, Refused> {
    if sent.is_empty() {
        return Err(refused("files", "send the skill's files: at least skill.json and SKILL.md"));
    }
    if sent.len() > bounds.max_files {
        return Err(refused("files", format!("at most {} files", bounds.max_files)));
    }
    let mut files: Vec<File> = Vec::with_capacity(sent.len());
    let mut total = 0usize;
    for (n, file) in sent.iter().enumerate() {
        let at = |field: &str| format!("files[{n}].{field}");
        let name = file.name.trim();
        let safe = !name.is_empty()
            && name.len() <= 128
            && !name.contains(['/', '\\'])
            && name != "."
            && name != ".."
            && !name.chars().any(char::is_control);
        if !safe {
            return Err(refused(at("name"), "a file name without folders, 1 to 128 characters"));
        }
        if files.iter().any(|f| f.name.eq_ignore_ascii_case(name)) {
            return Err(refused(at("name"), format!("{name} is sent twice")));
        }
        let role = match file.role.as_deref() {
            None => role_of(name),
            Some(text) => {
                text.parse().map_err(|_| refused(at("role"), format!("expected one of {}", ROLES.join(", "))))?
            }
        };
        // Four characters for three bytes: refused before decoding.
        if (total + file.base64.len() / 4 * 3).saturating_sub(3) > bounds.max_total_bytes {
            return Err(refused("files", format!("the files come to more than {} bytes", bounds.max_total_bytes)));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(file.base64.trim())
            .map_err(|_| refused(at("base64"), "not base64"))?;
        total += bytes.len();
        if total > bounds.max_total_bytes {
            return Err(refused("files", format!("the files come to more than {} bytes", bounds.max_total_bytes)));
        }
        let mime = file.mime_type.clone().unwrap_or_else(|| mime_of(name).to_string());
        files.push(File { name: name.to_string(), mime, role, bytes });
    }
    let only = |role: Role| -> Result<&File, Refused> {
        let mut of = files.iter().filter(|f| f.role == role);
        match (of.next(), of.next()) {
            (Some(file), None) => Ok(file),
            (None, _) => Err(refused("files", format!("no {} file", role.as_str()))),
            (Some(_), Some(_)) => Err(refused("files", format!("more than one {} file", role.as_str()))),
        }
    };
    only(Role::SkillMd)?;
    if files.iter().filter(|f| f.role == Role::SkillIcon).count() > 1 {
        return Err(refused("files", "more than one skill-icon file"));
    }
    let manifest: Manifest = serde_json::from_slice(&only(Role::SkillJson)?.bytes)
        .map_err(|e| refused("skill.json", format!("not JSON: {e}")))?;
    let name = manifest.name.map(|n| n.trim().to_string()).unwrap_or_default();
    if !valid_name(&name) {
        return Err(refused("skill.json.name", "1 to 64 lower-case letters, digits and single hyphens"));
    }
    let version = manifest.version.unwrap_or_default();
    let version = semver::Version::parse(version.trim())
        .map_err(|_| refused("skill.json.version", format!("{version:?} is not a semantic version (1.2.3)")))?;
    if manifest.tags.len() > 20 || manifest.tags.iter().any(|t| t.trim().is_empty() || t.len() > 40) {
        return Err(refused("skill.json.tags", "at most 20 tags of 1 to 40 characters"));
    }
    let description = bounded("skill.json.description", manifest.description, DESCRIPTION_MAX)?
        .ok_or_else(|| refused("skill.json.description", "say what the skill does (1 to 500 bytes)"))?;
    Ok(Package {
        name,
        version,
        description,
        tags: manifest.tags.iter().map(|t| t.trim().to_string()).collect(),
        category: bounded("skill.json.category", manifest.category, SHORT_MAX)?,
        license: bounded("skill.json.license", manifest.license, SHORT_MAX)?,
        author: bounded("skill.json.author", manifest.author, SHORT_MAX)?,
        files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(name: &str, text: &str) -> Sent {
        Sent {
            name: name.into(),
            base64: base64::engine::general_purpose::STANDARD.encode(text),
            mime_type: None,
            role: None,
        }
    }

    const BOUNDS: Bounds = Bounds { max_files: 4, max_total_bytes: 2048 };

    fn manifest(name: &str, version: &str) -> Sent {
        let text =
            format!(r#"{{"name": "{name}", "version": "{version}", "description": "Finds", "tags": ["search"]}}"#);
        sent("skill.json", &text)
    }

    #[test]
    fn a_package_reads_its_manifest_and_gives_each_file_its_role() {
        let package =
            read(&[manifest("web-search", "1.2.0"), sent("SKILL.md", "# Web search"), sent("icon.png", "x")], BOUNDS)
                .unwrap();
        assert_eq!((package.name.as_str(), package.version.to_string().as_str()), ("web-search", "1.2.0"));
        let roles: Vec<(Role, &str)> = package.files.iter().map(|f| (f.role, f.mime.as_str())).collect();
        assert_eq!(
            roles,
            [(Role::SkillJson, "application/json"), (Role::SkillMd, "text/markdown"), (Role::SkillIcon, "image/png")]
        );
        assert_eq!(package.tags, ["search"]);
    }

    #[test]
    fn refusals_name_the_field() {
        let md = || sent("SKILL.md", "# A skill");
        let cases: Vec<(Vec<Sent>, &str)> = vec![
            (vec![], "files"),
            (vec![md()], "files"),
            (vec![manifest("a", "1.0.0")], "files"),
            (vec![manifest("Web Search", "1.0.0"), md()], "skill.json.name"),
            (vec![manifest("web--search", "1.0.0"), md()], "skill.json.name"),
            (vec![manifest("web-search", "1.0"), md()], "skill.json.version"),
            (vec![sent("skill.json", "{"), md()], "skill.json"),
            (vec![sent("skill.json", r#"{"name": "a", "version": "1.0.0"}"#), md()], "skill.json.description"),
            (
                vec![
                    sent(
                        "skill.json",
                        &format!(r#"{{"name": "a", "version": "1.0.0", "description": "{}"}}"#, "x".repeat(501)),
                    ),
                    md(),
                ],
                "skill.json.description",
            ),
            (
                vec![
                    sent(
                        "skill.json",
                        r#"{"name": "a", "version": "1.0.0", "description": "d", "license": "a\u0007"}"#,
                    ),
                    md(),
                ],
                "skill.json.license",
            ),
            (vec![manifest("a", "1.0.0"), md(), sent("skill.md", "again")], "files[2].name"),
            (vec![manifest("a", "1.0.0"), md(), sent("../x", "y")], "files[2].name"),
            (
                vec![manifest("a", "1.0.0"), md(), Sent { role: Some("readme".into()), ..sent("x", "y") }],
                "files[2].role",
            ),
            (vec![manifest("a", "1.0.0"), md(), sent("big.txt", &"x".repeat(3000))], "files"),
            (vec![manifest("a", "1.0.0"), md(), sent("1", ""), sent("2", ""), sent("3", "")], "files"),
        ];
        for (files, field) in cases {
            let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
            assert_eq!(read(&files, BOUNDS).unwrap_err().field, field, "{names:?}");
        }
    }

    #[test]
    fn names_and_versions_order_as_semver_says() {
        for (name, valid) in
            [("a", true), ("web-search-2", true), ("-a", false), ("a-", false), ("A", false), ("", false)]
        {
            assert_eq!(valid_name(name), valid, "{name:?}");
        }
        let v = |t: &str| semver::Version::parse(t).unwrap();
        assert!(v("1.0.0-alpha") < v("1.0.0"));
        assert!(v("1.10.0") > v("1.9.3"));
    }
}
