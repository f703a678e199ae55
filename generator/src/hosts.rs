//! Configurations for static hosts, made from a build's manifest and
//! written into the build beside its files (not routes of it):
//!
//! - `_nginx.conf`: maps and a `server` block with which nginx serves the
//!   build as the api does: each route's file, content type, cache policy,
//!   CORS, the manifest's strong ETag and Last-Modified, and 304s;
//! - `_headers` and `_redirects` for Netlify and Cloudflare Pages:
//!   content types, cache policies and CORS by path, and rewrites from
//!   routes to the files that hold them;
//! - a [`Report`] of each host's limits against the build: how many files,
//!   rules and what the host cannot serve at all, by kind of route, so an
//!   operator knows what to leave to the api.
//!
//! Pure: the caller writes the files.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use shared::manifest::{Entry, Manifest};

/// Names of the files written into a build.
pub const NGINX: &str = "_nginx.conf";
pub const HEADERS: &str = "_headers";
pub const REDIRECTS: &str = "_redirects";
pub const NETLIFY: &str = "netlify.toml";

/// What a host configuration needs besides the manifest.
#[derive(Clone, Debug)]
pub struct Options {
    /// nginx's `listen` (default `80`).
    pub nginx_listen: Option<String>,
    /// Where nginx sends what the build does not hold (the api, say
    /// `127.0.0.1:4000`); none: a JSON 404.
    pub nginx_api: Option<String>,
    /// The most routes a build may have and still get configurations.
    /// They are made in memory, about 2 KB per route (every spelling of
    /// every route, by kind and by case-folded key), and no host takes
    /// rules for millions of routes; a larger build gets none, and says so
    /// ([`Report::skipped`]).
    pub max_routes: usize,
}

/// [`Options::max_routes`] unless configured.
pub const MAX_ROUTES: usize = 500_000;

impl Default for Options {
    fn default() -> Options {
        Options { nginx_listen: None, nginx_api: None, max_routes: MAX_ROUTES }
    }
}

/// The host configurations of a build, and what they could not say.
pub struct Configs {
    pub nginx: String,
    pub headers: String,
    pub redirects: String,
    pub netlify: String,
    pub report: Report,
}

impl Configs {
    /// Each file's name and bytes (none when skipped).
    pub fn files(&self) -> Vec<(&'static str, &[u8])> {
        match self.report.skipped {
            Some(_) => Vec::new(),
            None => vec![
                (NGINX, self.nginx.as_bytes()),
                (HEADERS, self.headers.as_bytes()),
                (REDIRECTS, self.redirects.as_bytes()),
                (NETLIFY, self.netlify.as_bytes()),
            ],
        }
    }
}

/// Makes every configuration for `manifest`, the build living in `root`;
/// none (an empty [`Configs`] whose report says why) for a build of more
/// than [`Options::max_routes`] routes.
pub fn configure(manifest: &Manifest, root: &std::path::Path, options: &Options) -> Configs {
    if manifest.routes.len() > options.max_routes {
        let why = format!(
            "{} routes, more than the {} the configurations are made for (--host-configs-max-routes)",
            manifest.routes.len(),
            options.max_routes
        );
        let report = Report { files: manifest.routes.len() + 2, hosts: Vec::new(), skipped: Some(why) };
        return Configs {
            nginx: String::new(),
            headers: String::new(),
            redirects: String::new(),
            netlify: String::new(),
            report,
        };
    }
    let kinds = kinds(manifest);
    let (nginx, unmapped) = nginx(manifest, &kinds, root, options);
    let (headers, header_rules) = headers(manifest);
    let (redirects, netlify, rules) = redirects(manifest, &kinds);
    let report = Report::new(manifest, &kinds, &rules, header_rules, &unmapped);
    Configs { nginx, headers, redirects, netlify, report }
}

/// A route's path, percent-decoded as a server decodes a request's.
fn decoded(path: &str) -> String {
    percent_encoding::percent_decode_str(path).decode_utf8_lossy().into_owned()
}

/// A spelling of a route (`path` or `path?query`) as a server reads the
/// request: the path percent-decoded, the query as sent.
fn decoded_spelling(spelling: &str) -> String {
    match split(spelling) {
        (path, Some(query)) => format!("{}?{query}", decoded(path)),
        (path, None) => decoded(path),
    }
}

/// A file name's extension (none: empty).
fn extension(file: &str) -> &str {
    file.rsplit_once('.').map_or("", |(_, x)| x)
}

/// Text as an nginx double-quoted string.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if matches!(c, '"' | '\\' | '$') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// The other spellings of a section C query route that the api answers
/// with the same file (parameters left at their defaults), each as
/// `path?query` or `path`.
fn spellings(route: &str) -> Vec<String> {
    use hcs20::routes::{Limits, Route};
    let (path, Some(canonical)) = split(route) else { return Vec::new() };
    let pairs: Vec<&str> = canonical.split('&').collect();
    let mut out = Vec::new();
    // Every subset of the parameters, in the canonical order.
    for mask in 0..(1u32 << pairs.len()) {
        let kept: Vec<&str> = pairs.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, p)| *p).collect();
        let query = kept.join("&");
        let same = Route::parse(path, &query, Limits::default()).ok().flatten().is_some_and(|r| r.canonical() == route);
        if same && query != canonical {
            out.push(if query.is_empty() { path.to_string() } else { format!("{path}?{query}") });
        }
    }
    out
}

