//! The skills registry's pages: the list of published skills (with a
//! search), and each skill's page (its latest version, its files on the
//! ledger, its versions). The api renders them live from its store, as it
//! does an agent changed since the build; a build has none.

use minijinja::context;
use serde::Serialize;
use shared::http::Cache;
use shared::timestamp::Timestamp;

use crate::{routes, Made, Page};

/// A published skill as a list shows it.
#[derive(Clone, Debug, Serialize)]
pub struct Skill {
    pub name: String,
    /// Its latest version.
    pub version: String,
    pub description: String,
    pub tags: Vec<String>,
    pub publisher: String,
    pub verified: bool,
    pub upvotes: u64,
    /// When the latest version was published (RFC 3339).
    pub published: String,
}

/// A file of a version, where it is on the ledger.
#[derive(Clone, Debug, Serialize)]
pub struct SkillFile {
    pub name: String,
    pub mime: String,
    pub role: String,
    pub hrl: Option<String>,
}

/// A skill's page.
#[derive(Clone, Debug, Serialize)]
pub struct SkillDetail {
    pub skill: Skill,
    pub license: String,
    pub directory_topic: String,
    pub version_topic: String,
    pub uid: Option<i64>,
    pub manifest_hrl: Option<String>,
    pub files: Vec<SkillFile>,
    /// (version, published), newest first.
    pub versions: Vec<(String, String)>,
}

pub(super) fn list(skills: &[Skill], query: &str, last_modified: Timestamp) -> Page {
    let rows: Vec<minijinja::Value> = skills.iter().map(|s| context! { s, route => routes::skill(&s.name) }).collect();
    Page {
        route: routes::SKILLS.into(),
        file: routes::fixed_file(routes::SKILLS),
        template: "skills.html",
        context: context! { rows, query },
        json: Some("/api/v1/skills".into()),
        last_modified,
        cache: Cache::NoStore,
        made: Made::Live,
    }
}

pub(super) fn detail(detail: &SkillDetail, last_modified: Timestamp) -> Page {
    let route = routes::skill(&detail.skill.name);
    Page {
        file: format!("{}.html", route.trim_start_matches('/')),
        json: Some(format!("/api/v1/skills?name={}", detail.skill.name)),
        route,
        template: "skill.html",
        context: context! { d => detail },
        last_modified,
        cache: Cache::NoStore,
        made: Made::Live,
    }
}
