//! Where each page is served and which file holds it. Route segments are
//! spelled as `encodeURIComponent` spells them ([`canonical`] turns any
//! spelling of a page's path into that one); file names go through
//! [`shared::http::file_name`], so none can climb out of its folder.

use broker_site::render::segment;
use shared::entity::EntityId;
use shared::http::file_name;

pub const LANDING: &str = "/";
pub const TOKENS: &str = "/tokens";
pub const GUARD: &str = "/guard";
pub const CAMPAIGNS: &str = "/guard/campaigns";
pub const COVERAGE: &str = "/guard/coverage";
pub const BENCHMARK: &str = "/guard/benchmark";
pub const AGENTS: &str = "/agents";
pub const SKILLS: &str = "/skills";
/// The agents a search finds, as a page (made by the api).
pub const AGENT_SEARCH: &str = "/agents/search";
/// Programmable Secrets: the policies listed, newest on chain first.
pub const SECRETS: &str = "/secrets";

/// The plugin catalog's page (as the hosted registry's web route).
pub const PLUGINS: &str = "/registry/plugins";

/// A plugin's page, `/registry/plugins/{owner}/{name}`: a slug is lower
/// case letters, digits, `-`, `_` and `.`, two parts (nothing to escape).
pub fn plugin(slug: &str) -> (String, String) {
    let (owner, name) = slug.split_once('/').unwrap_or(("", slug));
    (format!("{PLUGINS}/{slug}"), format!("registry/plugins/{}/{}.html", file_name(owner), file_name(name)))
}

/// A page of the policies' list: the first at `/secrets`, page `n` at
/// `/secrets/page/{n}`.
pub fn secret_policies_page(page: usize) -> (String, String) {
    debug_assert!(page >= 1, "pages count from 1");
    match page {
        1 => (SECRETS.into(), fixed_file(SECRETS)),
        n => (format!("{SECRETS}/page/{n}"), format!("secrets/page/{n}.html")),
    }
}

/// A policy's page, named by its chain and on-chain id (numbers: nothing
/// to escape).
pub fn secret_policy(chain_id: u64, policy_id: u64) -> (String, String) {
    (format!("{SECRETS}/{chain_id}/{policy_id}"), format!("secrets/{chain_id}/{policy_id}.html"))
}

/// A skill's page (a skill's name needs no escaping: lower-case letters,
/// digits and hyphens).
pub fn skill(name: &str) -> String {
    format!("{SKILLS}/{}", segment(name))
}

/// Holders listed per token page (the JSON routes' default page size).
pub const HOLDERS_PER_PAGE: usize = hcs20::analytics::DEFAULT_PAGE_SIZE;
/// A token's page: page 1 of its holders, its charts and recent events;
/// `/holders/{page}` for the next pages.
pub fn token(topic: EntityId, tick: &str, page: usize) -> (String, String) {
    let base = format!("{TOKENS}/{topic}/{}", segment(tick));
    let file = format!("tokens/{topic}/{}", file_name(tick));
    match page {
        1 => (base, format!("{file}.html")),
        n => (format!("{base}/holders/{n}"), format!("{file}/holders/{n}.html")),
    }
}

/// Whether a page can be named for `name` at all: a segment of only dots
/// is a dot-segment to every URL parser, however it is escaped.
pub fn addressable(name: &str) -> bool {
    !name.is_empty() && !name.chars().all(|c| c == '.')
}

pub fn account(id: EntityId) -> (String, String) {
    (format!("/accounts/{id}"), format!("accounts/{id}.html"))
}

/// A page of the agent directory: the first (`None`) at `/agents`, the
/// others named by their key (`crate::agents`: hex digits).
pub fn directory_page(key: Option<String>) -> (String, String) {
    match key {
        None => (AGENTS.into(), "agents.html".into()),
        Some(key) => (format!("{AGENTS}/page/{}", segment(&key)), format!("agents/page/{}.html", file_name(&key))),
    }
}

/// An agent's profile: its route and file.
pub fn agent(uaid: &str) -> (String, String) {
    (agent_route(uaid), format!("agents/{}.html", file_name(uaid)))
}

/// An agent's profile's route (a link to it: no file name hashed).
pub fn agent_route(uaid: &str) -> String {
    format!("{AGENTS}/{}", segment(uaid))
}

/// A fixed page's file: its route's path with `.html`.
pub fn fixed_file(route: &str) -> String {
    match route {
        LANDING => "index.html".into(),
        route => format!("{}.html", route.trim_start_matches('/')),
    }
}

/// The route a page is published under for any spelling of its path:
/// each segment decoded, then encoded as [`segment`] does. `path` is a
/// request path in normal form (escapes decoded but `%2F` and `%25`); a
/// trailing `/` is dropped.
pub fn canonical(path: &str) -> String {
    let path = path.strip_suffix('/').filter(|p| !p.is_empty()).unwrap_or(path);
    if path == LANDING {
        return path.into();
    }
    let segments: Vec<String> = path
        .split('/')
        .skip(1)
        .map(|s| segment(&percent_encoding::percent_decode_str(s).decode_utf8_lossy()))
        .collect();
    format!("/{}", segments.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_and_files() {
        let check = |(route, file): (String, String), expected: (&str, &str)| {
            assert_eq!((route.as_str(), file.as_str()), expected);
        };
        let topic = EntityId::new(0, 0, 1);
        check(token(topic, "pts", 1), ("/tokens/0.0.1/pts", "tokens/0.0.1/pts.html"));
        check(token(topic, "pts", 3), ("/tokens/0.0.1/pts/holders/3", "tokens/0.0.1/pts/holders/3.html"));
        check(token(topic, "a/b", 1), ("/tokens/0.0.1/a%2Fb", "tokens/0.0.1/a%2Fb.html"));
        assert!(addressable("pts") && addressable("a.b") && !addressable("..") && !addressable("."));
        check(account(EntityId::new(0, 0, 7)), ("/accounts/0.0.7", "accounts/0.0.7.html"));
        check(directory_page(None), ("/agents", "agents.html"));
        check(directory_page(Some("00ff".into())), ("/agents/page/00ff", "agents/page/00ff.html"));
        check(agent("uaid:aid:x;uid=1"), ("/agents/uaid%3Aaid%3Ax%3Buid%3D1", "agents/uaid%3Aaid%3Ax%3Buid%3D1.html"));
        check(secret_policies_page(1), ("/secrets", "secrets.html"));
        check(secret_policies_page(2), ("/secrets/page/2", "secrets/page/2.html"));
        check(secret_policy(31337, 4), ("/secrets/31337/4", "secrets/31337/4.html"));
        assert_eq!(fixed_file(LANDING), "index.html");
        assert_eq!(fixed_file(CAMPAIGNS), "guard/campaigns.html");
    }

    #[test]
    fn any_spelling_finds_the_published_route() {
        for (path, expected) in [
            ("/", "/"),
            ("/tokens/", "/tokens"),
            ("/agents/uaid:aid:x;uid=1", "/agents/uaid%3Aaid%3Ax%3Buid%3D1"),
            ("/agents/uaid%3aaid%3ax%3buid%3d1", "/agents/uaid%3Aaid%3Ax%3Buid%3D1"),
            ("/tokens/0.0.1/a%2Fb", "/tokens/0.0.1/a%2Fb"),
            ("/tokens/0.0.1/é", "/tokens/0.0.1/%C3%A9"),
        ] {
            assert_eq!(canonical(path), expected, "{path}");
        }
    }
}