/// The nginx configuration: maps from the request to the route's entry
/// (`file|etag|last-modified|class|key`), the entry split into variables,
/// the preconditions evaluated against the manifest's validators, and a
/// `server` block. Also returns the kinds of route it cannot map (two
/// routes that differ only in case).
fn nginx(manifest: &Manifest, kinds: &Kinds, root: &std::path::Path, options: &Options) -> (String, Vec<Left>) {
    let classes: Vec<&str> =
        manifest.routes.iter().map(|e| e.cache_control).collect::<BTreeSet<_>>().into_iter().collect();
    let class = |e: &Entry| classes.iter().position(|c| *c == e.cache_control).expect("listed");
    // `file|etag|last-modified|class|key`: none of the first four holds a
    // `|` (file names are percent-encoded), so the key, last, may.
    let value =
        |e: &Entry, key: &str| quoted(&format!("{}|{}|{}|{}|{key}", e.file(), e.etag, e.last_modified, class(e)));
    // nginx compares map keys without regard to case: two routes that
    // differ only in case cannot both be mapped, so neither is (the
    // request is then the api's). The entry also carries its exact key,
    // checked below.
    let mut by_key: BTreeMap<String, Vec<(&Entry, String)>> = BTreeMap::new();
    for e in &manifest.routes {
        let spellings = std::iter::once(e.route().to_string()).chain(spellings(e.route()));
        for key in spellings.map(|s| decoded_spelling(&s)) {
            by_key.entry(key.to_lowercase()).or_default().push((e, key));
        }
    }
    let mut unmapped: BTreeMap<&str, usize> = BTreeMap::new();
    for entries in by_key.values().filter(|v| v.len() > 1) {
        for (e, _) in entries {
            *unmapped.entry(kinds[e.route()].as_str()).or_default() += 1;
        }
    }
    let unmapped = unmapped
        .into_iter()
        .map(|(kind, routes)| Left { kind: kind.into(), routes, why: "differs from another route only in case" })
        .collect();
    let mut paths = String::new();
    let mut queries = String::new();
    let mut longest = 0;
    for entries in by_key.values().filter(|v| v.len() == 1) {
        let (e, key) = &entries[0];
        longest = longest.max(key.len());
        let line = format!("    {} {};\n", quoted(key), value(e, key));
        match e.route().contains('?') {
            true => queries.push_str(&line),
            false => paths.push_str(&line),
        }
    }
    let mut types: BTreeMap<String, &str> = BTreeMap::new();
    for e in &manifest.routes {
        let base = e.content_type.split(';').next().unwrap_or_default().trim();
        types.insert(extension(e.file()).to_string(), base);
    }
    let charset: BTreeSet<&str> = manifest
        .routes
        .iter()
        .filter(|e| e.content_type.ends_with("; charset=utf-8"))
        .map(|e| e.content_type.split(';').next().unwrap_or_default())
        .collect();

    let mut out = String::new();
    let _ = writeln!(out, "# almanac build {}: generated from its _manifest.json; do not edit.", manifest.build);
    out.push_str(
        "# Include inside `http { }` and reload nginx after each publish: the maps name this build's\n\
         # files, and `root` this build's folder, so a reload switches builds at once.\n\
         # The two map_hash_* lines size nginx's tables for these maps (drop them if your http block\n\
         # sets larger ones).\n",
    );
    let _ = writeln!(out, "map_hash_max_size {};", (by_key.len() * 8).next_power_of_two().max(4096));
    let _ = writeln!(out, "map_hash_bucket_size {};", (longest + 200).next_power_of_two().max(128));
    out.push_str(
        "\n# Routes with query parameters: their canonical spelling and the spellings the api answers alike.\n",
    );
    let _ = writeln!(out, "map $uri$is_args$args $almanac_query {{\n    default \"\";\n{queries}}}");
    out.push_str("# Routes without: any query string.\n");
    let _ = writeln!(out, "map $uri $almanac_path {{\n    default \"\";\n{paths}}}");
    out.push_str(
        "map $almanac_query $almanac_found {\n    \"\" $almanac_path;\n    default $almanac_query;\n}\n\
         # The entry is used only for the exact spelling it was made for (map keys ignore case).\n\
         map $almanac_found $almanac_key {\n    \"~^[^|]*\\|[^|]*\\|[^|]*\\|[0-9]+\\|(?<almanac_k>.*)$\" $almanac_k;\n    \
         default \"\";\n}\n\
         map \"$almanac_key|$uri$is_args$args|$uri\" $almanac_entry {\n    \
         \"~^(?<almanac_x>[^|]+)\\|(?:\\k<almanac_x>\\|[^|]*|[^|]*\\|\\k<almanac_x>)$\" $almanac_found;\n    default \"\";\n}\n\
         map $almanac_entry $almanac_file {\n    \"~^(?<almanac_f>[^|]*)\\|\" $almanac_f;\n    default \"\";\n}\n\
         map $almanac_entry $almanac_etag {\n    \"~^[^|]*\\|(?<almanac_e>[^|]*)\\|\" $almanac_e;\n    default \"\";\n}\n\
         map $almanac_entry $almanac_modified {\n    \"~^[^|]*\\|[^|]*\\|(?<almanac_m>[^|]*)\\|\" $almanac_m;\n    default \"\";\n}\n\
         map $almanac_entry $almanac_class {\n    \"~^[^|]*\\|[^|]*\\|[^|]*\\|(?<almanac_c>[0-9]+)\\|\" $almanac_c;\n    default \"\";\n}\n",
    );
    out.push_str("map $almanac_class $almanac_cache {\n    default \"\";\n");
    for (i, c) in classes.iter().enumerate() {
        let _ = writeln!(out, "    {i} {};", quoted(c));
    }
    out.push_str("}\n");
    out.push_str(
        "map \"$http_if_match$http_if_unmodified_since\" $almanac_precondition {\n    \"\" 0;\n    default 1;\n}\n\
         # RFC 9110 section 13.2.2: If-Match, then If-None-Match (weak comparison, lists, *), and\n\
         # If-Modified-Since only without If-None-Match (equal to Last-Modified: nginx cannot order dates).\n\
         map \"$http_if_match|$almanac_etag\" $almanac_failed {\n    \"~^\\|\" 0;\n    \"~^\\*\\|\\\"\" 0;\n    \
         \"~^(?:[^|]*[ ,])?(?<almanac_a>\\\"[^\\\"|]*\\\")(?:[ ,][^|]*)?\\|\\k<almanac_a>$\" 0;\n    default 1;\n}\n\
         map \"$http_if_none_match|$almanac_etag|$http_if_modified_since|$almanac_modified\" $almanac_fresh {\n    \
         \"~^\\*\\|\\\"\" 1;\n    \
         \"~^(?:[^|]*[ ,])?(?:W/)?(?<almanac_t>\\\"[^\\\"|]*\\\")(?:[ ,][^|]*)?\\|\\k<almanac_t>\\|\" 1;\n    \
         \"~^\\|[^|]+\\|(?<almanac_d>[^|]+)\\|\\k<almanac_d>$\" 1;\n    default 0;\n}\n\n",
    );

    let listen = options.nginx_listen.as_deref().unwrap_or("80");
    let _ = writeln!(out, "server {{\n    listen {listen};\n    root {};", quoted(&root.display().to_string()));
    out.push_str("    types {\n");
    for (extension, base) in &types {
        let _ = writeln!(out, "        {base} {extension};");
    }
    out.push_str("    }\n");
    if !charset.is_empty() {
        // text/html is among nginx's charset types already.
        let _ = writeln!(out, "    charset utf-8;");
        let others: Vec<&str> = charset.into_iter().filter(|t| *t != "text/html").collect();
        if !others.is_empty() {
            let _ = writeln!(out, "    charset_types text/html {};", others.join(" "));
        }
    }
    let headers: String = [
        "add_header ETag $almanac_etag always;",
        "add_header Last-Modified $almanac_modified always;",
        "add_header Cache-Control $almanac_cache always;",
        "add_header Vary Accept-Encoding always;",
    ]
    .iter()
    .chain(&CORS)
    .map(|line| format!("        {line}\n"))
    .collect();
    // nginx itself checks If-Match and If-Unmodified-Since against its own
    // validators (turned off here) before any header is added: such a
    // request is the api's, when there is one.
    let preconditions = match options.nginx_api {
        Some(_) => "        if ($almanac_precondition) {\n            return 418;\n        }\n",
        None => "",
    };
    let cors: String = CORS.iter().map(|line| format!("        {line}\n")).collect();
    let elsewhere = match &options.nginx_api {
        Some(api) => format!(
            "    # What the build does not hold: the api.\n    location @elsewhere {{\n        proxy_pass http://{api};\n        \
             proxy_set_header Host $host;\n        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n        \
             proxy_buffering off;\n    }}\n"
        ),
        None => format!(
            "    # What the build does not hold (no api configured).\n    location @elsewhere {{\n        types {{ }}\n        \
             default_type application/json;\n{cors}        add_header Cache-Control no-store always;\n        \
             return 404 '{{\"error\":\"not in this build\",\"code\":\"not_found\"}}';\n    }}\n"
        ),
    };
    out.push_str(
        &SERVER_TAIL
            .replace("{headers}", &headers)
            .replace("{cors}", &cors)
            .replace("{elsewhere}", &elsewhere)
            .replace("{preconditions}", preconditions),
    );
    (out, unmapped)
}

