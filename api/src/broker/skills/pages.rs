//! The skills registry's pages for people (`pages::skills`), rendered from
//! the store on each request: `/skills` (every skill's latest version, or
//! those a search `q` finds) and `/skills/{name}`. Not cached by shared
//! caches: a vote or a new version shows at once.

use pages::skills::{Skill, SkillDetail, SkillFile};
use shared::timestamp::Timestamp;

use super::{enabled, hcs26, shown, versions_of, words, Listing, ALL_VERSIONS};
use crate::broker::inscription::hcs1;
use crate::reply::Answer;
use crate::request::Request;
use crate::store::skills::{self as stored, Filter, Job};
use crate::store::{self};

/// Skills a list page shows at most.
const LISTED: usize = 200;

fn skill(job: &Job, listing: &Listing, verified: bool, upvotes: u64) -> Skill {
    Skill {
        name: job.name.clone(),
        version: job.version.clone(),
        description: listing.description.clone(),
        tags: listing.tags.clone(),
        publisher: job.account.clone(),
        verified,
        upvotes,
        published: store::rfc3339(job.created_at),
    }
}

fn listing(job: &Job) -> Result<Listing, store::Failure> {
    serde_json::from_str(&job.listing).map_err(|e| store::Failure::Corrupt(format!("skill job {}: {e}", job.id)))
}

fn at(ms: i64) -> Timestamp {
    Timestamp(ms.max(0) as u64 * 1_000_000)
}

/// `GET /skills`: the list, or what `q` finds.
pub async fn list(request: Request) -> Answer {
    enabled(&request)?;
    let query = request.query_value("q")?.unwrap_or_default();
    let filter = Filter { words: words(&query), ..Filter::default() };
    let skills = request
        .app
        .store
        .read(move |conn| {
            let jobs = stored::published(conn, &filter, None, LISTED)?;
            jobs.iter()
                .map(|job| {
                    let verified = stored::name(conn, &job.name)?.is_some_and(|n| n.verified);
                    let (upvotes, _) = stored::votes(conn, &job.name, None)?;
                    Ok((job.created_at, skill(job, &listing(job)?, verified, upvotes)))
                })
                .collect::<Result<Vec<_>, store::Failure>>()
        })
        .await?;
    let newest = skills.iter().map(|(t, _)| *t).max().unwrap_or(0);
    let list: Vec<Skill> = skills.into_iter().map(|(_, s)| s).collect();
    let build = request.build()?;
    crate::broker::made_page(&request, build.pages.skills(&list, query.trim(), at(newest)))
}

/// `GET /skills/{name}`: its latest version, files and versions.
pub async fn page(request: Request) -> Answer {
    let (skills, _) = enabled(&request)?;
    let name = request.params.get("name").to_string();
    let versions = versions_of(&request, &name, ALL_VERSIONS).await?;
    let latest = shown(&request, vec![versions[0].clone()]).await?.remove(0);
    let detail = SkillDetail {
        skill: skill(&latest.job, &latest.listing, latest.verified(), latest.upvotes),
        license: latest.listing.license.clone().unwrap_or_else(|| hcs26::UNLICENSED.into()),
        directory_topic: super::directory(skills)?,
        version_topic: latest.name.as_ref().and_then(|n| n.version_topic.clone()).unwrap_or_default(),
        uid: latest.name.as_ref().and_then(|n| n.skill_uid),
        manifest_hrl: latest.manifest_hrl(),
        files: latest
            .listing
            .files
            .iter()
            .map(|f| SkillFile {
                name: f.name.clone(),
                mime: f.mime.clone(),
                role: f.role.clone(),
                hrl: latest.topic(&f.part).map(hcs1::hrl),
            })
            .collect(),
        versions: versions.iter().map(|j| (j.version.clone(), store::rfc3339(j.created_at))).collect(),
    };
    let build = request.build()?;
    crate::broker::made_page(&request, build.pages.skill(&detail, at(latest.job.updated_at)))
}
