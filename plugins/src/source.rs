//! Where a plugin comes from, as marketplace files write it (Codex's
//! `.agents/plugins/marketplace.json`, Claude Code's
//! `.claude-plugin/marketplace.json`): a path inside the marketplace's own
//! repository, or a repository elsewhere at a pinned commit.
//!
//! Only sources that name a commit are imported: a branch moves, and a
//! version must be the same files whenever it is fetched again. Git URLs
//! are read for GitHub only (`https://github.com/owner/repo[.git]`, or the
//! `owner/repo` shorthand), since a repository is fetched as the archive
//! its forge serves of a commit; other hosts and npm packages are refused
//! with the reason.

use serde_json::{Map, Value};

/// A GitHub repository, as `owner/repo` (the case it was written in).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Repository {
    pub owner: String,
    pub repo: String,
}

impl Repository {
    /// `owner/repo`, a GitHub URL (`https://github.com/owner/repo`, with
    /// `.git` or a trailing `/`), or `None`.
    pub fn parse(text: &str) -> Option<Repository> {
        let text = text.trim();
        let path = ["https://github.com/", "http://github.com/", "git@github.com:", "github.com/"]
            .iter()
            .find_map(|prefix| text.strip_prefix(prefix))
            .unwrap_or(text);
        let path = path.trim_end_matches('/');
        let path = path.strip_suffix(".git").unwrap_or(path);
        let (owner, repo) = path.split_once('/')?;
        let valid = |part: &str| {
            !part.is_empty()
                && part.len() <= 100
                && part != "."
                && part != ".."
                && part.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        (valid(owner) && valid(repo)).then(|| Repository { owner: owner.to_string(), repo: repo.to_string() })
    }

    /// `owner/repo` lowercased: GitHub's names are case-insensitive.
    pub fn key(&self) -> String {
        format!("{}/{}", self.owner, self.repo).to_ascii_lowercase()
    }
}

/// A commit id: 40 hex digits (SHA-1), or 64 (SHA-256 repositories).
pub fn is_commit(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A marketplace entry's source, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A folder of the marketplace's own repository (`./plugins/x`),
    /// normalised, without `./`.
    Local(String),
    /// A repository at a commit, and the plugin's folder in it (`""`: its root).
    Remote { repository: Repository, commit: String, path: String },
}

/// Why a source is not imported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceError {
    /// A shape this importer does not fetch (an npm package, a git host
    /// other than GitHub), named.
    Unsupported(String),
    /// A remote source with no commit (a branch or tag only).
    Unpinned,
    /// A path that is absolute, climbs out or lacks its `./`.
    Path(String),
    Malformed(String),
}

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceError::Unsupported(what) => write!(f, "{what} is not a source this broker imports"),
            SourceError::Unpinned => write!(f, "the source names no commit (`sha`, 40 or 64 hex digits)"),
            SourceError::Path(path) => write!(f, "{path:?} is not a `./` path inside the repository"),
            SourceError::Malformed(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for SourceError {}

/// A relative path as marketplaces write them (`./x/y`), normalised; `./`
/// alone is the root.
pub fn relative_path(text: &str) -> Result<String, SourceError> {
    let refused = || SourceError::Path(text.to_string());
    let rest = text.strip_prefix("./").ok_or_else(refused)?;
    if rest.split('/').any(|part| part == "..") {
        return Err(refused());
    }
    crate::tree::normalize(rest).ok_or_else(refused)
}

/// A path inside a repository as a remote source writes it (with or
/// without `./`), normalised.
fn inner_path(text: &str) -> Result<String, SourceError> {
    let refused = || SourceError::Path(text.to_string());
    if text.starts_with('/') || text.split('/').any(|part| part == "..") {
        return Err(refused());
    }
    crate::tree::normalize(text).ok_or_else(refused)
}

impl Source {
    /// A marketplace entry's `source`: a bare `./` path, or an object
    /// tagged by `source` (`local`, `url`, `git-subdir`, `github`).
    pub fn parse(value: &Value) -> Result<Source, SourceError> {
        let object = match value {
            Value::String(path) => return Ok(Source::Local(relative_path(path)?)),
            Value::Object(object) => object,
            _ => return Err(SourceError::Malformed("`source` is neither a path nor an object".into())),
        };
        let text = |key: &str| object.get(key).and_then(Value::as_str);
        let remote = |repository: &str, path: Option<&str>| -> Result<Source, SourceError> {
            let repository =
                Repository::parse(repository).ok_or_else(|| SourceError::Unsupported(format!("{repository:?}")))?;
            let commit = text("sha").filter(|sha| is_commit(sha)).ok_or(SourceError::Unpinned)?;
            let path = match path {
                Some(path) => inner_path(path)?,
                None => String::new(),
            };
            Ok(Source::Remote { repository, commit: commit.to_ascii_lowercase(), path })
        };
        match text("source") {
            Some("local") => Ok(Source::Local(relative_path(text("path").unwrap_or_default())?)),
            Some("url") => remote(text("url").ok_or_else(|| missing("url"))?, text("path")),
            Some("git-subdir") => {
                remote(text("url").ok_or_else(|| missing("url"))?, Some(text("path").ok_or_else(|| missing("path"))?))
            }
            Some("github") => remote(text("repo").ok_or_else(|| missing("repo"))?, text("path")),
            Some(other) => Err(SourceError::Unsupported(format!("a `{other}` source"))),
            None => Err(missing("source")),
        }
    }
}

fn missing(key: &str) -> SourceError {
    SourceError::Malformed(format!("the source has no `{key}`"))
}

/// A marketplace file's entries: each plugin's name, source and category
/// (which overrides the manifest's), in the file's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: Option<String>,
    pub source: Result<Source, SourceError>,
    pub category: Option<String>,
}