/// Headers every answer of the site carries (as the api's do).
const CORS: [&str; 3] = [
    "add_header Access-Control-Allow-Origin \"*\" always;",
    "add_header Access-Control-Expose-Headers ETag always;",
    "add_header X-Content-Type-Options nosniff always;",
];

/// The rest of the `server` block. A 304 comes from a location of its own
/// with no content type (nginx's `return 304` would send the default
/// one); it still carries `Content-Length: 0`, which nginx adds to every
/// `return` and which caches do not take from a 304 (RFC 9111 section 3.2).
const SERVER_TAIL: &str = r#"    # One trailing slash names the same route (as the api reads it).
    rewrite ^(.+)/$ $1;
    # The manifest's validators, not nginx's (file times and sizes).
    etag off;
    if_modified_since off;
    server_tokens off;

    location / {
        error_page 418 = @elsewhere;
        error_page 419 = @fresh;
        error_page 420 = @failed;
        if ($almanac_file = "") {
            return 418;
        }
{preconditions}        if ($almanac_failed) {
            return 420;
        }
        if ($almanac_fresh) {
            return 419;
        }
        try_files /$almanac_file =404;
{headers}    }

    location @fresh {
        types { }
        default_type "";
{headers}        return 304;
    }

    location @failed {
        types { }
        default_type application/json;
{cors}        add_header Cache-Control no-store always;
        return 412 '{"error":"a precondition of the request failed","code":"precondition_failed"}';
    }

