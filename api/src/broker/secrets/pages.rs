//! Programmable Secrets' pages for people (`pages::secrets`): `/secrets`
//! (and `/secrets/page/{page}`) lists the published policies, and
//! `/secrets/{chainId}/{policyId}` is one policy's page. The build's files
//! while the build holds every change of the catalog; made from the store
//! once a change is newer (as the catalog's JSON is: [`super::catalog`]),
//! so a policy published, deactivated or dropped by a reorganisation since
//! the build shows at once (revalidated on every use).

use pages::secrets::{PolicyList, PER_PAGE};
use pages::Made;

use super::{catalog_entries, changed_since_build, policy_not_found, stored};
use crate::reply::{self, Answer, Error};
use crate::request::Request;

/// `GET /secrets` and `/secrets/page/{page}`: a page of the list, a
/// hundred policies in the catalog's order. O(page × 100) rows read.
pub async fn list(request: Request) -> Answer {
    let Some(settings) = changed_since_build(&request)? else { return crate::service::page(request).await };
    let page = match request.params.get("page") {
        "" => 1,
        raw => raw.parse::<usize>().ok().filter(|n| (2..=1_000_000).contains(n)).ok_or_else(|| {
            Error::parameter("page", format!("{}: a page is a whole number from 2", reply::excerpt(raw)))
        })?,
    };
    let offset = (page - 1) * PER_PAGE;
    let (policies, total) = request.app.store.read(move |conn| stored::list(conn, None, PER_PAGE, offset)).await?;
    let total = total as usize;
    if page > 1 && offset >= total {
        return Err(Error::not_found(&request.path));
    }
    let entries = catalog_entries(settings, &policies);
    let last_modified = entries.iter().map(|p| p.last_modified()).max().unwrap_or_default();
    let list = PolicyList { policies: &entries, page, total, last_modified };
    let file = request.build()?.pages.secret_policy_list(&list, Made::Live);
    crate::broker::made_page(&request, file).map(crate::broker::live)
}

/// `GET /secrets/{chainId}/{policyId}`: a policy's page.
pub async fn policy(request: Request) -> Answer {
    let Some(settings) = changed_since_build(&request)? else { return crate::service::page(request).await };
    let number = |name: &'static str| {
        let raw = request.params.get(name);
        raw.parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| Error::parameter(name, format!("{}: a positive whole number", reply::excerpt(raw))))
    };
    let (chain_id, policy_id) = (number("chainId")?, number("policyId")?);
    let found = request.app.store.read(move |conn| stored::published(conn, chain_id, policy_id)).await?;
    let policy = found.ok_or_else(|| policy_not_found(policy_id))?;
    let entry =
        catalog_entries(settings, std::slice::from_ref(&policy)).pop().ok_or_else(|| policy_not_found(policy_id))?;
    let file = request.build()?.pages.secret_policy(&entry, Made::Live);
    crate::broker::made_page(&request, file).map(crate::broker::live)
}