/// The entries of a marketplace file (`plugins[]`); `Err` when the file
/// is not an object with a `plugins` array.
pub fn marketplace_entries(marketplace: &Map<String, Value>) -> Result<Vec<Entry>, SourceError> {
    let plugins = marketplace
        .get("plugins")
        .and_then(Value::as_array)
        .ok_or_else(|| SourceError::Malformed("the marketplace has no `plugins` array".into()))?;
    Ok(plugins
        .iter()
        .map(|entry| {
            let text = |key: &str| entry.get(key).and_then(Value::as_str).map(str::to_string);
            Entry {
                name: text("name"),
                source: entry.get("source").map_or(Err(missing("source")), Source::parse),
                category: text("category"),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn sources_read_as_marketplaces_write_them() {
        let remote = |owner: &str, repo: &str, path: &str| Source::Remote {
            repository: Repository { owner: owner.into(), repo: repo.into() },
            commit: SHA.into(),
            path: path.into(),
        };
        let cases: Vec<(Value, Result<Source, SourceError>)> = vec![
            (json!("./plugins/a"), Ok(Source::Local("plugins/a".into()))),
            (json!("./"), Ok(Source::Local(String::new()))),
            (json!("plugins/a"), Err(SourceError::Path("plugins/a".into()))),
            (json!("./a/../../b"), Err(SourceError::Path("./a/../../b".into()))),
            (json!({"source": "local", "path": "./x"}), Ok(Source::Local("x".into()))),
            (json!({"source": "url", "url": "https://github.com/o/r.git", "sha": SHA}), Ok(remote("o", "r", ""))),
            (
                json!({"source": "git-subdir", "url": "https://github.com/o/r", "path": "p/q", "sha": SHA}),
                Ok(remote("o", "r", "p/q")),
            ),
            (json!({"source": "github", "repo": "o/r", "sha": SHA.to_uppercase()}), Ok(remote("o", "r", ""))),
            (json!({"source": "github", "repo": "o/r", "ref": "main"}), Err(SourceError::Unpinned)),
            (json!({"source": "github", "repo": "o/r", "sha": "abc"}), Err(SourceError::Unpinned)),
            (
                json!({"source": "git-subdir", "url": "https://github.com/o/r", "path": "../x", "sha": SHA}),
                Err(SourceError::Path("../x".into())),
            ),
            (
                json!({"source": "url", "url": "https://gitlab.com/o/r.git", "sha": SHA}),
                Err(SourceError::Unsupported("\"https://gitlab.com/o/r.git\"".into())),
            ),
            (json!({"source": "npm", "package": "x"}), Err(SourceError::Unsupported("a `npm` source".into()))),
            (json!({"url": "x"}), Err(SourceError::Malformed("the source has no `source`".into()))),
            (json!(7), Err(SourceError::Malformed("`source` is neither a path nor an object".into()))),
        ];
        for (value, expected) in cases {
            assert_eq!(Source::parse(&value), expected, "{value}");
        }
    }

    #[test]
    fn repositories_are_github_names() {
        let cases = [
            ("o/r", Some(("o", "r"))),
            ("https://github.com/Owner/Repo.git", Some(("Owner", "Repo"))),
            ("https://github.com/o/r/", Some(("o", "r"))),
            ("git@github.com:o/r.git", Some(("o", "r"))),
            ("o/r/x", None),
            ("o", None),
            ("../r", None),
            ("o/r?x", None),
        ];
        for (text, expected) in cases {
            let got = Repository::parse(text);
            assert_eq!(got.as_ref().map(|r| (r.owner.as_str(), r.repo.as_str())), expected, "{text}");
        }
        assert_eq!(Repository::parse("Owner/Repo").unwrap().key(), "owner/repo");
    }
}