{elsewhere}}
"#;

/// A route's path without its query, and its query.
fn split(route: &str) -> (&str, Option<&str>) {
    route.split_once('?').map_or((route, None), |(p, q)| (p, Some(q)))
}

/// Whether Netlify and Cloudflare Pages serve `entry`'s file for its
/// route as they are: the decoded path is the file, or the file less
/// `.html` (or `index.html` for a folder).
fn natural(entry: &Entry) -> bool {
    let (path, query) = split(entry.route());
    if query.is_some() {
        return false;
    }
    let wanted = decoded(path);
    let wanted = wanted.trim_start_matches('/');
    let file = entry.file();
    file == wanted
        || file.strip_suffix(".html") == Some(wanted)
        || file.strip_suffix("index.html").is_some_and(|dir| dir.trim_end_matches('/') == wanted.trim_end_matches('/'))
}

/// Each route's kind, by route.
type Kinds<'a> = BTreeMap<&'a str, String>;

/// The kind of each route, for reports: its path with each segment that
/// takes many values as `*` (more than `MANY` siblings, most of which look
/// like values: a digit, an escape, a `.`, `:` or `~` in them), and the
/// names of its query parameters.
fn kinds(manifest: &Manifest) -> Kinds<'_> {
    const MANY: usize = 8;
    let value = |s: &&str| s.chars().any(|c| c.is_ascii_digit() || matches!(c, '%' | '.' | ':' | '~'));
    let mut children: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for e in &manifest.routes {
        let (path, _) = split(e.route());
        let segments: Vec<&str> = path.split('/').skip(1).collect();
        for depth in 0..segments.len() {
            children.entry(segments[..depth].join("/")).or_default().insert(segments[depth]);
        }
    }
    // Whether the segments under each folder take many values.
    let many: BTreeMap<String, bool> = children
        .into_iter()
        .map(|(folder, names)| {
            let values = names.iter().filter(|s| value(s)).count();
            (folder, names.len() > MANY && values * 2 > names.len())
        })
        .collect();
    manifest
        .routes
        .iter()
        .map(|e| {
            let (path, query) = split(e.route());
            let segments: Vec<&str> = path.split('/').skip(1).collect();
            let kind: Vec<&str> =
                (0..segments.len()).map(|d| if many[&segments[..d].join("/")] { "*" } else { segments[d] }).collect();
            let mut kind = format!("/{}", kind.join("/"));
            if let Some(query) = query {
                let names: Vec<&str> = query.split('&').map(|p| p.split('=').next().unwrap_or(p)).collect();
                kind = format!("{kind}?{}", names.join("&"));
            }
            (e.route(), kind)
        })
        .collect()
}

/// An entry's headers on a static host, content type and cache policy
/// (the host sets its own validators).
type Headers<'a> = (&'a str, &'a str);

/// `_headers` (Netlify, Cloudflare Pages): CORS and `nosniff` on every
/// path, then each path's content type and cache policy, one `folder/*`
/// rule where everything under a folder shares them.
/// Also returns how many rules it holds.
fn headers(manifest: &Manifest) -> (String, usize) {
    // Every route path, with its headers.
    let paths: BTreeMap<&str, Headers> =
        manifest.routes.iter().map(|e| (split(e.route()).0, (e.content_type, e.cache_control))).collect();
    let mut out = String::from(
        "# almanac: generated from _manifest.json; do not edit.\n/*\n  Access-Control-Allow-Origin: *\n  \
         Access-Control-Expose-Headers: ETag\n  X-Content-Type-Options: nosniff\n\n",
    );
    // Per folder (every proper prefix of a path, below the root): how
    // many paths lie under it, and their headers if they all agree.
    let mut folders: BTreeMap<&str, (usize, Option<&Headers>)> = BTreeMap::new();
    for (path, headers) in &paths {
        let cuts = path.match_indices('/').map(|(i, _)| i).filter(|i| *i > 0);
        for cut in cuts {
            let folder = folders.entry(&path[..cut]).or_insert((0, Some(headers)));
            folder.0 += 1;
            if folder.1 != Some(headers) {
                folder.1 = None;
            }
        }
    }
    let mut rules = 1;
    let mut written: BTreeSet<String> = BTreeSet::new();
    for (path, headers) in &paths {
        // The highest folder above `path` (more than one path under it,
        // all with its headers) names the rule; else the path itself.
        // (`folder/*` does not match `folder` itself.)
        let cuts = path.match_indices('/').map(|(i, _)| i).filter(|i| *i > 0);
        let rule = cuts
            .map(|cut| &path[..cut])
            .find(|folder| matches!(folders[folder], (n, Some(_)) if n > 1))
            .map_or_else(|| path.to_string(), |folder| format!("{folder}/*"));
        if written.insert(rule.clone()) {
            let _ = write!(out, "{rule}\n  Content-Type: {}\n  Cache-Control: {}\n\n", headers.0, headers.1);
            rules += 1;
        }
    }
    (out, rules)
}

/// One rewrite: a static rule (one route), or a placeholder rule (every
/// route with one more segment under a folder).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub from: String,
    pub to: String,
    /// How many routes it serves.
    pub routes: usize,
    /// Whether it has a placeholder.
    pub dynamic: bool,
    /// Whether it matches query parameters (Netlify only).
    pub query: bool,
    /// The kind of its routes.
    pub kind: String,
}

/// A string as TOML writes it (basic string).
fn toml(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The rewrites that serve a build's routes from its files on Netlify and
/// Cloudflare Pages: `_redirects` holds the path rules (both hosts read
/// it), `netlify.toml` the rules that match query parameters (Netlify
/// only: Cloudflare Pages cannot match a query). Returns both files and
/// every rule.
fn redirects(manifest: &Manifest, kinds: &Kinds) -> (String, String, Vec<Rule>) {
    let mut rules: Vec<Rule> = Vec::new();
    // Placeholder rules: `folder/:name` to `folder/:name.ext` when every
    // route one segment under the folder is its file less the extension.
    let mut by_folder: BTreeMap<&str, Vec<&Entry>> = BTreeMap::new();
    for e in manifest.routes.iter().filter(|e| !e.route().contains('?')) {
        let folder = e.route().rsplit_once('/').map_or("", |(f, _)| f);
        by_folder.entry(folder).or_default().push(e);
    }
    let follows = |e: &Entry| {
        let (folder, name) = e.route().rsplit_once('/').unwrap_or(("", e.route()));
        !name.contains('%') && e.file() == format!("{}/{name}.{}", folder.trim_start_matches('/'), extension(e.file()))
    };
    let mut done: BTreeSet<&str> = BTreeSet::new();
    for (folder, entries) in &by_folder {
        let unnatural = entries.iter().filter(|e| !natural(e)).count();
        let extensions: BTreeSet<&str> = entries.iter().map(|e| extension(e.file())).collect();
        if unnatural > 1 && extensions.len() == 1 && entries.iter().all(|e| follows(e)) {
            let extension = extensions.into_iter().next().unwrap_or_default();
            rules.push(Rule {
                from: format!("{folder}/:name"),
                to: format!("{folder}/:name.{extension}"),
                routes: entries.len(),
                dynamic: true,
                query: false,
                kind: kinds[entries[0].route()].clone(),
            });
            done.extend(entries.iter().map(|e| e.route()));
        }
    }
    for e in manifest.routes.iter().filter(|e| !natural(e) && !done.contains(e.route())) {
        let kind = kinds[e.route()].clone();
        let to = format!("/{}", e.file());
        let mut all = vec![e.route().to_string()];
        all.extend(spellings(e.route()));
        for spelling in all {
            let query = spelling.contains('?');
            rules.push(Rule { from: spelling, to: to.clone(), routes: 1, dynamic: false, query, kind: kind.clone() });
        }
    }
    // Static rules first (a host tries them in order), then placeholders;
    // query rules with more parameters before those with fewer.
    let params = |r: &Rule| r.from.split_once('?').map_or(0, |(_, q)| q.split('&').count());
    rules.sort_by_key(|r| (r.query, r.dynamic, std::cmp::Reverse(params(r))));
    let mut paths = String::from("# almanac: generated from _manifest.json; do not edit.\n");
    let mut netlify = String::from(
        "# almanac: generated from _manifest.json; do not edit.\n\
         # Netlify: the routes with query parameters (the path rules are in _redirects).\n",
    );
    for rule in &rules {
        match rule.from.split_once('?') {
            None => {
                let _ = writeln!(paths, "{} {} 200", rule.from, rule.to);
            }
            Some((path, query)) => {
                let conditions: Vec<String> = query
                    .split('&')
                    .filter_map(|pair| pair.split_once('='))
                    .map(|(k, v)| format!("{k} = {}", toml(&decoded(v))))
                    .collect();
                let _ = write!(
                    netlify,
                    "\n[[redirects]]\nfrom = {}\nto = {}\nstatus = 200\nforce = true\nquery = {{ {} }}\n",
                    toml(path),
                    toml(&rule.to),
                    conditions.join(", ")
                );
            }
        }
    }
    (paths, netlify, rules)
}

/// What a build asks of each host, and what each would leave to the api.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Report {
    /// Files of the build: one per route, the manifest and these
    /// configurations.
    pub files: usize,
    pub hosts: Vec<HostReport>,
    /// Why the build has no configurations (more routes than
    /// [`Options::max_routes`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct HostReport {
    pub host: &'static str,
    /// The host's limit on files per site, where it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_limit: Option<usize>,
    /// Files to upload: the build's, less those of routes it cannot serve.
    pub files: usize,
    /// Each kind of rule: how many the build needs, and the host's limit.
    pub rules: Vec<RuleCount>,
    /// Kinds of route the host cannot serve (or not within its limits):
    /// leave them to the api.
    pub leave_to_api: Vec<Left>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RuleCount {
    pub rules: &'static str,
    pub count: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Left {
    pub kind: String,
    pub routes: usize,
    pub why: &'static str,
}

/// Cloudflare Pages' documented limits: files per site (free and paid
/// plans), static and dynamic redirects, header rules.
const CLOUDFLARE_FILES: [(&str, usize); 2] = [("cloudflare-pages-free", 20_000), ("cloudflare-pages-paid", 100_000)];
const CLOUDFLARE_STATIC_REDIRECTS: usize = 2_000;
const CLOUDFLARE_DYNAMIC_REDIRECTS: usize = 100;
const CLOUDFLARE_HEADER_RULES: usize = 100;

/// The files a build holds besides its routes: the manifest and the
/// host configurations.
const OTHER_FILES: usize = 5;

impl Report {
    fn new(manifest: &Manifest, kinds: &Kinds, rules: &[Rule], header_rules: usize, nginx_unmapped: &[Left]) -> Report {
        let files = manifest.routes.len() + OTHER_FILES;
        let mut per_kind: BTreeMap<&str, usize> = BTreeMap::new();
        for kind in kinds.values() {
            *per_kind.entry(kind.as_str()).or_default() += 1;
        }
        let count = |f: &dyn Fn(&Rule) -> bool| rules.iter().filter(|r| f(r)).count();
        let path_rules = |dynamic: bool| count(&|r: &Rule| !r.query && r.dynamic == dynamic);
        let mut hosts = vec![
            HostReport {
                host: "nginx",
                file_limit: None,
                files,
                rules: Vec::new(),
                leave_to_api: nginx_unmapped.to_vec(),
            },
            HostReport {
                host: "netlify",
                file_limit: None,
                files,
                rules: vec![
                    RuleCount { rules: "_redirects rules", count: path_rules(false) + path_rules(true), limit: None },
                    RuleCount { rules: "netlify.toml query rules", count: count(&|r: &Rule| r.query), limit: None },
                    RuleCount { rules: "_headers rules", count: header_rules, limit: None },
                ],
                leave_to_api: Vec::new(),
            },
        ];
        for (host, limit) in CLOUDFLARE_FILES {
            let mut left: Vec<Left> = Vec::new();
            let mut leaving: BTreeSet<&str> = BTreeSet::new();
            // Query parameters cannot be matched at all.
            for (kind, routes) in &per_kind {
                if kind.contains('?') {
                    left.push(Left {
                        kind: kind.to_string(),
                        routes: *routes,
                        why: "Cloudflare Pages cannot match query parameters",
                    });
                    leaving.insert(kind);
                }
            }
            // Static redirects past the cap: the kinds with most go first.
            let mut statics: BTreeMap<&str, usize> = BTreeMap::new();
            for r in rules.iter().filter(|r| !r.query && !r.dynamic) {
                *statics.entry(r.kind.as_str()).or_default() += 1;
            }
            let mut total: usize = statics.values().sum();
            let mut by_count: Vec<(&str, usize)> = statics.into_iter().collect();
            by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            for (kind, n) in by_count {
                if total <= CLOUDFLARE_STATIC_REDIRECTS {
                    break;
                }
                total -= n;
                left.push(Left { kind: kind.into(), routes: per_kind[kind], why: "past the 2,000 static redirects" });
                leaving.insert(kind);
            }
            // Files past the limit: the largest kinds go first.
            let mut kept = files - leaving.iter().map(|k| per_kind[k]).sum::<usize>();
            let mut largest: Vec<(&str, usize)> =
                per_kind.iter().filter(|(k, _)| !leaving.contains(*k)).map(|(k, n)| (*k, *n)).collect();
            largest.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            for (kind, n) in largest {
                if kept <= limit {
                    break;
                }
                kept -= n;
                left.push(Left { kind: kind.into(), routes: n, why: "past the plan's file limit" });
            }
            hosts.push(HostReport {
                host,
                file_limit: Some(limit),
                files: kept,
                rules: vec![
                    RuleCount { rules: "static redirects", count: total, limit: Some(CLOUDFLARE_STATIC_REDIRECTS) },
                    RuleCount {
                        rules: "dynamic redirects",
                        count: path_rules(true),
                        limit: Some(CLOUDFLARE_DYNAMIC_REDIRECTS),
                    },
                    RuleCount { rules: "_headers rules", count: header_rules, limit: Some(CLOUDFLARE_HEADER_RULES) },
                ],
                leave_to_api: left,
            });
        }
        Report { files, hosts, skipped: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(route: &str, file: &str, content_type: &str, cache: &str) -> Entry {
        let etag = shared::manifest::Inline::new("\"00\"").unwrap();
        let (content_type, cache) = (shared::manifest::shared(content_type), shared::manifest::shared(cache));
        Entry::of(route, file, etag, "Mon, 01 Jan 2024 00:00:00 GMT", content_type, cache, 1)
    }

    fn json(route: &str, file: &str) -> Entry {
        entry(route, file, "application/json", "public, max-age=60")
    }

    #[test]
    fn hosts_serve_some_files_as_they_are() {
        for (route, file, natural_) in [
            ("/", "index.html", true),
            ("/tokens", "tokens.html", true),
            ("/guard/facts.json", "guard/facts.json", true),
            ("/exports/ticks.parquet", "exports/ticks.parquet", true),
            ("/hcs20/stats", "hcs20/stats.json", false),
            ("/hcs20", "hcs20/index.json", false),
            ("/hcs20/transactions?pageSize=25", "hcs20/transactions/25.json", false),
            ("/agents/uaid%3Aaid%3Ax", "agents/~00.html", false),
        ] {
            assert_eq!(natural(&json(route, file)), natural_, "{route}");
        }
    }

    #[test]
    fn query_routes_are_also_found_by_the_spellings_the_api_answers_alike() {
        let holders = "/hcs20/holders?tick=pts&topic=0.0.1&page=1&pageSize=25";
        assert_eq!(
            spellings(holders),
            [
                "/hcs20/holders?tick=pts&topic=0.0.1",
                "/hcs20/holders?tick=pts&topic=0.0.1&page=1",
                "/hcs20/holders?tick=pts&topic=0.0.1&pageSize=25",
            ]
        );
        assert_eq!(
            spellings("/hcs20/holders?tick=pts&topic=0.0.1&page=2&pageSize=25"),
            ["/hcs20/holders?tick=pts&topic=0.0.1&page=2"]
        );
        assert_eq!(spellings("/hcs20/transactions?pageSize=25"), ["/hcs20/transactions"]);
        assert!(spellings("/hcs20/transactions?pageSize=10").is_empty());
        assert!(spellings("/api/v1/search/facets?adapter=x").is_empty());
        assert!(spellings("/hcs20/stats").is_empty());
    }

    fn manifest(entries: Vec<Entry>) -> Manifest {
        Manifest::new(entries)
    }

    #[test]
    fn header_rules_cover_a_folder_only_when_all_under_it_agree() {
        let html = |route: &str| entry(route, "x.html", "text/html; charset=utf-8", "public, max-age=60");
        let m = manifest(vec![
            json("/hcs20/account/0.0.1", "hcs20/account/0.0.1.json"),
            json("/hcs20/account/0.0.2", "hcs20/account/0.0.2.json"),
            entry("/hcs20/stats", "hcs20/stats.json", "application/json", "public, max-age=300"),
            html("/agents"),
            html("/agents/page/2"),
            html("/agents/uaid%3Aaid%3Ax"),
        ]);
        let (text, rules) = headers(&m);
        let paths: Vec<&str> = text.lines().filter(|l| l.starts_with('/')).collect();
        assert_eq!(paths, ["/*", "/agents", "/agents/*", "/hcs20/account/*", "/hcs20/stats"]);
        assert_eq!(rules, paths.len());
        assert!(text.contains("/hcs20/stats\n  Content-Type: application/json\n  Cache-Control: public, max-age=300\n"));
    }

    #[test]
    fn rewrites_use_a_placeholder_where_every_route_of_a_folder_follows_one() {
        let m = manifest(vec![
            json("/hcs20/account/0.0.1", "hcs20/account/0.0.1.json"),
            json("/hcs20/account/0.0.2", "hcs20/account/0.0.2.json"),
            json("/hcs20/stats", "hcs20/stats.json"),
            json("/hcs20", "hcs20/index.json"),
            json("/api/v1/agents/uaid%3Aaid%3Ax", "api/v1/agents/~aa.json"),
            json("/api/v1/agents/uaid%3Aaid%3Ay", "api/v1/agents/~bb.json"),
            json("/hcs20/transactions?pageSize=25", "hcs20/transactions/25.json"),
            json("/guard/facts.json", "guard/facts.json"),
        ]);
        let (paths, netlify, rules) = redirects(&m, &kinds(&m));
        let lines: Vec<&str> = paths.lines().skip(1).collect();
        assert_eq!(
            lines,
            [
                "/api/v1/agents/uaid%3Aaid%3Ax /api/v1/agents/~aa.json 200",
                "/api/v1/agents/uaid%3Aaid%3Ay /api/v1/agents/~bb.json 200",
                "/hcs20 /hcs20/index.json 200",
                "/hcs20/stats /hcs20/stats.json 200",
                "/hcs20/transactions /hcs20/transactions/25.json 200",
                "/hcs20/account/:name /hcs20/account/:name.json 200",
            ]
        );
        assert!(netlify.contains(
            "from = \"/hcs20/transactions\"\nto = \"/hcs20/transactions/25.json\"\nstatus = 200\nforce = true\n\
             query = { pageSize = \"25\" }\n"
        ));
        assert_eq!(rules.iter().filter(|r| r.dynamic).map(|r| r.routes).sum::<usize>(), 2);
    }

    #[test]
    fn the_report_names_what_each_host_leaves_to_the_api() {
        // 25,000 agents' files, each a static rewrite; a query route.
        let mut entries: Vec<Entry> = (0..25_000)
            .map(|i| json(&format!("/api/v1/agents/uaid%3Aaid%3A{i}"), &format!("api/v1/agents/~{i:05}.json")))
            .collect();
        entries.push(json("/hcs20/transactions?pageSize=25", "hcs20/transactions/25.json"));
        entries.push(json("/hcs20/stats", "hcs20/stats.json"));
        let m = manifest(entries);
        let configs = configure(&m, std::path::Path::new("/srv/site/builds/x"), &Options::default());
        let host = |name: &str| configs.report.hosts.iter().find(|h| h.host == name).unwrap().clone();
        let free = host("cloudflare-pages-free");
        let left: Vec<(&str, usize, &str)> =
            free.leave_to_api.iter().map(|l| (l.kind.as_str(), l.routes, l.why)).collect();
        assert_eq!(
            left,
            [
                ("/hcs20/transactions?pageSize", 1, "Cloudflare Pages cannot match query parameters"),
                ("/api/v1/agents/*", 25_000, "past the 2,000 static redirects"),
            ]
        );
        assert_eq!(free.files, configs.report.files - 25_001);
        assert!(free.files <= 20_000);
        assert!(host("netlify").leave_to_api.is_empty() && host("nginx").leave_to_api.is_empty());
        assert_eq!(configs.report.files, 25_002 + OTHER_FILES);
    }

    /// A build past the limit gets no configuration, and its report says
    /// why; one at the limit gets them all.
    #[test]
    fn a_build_past_the_route_limit_gets_no_configurations() {
        let entries: Vec<Entry> =
            (0..10).map(|i| json(&format!("/api/v1/agents/a{i}"), &format!("api/v1/agents/a{i}.json"))).collect();
        let m = manifest(entries);
        let root = std::path::Path::new("/srv/site/builds/x");
        let at = configure(&m, root, &Options { max_routes: 10, ..Options::default() });
        assert_eq!(at.files().len(), 4);
        assert!(at.report.skipped.is_none() && !at.report.hosts.is_empty());
        let past = configure(&m, root, &Options { max_routes: 9, ..Options::default() });
        assert!(past.files().is_empty() && past.report.hosts.is_empty());
        let why = past.report.skipped.unwrap();
        assert!(why.contains("10 routes") && why.contains("--host-configs-max-routes"), "{why}");
    }

    #[test]
    fn nginx_maps_each_spelling_to_its_entry_and_refuses_names_equal_but_for_case() {
        let m = manifest(vec![
            json("/hcs20/stats", "hcs20/stats.json"),
            json("/hcs20/transactions?pageSize=25", "hcs20/transactions/25.json"),
            json("/api/v1/agents/uaid%3Aaid%3AAb", "api/v1/agents/~01.json"),
            json("/api/v1/agents/uaid%3Aaid%3AaB", "api/v1/agents/~02.json"),
        ]);
        let options = Options { nginx_listen: Some("127.0.0.1:8080".into()), ..Options::default() };
        let (conf, unmapped) = nginx(&m, &kinds(&m), std::path::Path::new("/srv/site/builds/x"), &options);
        assert!(conf.contains(
            "    \"/hcs20/stats\" \"hcs20/stats.json|\\\"00\\\"|Mon, 01 Jan 2024 00:00:00 GMT|0|/hcs20/stats\";"
        ));
        assert!(conf.contains("    \"/hcs20/transactions\" \"hcs20/transactions/25.json|"), "{conf}");
        assert!(conf.contains("    \"/hcs20/transactions?pageSize=25\" \"hcs20/transactions/25.json|"));
        assert!(conf.contains("listen 127.0.0.1:8080;") && conf.contains("root \"/srv/site/builds/x\";"));
        assert!(!conf.contains("uaid:aid:Ab"), "neither of two names equal but for case is mapped");
        assert_eq!(unmapped.iter().map(|l| l.routes).sum::<usize>(), 2);
        assert!(!conf.contains("proxy_pass") && conf.contains("\"code\":\"not_found\""));
    }

    #[test]
    fn strings_are_quoted_for_nginx_and_toml() {
        assert_eq!(quoted(r#"a"b\c$d"#), r#""a\"b\\c\$d""#);
        assert_eq!(toml("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000A\"");
    }
}
