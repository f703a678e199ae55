//! Benchmark helpers driven by `bench/run.sh` (`make bench`). Prints
//! figures; asserts nothing about time.
//!
//! - `bench ingest DIR [RUNS]`: read every captured page and replay the
//!   rules in process, no DuckDB; median messages per second.
//! - `bench mirror DIR LATENCY_MS PORT_FILE`: serve DIR's pages as a mirror
//!   node on loopback with added latency until killed.
//! - `bench dns PORT_FILE`: a DNS server on loopback that knows no name
//!   (NXDOMAIN for all), for a benchmarked api's `--egress-dns`: its
//!   availability checks then find the generated agents' hosts silent
//!   without a packet leaving the machine; until killed.
//! - `bench text [AGENTS]`: the relevance engines side by side over a
//!   generated agent index (100k): the baseline BM25F and tantivy's, time
//!   to index, latency over 2,000 distinct query texts, recall and
//!   precision judged by the agents' capabilities; then whole searches over
//!   the new index; in process, one thread.
//! - `bench search SEARCH_DIR [QUERIES|FILE] [OVERLAY]`: QUERIES distinct
//!   searches (`bench queries`), or FILE's paths, in process over a build's
//!   search index folder, by kind; with OVERLAY, merged with a live overlay
//!   of that many generated agents, as the api searches both.
//! - `bench folder AGENTS SEARCH_DIR`: a search index folder of AGENTS
//!   agents of the datagen's (`--preset agents`, its default seed), written
//!   as the generator writes a build's, without the rest of the build: for
//!   `bench search` and profiling at scale in minutes.
//! - `bench slow ADDR IDLE TRICKLE SECONDS`: hold IDLE connections that
//!   send nothing and TRICKLE that send a request head one field line a
//!   second, opening a new one whenever the server closes one, for
//!   SECONDS; then print how many were opened.
//! - `bench debits DIR [SECONDS]`: durable credit debits per second through
//!   the live store, 64 concurrent clients, one commit per debit against
//!   group commit.
//! - `bench signin BASE [SECONDS]`: ledger sign-ins per second against a
//!   running api (16 clients, dev key).
//! - `bench availability DIR [AGENTS]`: availability checks of AGENTS
//!   agents (1M) recorded into a fresh live store in DIR as the api's
//!   checker records them (a batch per host drained, in transactions of
//!   256): every agent's first check (each journaled), then a steady
//!   round (nothing changes) and a round where every tenth agent turns;
//!   checks a second, the store's bytes per agent, and how long a round
//!   of that many calls takes at the default pace.
//! - `bench queries N`: N distinct `GET /api/v1/search` paths, one a line,
//!   drawn from the agent generator's words, registries and protocols: free
//!   text of one to three words (a stem or a prefix now and then), filters,
//!   sorts and deep pages; the same N every time.
//! - `bench sample BUILD_DIR N`: N agent-detail routes of a build, drawn at
//!   random (seeded) from its index: `route file` a line.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use generator::message_sources::{captured, MirrorMessage, Page};
use hcs20::{replay, Topics};
use shared::entity::EntityId;

/// The api's allocator: in-process searches allocate as the api's do.
/// Every command runs with it, `bench ingest` too, whose rules the
/// generator runs with the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("ingest") => ingest(Path::new(&args[1]), args.get(2).map_or(Ok(3), |r| r.parse())?),
        Some("dns") => dns(Path::new(&args[1])),
        Some("mirror") => mirror(Path::new(&args[1]), args[2].parse()?, Path::new(&args[3])),
        Some("sample") => sample(Path::new(&args[1]), args.get(2).map_or(Ok(50_000), |n| n.parse())?),
        Some("availability") => availability(Path::new(&args[1]), args.get(2).map_or(Ok(1_000_000), |n| n.parse())?),
        Some("queries") => queries(args.get(1).map_or(Ok(5_000), |n| n.parse())?),
        Some("text") => text(args.get(1).map_or(Ok(100_000), |n| n.parse())?),
        Some("plugins") => plugin_scans(Path::new(&args[1]), args.get(2).map_or(Ok(20), |n| n.parse())?),
        Some("search") => search_folder(
            Path::new(&args[1]),
            args.get(2).map_or("5000", String::as_str),
            args.get(3).map_or(Ok(0), |n| n.parse())?,
        ),
        Some("folder") => write_folder(args[1].parse()?, Path::new(&args[2])),
        Some("slow") => slow(&args[1], args[2].parse()?, args[3].parse()?, args[4].parse()?),
        Some("debits") => debits(Path::new(&args[1]), args.get(2).map_or(Ok(5), |s| s.parse())?),
        Some("signin") => signin(&args[1], args.get(2).map_or(Ok(5), |s| s.parse())?),
        Some("register") => register(&[args[1].clone()], &live_store::Location::parse(&args[2]), args[3].parse()?),
        Some("replicas") => replicas(Path::new(&args[1]), Path::new(&args[2]), args[3].parse()?, args[4].parse()?),
        Some("journal") => journal(Path::new(&args[1]), Path::new(&args[2]), args[3].parse()?),
        Some("chat") => chat(&args[1], args.get(2).map_or(Ok(2_000), |n| n.parse())?),
        Some("streams") => streams(&args[1], args[2].parse()?, args[3].parse()?),
        _ => bail!(
            "usage: bench ingest DIR [RUNS] | bench mirror DIR LATENCY_MS PORT_FILE | bench dns PORT_FILE | bench text [AGENTS] \
             | bench search SEARCH_DIR [QUERIES] [OVERLAY] | bench folder AGENTS SEARCH_DIR \
             | bench slow ADDR IDLE TRICKLE SECONDS | bench debits DIR [SECONDS] | bench signin BASE [SECONDS] \
             | bench register BASE STORE AGENTS | bench replicas SITE DATA AGENTS PROBES \
             | bench journal AGENTS_JSONL JOURNAL_DIR CHANGES \
             | bench chat BASE [MESSAGES] | bench streams BASE API_PID STREAMS | bench availability DIR [AGENTS]"
        ),
    }
}

fn ingest(dir: &Path, runs: usize) -> Result<()> {
    let mut read_times = Vec::new();
    let mut replay_times = Vec::new();
    let mut count = 0;
    for _ in 0..runs.max(1) {
        let started = Instant::now();
        let mut messages = Vec::new();
        for topic in captured::topics(dir)? {
            messages.extend(captured::read_topic(dir, topic, 0)?);
        }
        let read = started.elapsed();
        let started = Instant::now();
        let (ledger, rows) = replay(&messages, Topics::MAINNET);
        let replayed = started.elapsed();
        count = messages.len();
        std::hint::black_box((ledger.tokens.len(), rows.len()));
        read_times.push(read);
        replay_times.push(replayed);
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (read, replayed) = (median(&mut read_times), median(&mut replay_times));
    let total = read + replayed;
    let rate = |d: Duration| count as f64 / d.as_secs_f64();
    println!("ingest+rules: {count} messages, median of {runs}: read+decode {:.3} s ({:.0}/s), rules {:.3} s ({:.0}/s), together {:.3} s = {:.0} messages/s",
        read.as_secs_f64(), rate(read), replayed.as_secs_f64(), rate(replayed), total.as_secs_f64(), rate(total));
    Ok(())
}

fn mirror(dir: &Path, latency_ms: u64, port_file: &Path) -> Result<()> {
    let mut topics: HashMap<EntityId, Vec<MirrorMessage>> = HashMap::new();
    for topic in captured::topics(dir)? {
        let mut files: Vec<_> =
            std::fs::read_dir(dir.join(topic.to_string()))?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
        files.sort();
        let list = topics.entry(topic).or_default();
        for file in files {
            let page: Page =
                serde_json::from_slice(&std::fs::read(&file)?).with_context(|| file.display().to_string())?;
            list.extend(page.messages);
        }
        list.sort_by_key(|m| m.sequence_number);
        list.dedup_by_key(|m| m.sequence_number);
    }
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let server = tests::mirror::MirrorServer::start(topics, Duration::from_millis(latency_ms)).await;
        std::fs::write(port_file, server.addr.port().to_string())?;
        eprintln!("mirror serving on {} with {latency_ms} ms latency", server.url());
        std::future::pending::<()>().await;
        Ok(())
    })
}

/// `bench dns PORT_FILE`: see the module's comment.
fn dns(port_file: &Path) -> Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let server = tests::dns::DnsServer::start(&[]).await;
        std::fs::write(port_file, server.addr.port().to_string())?;
        eprintln!("dns answering NXDOMAIN on {}", server.addr);
        std::future::pending::<()>().await;
        Ok(())
    })
}

/// The scanner over the corpus (`plugins/corpus`), in process: each
/// fixture's scan and content digest `rounds` times, its files already in
/// memory; the median per plugin and the slowest fixture's. An import adds
/// the fetch and the unpacking; `bench/run.sh` times the reference scanner's
/// command beside `generator scan-plugin`.
fn plugin_scans(corpus: &Path, rounds: usize) -> Result<()> {
    let mut fixtures: Vec<(String, plugins::tree::Tree)> = Vec::new();
    for entry in std::fs::read_dir(corpus)? {
        let dir = entry?.path();
        if dir.join("plugin").is_dir() {
            let name = dir.file_name().unwrap_or_default().to_string_lossy().into_owned();
            fixtures.push((name, generator::plugin_folder::read(&dir.join("plugin"))?));
        }
    }
    fixtures.sort_by(|a, b| a.0.cmp(&b.0));
    let mut each: Vec<(Duration, &str)> = Vec::new();
    for (name, tree) in &fixtures {
        let mut times: Vec<Duration> = (0..rounds.max(1))
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(plugins::scan::report(tree, name));
                std::hint::black_box(plugins::digest::digest(tree));
                t.elapsed()
            })
            .collect();
        times.sort();
        each.push((times[times.len() / 2], name));
    }
    each.sort();
    let median = each[each.len() / 2].0;
    let (slowest, which) = each[each.len() - 1];
    println!(
        "plugin scan and digest, in process: {} fixtures, median {:.2} ms per plugin, slowest {:.2} ms ({which})",
        each.len(),
        median.as_secs_f64() * 1e3,
        slowest.as_secs_f64() * 1e3
    );
    Ok(())
}

/// The relevance engines side by side over `n` generated agents: the
/// baseline (the hand-written BM25F the api used before, `tests::bm25f`)
/// and tantivy's (`search::text`): time to index, the text part of 2,000
/// distinct queries of `bench queries` (p50, p99, one thread), and
/// relevance judged by the generator's capabilities: for each capability's
/// own word, the word, an inflected form and a 5-letter prefix, the share
/// of the agents having the capability that match (recall) and of the top
/// 20 that have it (precision). Then whole searches (filters, sorts,
/// pages, aggregations) over the new index.
fn text(n: usize) -> Result<()> {
    use broker_model::generate;
    use search::query::{search, AgentIndex, SearchQuery};
    use search::text::TextIndex;
    let agents = generate::agents(n, 1);
    let started = Instant::now();
    let baseline = tests::bm25f::TextIndex::build(&agents);
    let baseline_built = started.elapsed();
    let rank = search::columns::Columns::of(&agents).id_rank;
    let started = Instant::now();
    let tantivy = TextIndex::build(&agents, &rank);
    let tantivy_built = started.elapsed();
    println!(
        "text index of {n} agents: baseline BM25F built in {:.2} s, tantivy in {:.2} s",
        baseline_built.as_secs_f64(),
        tantivy_built.as_secs_f64()
    );

    let paths = query_paths(2_000);
    let texts: Vec<String> = paths
        .iter()
        .filter_map(|p| api::broker::search_parameters::parse(p.split_once('?').map_or("", |(_, q)| q)).ok()?.q)
        .collect();
    let timed = |name: &str, run: &dyn Fn(&str) -> usize| {
        let mut times: Vec<Duration> = Vec::with_capacity(texts.len());
        let mut matched = 0usize;
        for q in &texts {
            let t = Instant::now();
            matched += run(q);
            times.push(t.elapsed());
        }
        times.sort();
        let pct = |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)].as_secs_f64() * 1e3;
        println!(
            "  {name:8} {} texts: p50 {:.2} ms, p99 {:.2} ms, {:.0} matches per query",
            texts.len(),
            pct(0.5),
            pct(0.99),
            matched as f64 / texts.len() as f64
        );
    };
    timed("baseline", &|q| baseline.search(q).len());
    timed("tantivy", &|q| tantivy.search(q).len());

    // Capability code, its word, an inflected form, a prefix.
    let judged: [(u8, &str, &str); 14] = [
        (1, "image", "images"),
        (2, "audio", "audios"),
        (5, "translation", "translating"),
        (6, "summarization", "summarize"),
        (7, "retrieval", "retrieve"),
        (9, "intelligence", "intelligent"),
        (10, "analytics", "analytic"),
        (11, "audit", "audits"),
        (12, "governance", "governing"),
        (13, "monitoring", "monitor"),
        (15, "fraud", "frauds"),
        (16, "coordination", "coordinate"),
        (17, "integration", "integrations"),
        (18, "automation", "automate"),
    ];
    let mut table = [[(0.0f64, 0.0f64); 3]; 2];
    for (code, word, inflected) in judged {
        let relevant: std::collections::HashSet<u32> =
            (0..agents.len() as u32).filter(|i| agents[*i as usize].capabilities.contains(&code)).collect();
        let prefix: String = word.chars().take(5).collect();
        for (form, q) in [word, inflected, prefix.as_str()].into_iter().enumerate() {
            for (engine, mut hits) in [baseline.search(q), tantivy.search(q)].into_iter().enumerate() {
                hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                let found = hits.iter().filter(|(doc, _)| relevant.contains(doc)).count();
                let top = hits.iter().take(20).filter(|(doc, _)| relevant.contains(doc)).count();
                table[engine][form].0 += found as f64 / relevant.len().max(1) as f64 / judged.len() as f64;
                table[engine][form].1 += top as f64 / 20.0 / judged.len() as f64;
            }
        }
    }
    println!("  relevance over {} capabilities (recall, precision at 20):", judged.len());
    for (engine, name) in ["baseline", "tantivy"].iter().enumerate() {
        let [w, i, p] = table[engine];
        println!(
            "  {name:8} word {:.2}, {:.2}; inflected {:.2}, {:.2}; prefix {:.2}, {:.2}",
            w.0, w.1, i.0, i.1, p.0, p.1
        );
    }

    let columns = search::columns::Columns::of(&agents);
    let index = AgentIndex::of_parts(search::records::Records::held(agents), tantivy, columns)?;
    let queries: Vec<SearchQuery> = paths
        .iter()
        .map(|p| {
            api::broker::search_parameters::parse(p.split_once('?').map_or("", |(_, q)| q))
                .map_err(|e| anyhow::anyhow!("{p}: {e}"))
        })
        .collect::<Result<_>>()?;
    let mut times = Vec::with_capacity(queries.len());
    let mut hits = 0usize;
    let started = Instant::now();
    for query in &queries {
        let t = Instant::now();
        hits += search(&index, query).hits.len();
        times.push(t.elapsed());
    }
    let total = started.elapsed();
    times.sort();
    let pct = |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)];
    println!(
        "search: {} distinct searches (text, filters, sorts, pages, aggregations): p50 {:.2} ms, p99 {:.2} ms, \
         {:.0} searches/s on one thread ({hits} hits)",
        times.len(),
        pct(0.5).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        times.len() as f64 / total.as_secs_f64()
    );
    Ok(())
}

/// Searches over a build's search index folder (`data/search/<id>`),
/// opened as the api opens it, on one thread, without HTTP: `queries`
/// distinct searches (`bench queries`), or the paths of the file `queries`
/// names (one a line: a kind of search to profile alone), three passes,
/// each search's median; p50 and p99 by kind of search (with text or not,
/// sorted or not).
fn search_folder(dir: &Path, queries: &str, overlay: usize) -> Result<()> {
    use search::bits::Bits;
    use search::query::{merge, search, AgentIndex, Part, SearchQuery};
    let started = Instant::now();
    let index = search::folder::open(dir)?.index;
    println!("opened {} agents in {:.2} s", index.len(), started.elapsed().as_secs_f64());
    // The live overlay as the api holds it after OVERLAY registrations
    // (settled into one segment, replacing none of the build's agents).
    let live = AgentIndex::build(broker_model::generate::agents(overlay, 77));
    let (none, none_live) = (Bits::empty(index.len()), Bits::empty(live.len()));
    let parts = [
        Part { index: &index, excluded: &none, reference: None },
        Part { index: &live, excluded: &none_live, reference: Some(&index.text) },
    ];
    let paths = match queries.parse() {
        Ok(n) => query_paths(n),
        Err(_) => {
            std::fs::read_to_string(queries).with_context(|| queries.to_string())?.lines().map(String::from).collect()
        }
    };
    let parsed: Vec<(String, SearchQuery)> = paths
        .iter()
        .map(|p| {
            let raw = p.split_once('?').map_or("", |(_, q)| q);
            api::broker::search_parameters::parse(raw).map(|q| (p.clone(), q)).map_err(|e| anyhow::anyhow!("{p}: {e}"))
        })
        .collect::<Result<_>>()?;
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); parsed.len()];
    for _ in 0..3 {
        for (n, (_, query)) in parsed.iter().enumerate() {
            let t = Instant::now();
            match overlay {
                0 => std::hint::black_box(search(&index, query).hits.len()),
                _ => std::hint::black_box(merge(&parts, query).hits.len()),
            };
            times[n].push(t.elapsed());
        }
    }
    let mut kinds: std::collections::BTreeMap<&str, Vec<Duration>> = Default::default();
    let mut slowest: Vec<(Duration, &str)> = Vec::new();
    for ((path, query), mut t) in parsed.iter().zip(times) {
        t.sort();
        let kind = match (query.q.is_some(), query.sort_by.is_some()) {
            (true, false) => "text, by relevance",
            (true, true) => "text, sorted",
            (false, _) => "no text",
        };
        kinds.entry("all").or_default().push(t[1]);
        kinds.entry(kind).or_default().push(t[1]);
        slowest.push((t[1], path));
    }
    slowest.sort_by(|a, b| b.cmp(a));
    for (kind, mut t) in kinds {
        t.sort();
        let pct = |p: f64| t[((t.len() as f64 * p) as usize).min(t.len() - 1)].as_secs_f64() * 1e3;
        // The mean is what bounds throughput; the percentiles, latency.
        let mean = t.iter().sum::<Duration>().as_secs_f64() * 1e3 / t.len() as f64;
        println!(
            "  {kind:20} {:5} searches: mean {mean:.3} ms, p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms",
            t.len(),
            pct(0.5),
            pct(0.9),
            pct(0.99)
        );
    }
    for (t, path) in slowest.iter().take(8) {
        println!("  slowest: {:.2} ms {path}", t.as_secs_f64() * 1e3);
    }
    Ok(())
}

/// A search index folder of `agents` generated agents in `dir` (see the
/// module's doc).
fn write_folder(agents: usize, dir: &Path) -> Result<()> {
    use broker_model::generate;
    use search::folder::Writer;
    use search::records::Batch;
    let started = Instant::now();
    let all = generate::agents(agents, 1);
    anyhow::ensure!(!dir.exists(), "{} exists", dir.display());
    let mut writer = Writer::create(dir, all.len(), None, 2, 128 << 20)?;
    for batch in all.chunks(4096) {
        let json = batch.iter().map(serde_json::to_string).collect::<Result<Vec<_>, _>>()?;
        let feedback = vec![&[][..]; batch.len()];
        writer.add(&Batch { agents: batch, json: &json, feedback: &feedback, vectors: None })?;
    }
    writer.finish(dir)?;
    println!("{agents} agents written to {} in {:.1} s", dir.display(), started.elapsed().as_secs_f64());
    Ok(())
}

/// Slow clients, as an attacker runs them (a slowloris): connections that
/// send nothing, and connections that send a head a field line at a time,
/// each replaced as soon as the server closes it.
fn slow(addr: &str, idle: usize, trickle: usize, seconds: u64) -> Result<()> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let addr: std::net::SocketAddr = addr.parse()?;
    let opened = Arc::new(AtomicUsize::new(0));
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    runtime.block_on(async {
        let until = tokio::time::Instant::now() + Duration::from_secs(seconds);
        let mut tasks = Vec::new();
        for n in 0..idle + trickle {
            let (opened, trickles) = (opened.clone(), n >= idle);
            tasks.push(tokio::spawn(async move {
                while tokio::time::Instant::now() < until {
                    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    };
                    opened.fetch_add(1, Ordering::Relaxed);
                    let mut buf = [0u8; 512];
                    if trickles {
                        let _ = stream.write_all(b"GET /hcs20/stats HTTP/1.1\r\nHost: localhost\r\n").await;
                        while tokio::time::Instant::now() < until {
                            if stream.write_all(b"X-Slow: 1\r\n").await.is_err() {
                                break;
                            }
                            let wait = tokio::time::sleep(Duration::from_secs(1));
                            tokio::select! {
                                _ = wait => {}
                                read = stream.read(&mut buf) => if matches!(read, Ok(0) | Err(_)) { break },
                            }
                        }
                    } else {
                        let _ = tokio::time::timeout_at(until, stream.read(&mut buf)).await;
                    }
                }
            }));
        }
        for task in tasks {
            let _ = task.await;
        }
    });
    println!(
        "slow clients: {} idle, {} trickling, {} connections opened in {seconds} s",
        idle,
        trickle,
        opened.load(Ordering::Relaxed)
    );
    Ok(())
}

/// `bench debits DIR SECONDS`: durable debits (each committed with
/// `synchronous=FULL` before it is answered) from 64 concurrent clients on
/// 8 accounts, through the api's store; first with one commit per debit
/// (the baseline), then with group commit as the api runs it.
fn debits(dir: &Path, seconds: u64) -> Result<()> {
    use api::store::credits::{self, Change, Kind, Posted};
    use api::store::{Settings, Store};

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let mut rates = Vec::new();
    for (label, max_batch) in [("one commit per debit", 1), ("group commit", Settings::default().max_batch)] {
        let path = dir.join(format!("debits-{max_batch}.sqlite"));
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        let store = Store::open(&path, Settings { max_batch, ..Settings::default() })?;
        let done = runtime.block_on(async {
            for account in 0..8 {
                let grant = Change {
                    account: format!("0.0.{account}"),
                    kind: Kind::Grant,
                    credits: i64::MAX / 16,
                    idempotency_key: "grant".into(),
                    reason: "bench".into(),
                    reference: None,
                };
                store.write(move |conn| credits::post(conn, &grant, 0)).await?;
            }
            for_clients(64, seconds, move |client, n| {
                let store = store.clone();
                async move {
                    let debit = Change {
                        account: format!("0.0.{}", client % 8),
                        kind: Kind::Debit,
                        credits: 1,
                        idempotency_key: format!("{client}-{n}"),
                        reason: "bench".into(),
                        reference: None,
                    };
                    let posted = store.write(move |conn| credits::post(conn, &debit, 0)).await?;
                    anyhow::ensure!(matches!(posted, Posted::Done { .. }), "{posted:?}");
                    Ok(())
                }
            })
            .await
        })?;
        let rate = done as f64 / seconds as f64;
        println!("durable debits, {label}: {rate:.0}/s ({done} in {seconds} s, 64 clients)");
        rates.push(rate);
    }
    println!("group commit: {:.1}x one commit per debit", rates[1] / rates[0]);
    Ok(())
}

/// `bench availability DIR AGENTS`: see the module's comment.
fn availability(dir: &Path, agents: usize) -> Result<()> {
    use api::store::availability::{record, Check, Outcome};
    use api::store::{Settings, Store};

    const BATCH: usize = 256;
    const DEFAULT_RATE: f64 = 100.0;
    std::fs::create_dir_all(dir)?;
    let path = dir.join("availability.sqlite");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let store = Store::open(&path, Settings::default())?;
    let round = |label: &str, outcome: &dyn Fn(usize) -> Outcome| -> Result<()> {
        let started = Instant::now();
        let mut published = 0;
        runtime.block_on(async {
            for first in (0..agents).step_by(BATCH) {
                let checks: Vec<Check> = (first..(first + BATCH).min(agents))
                    .map(|i| Check {
                        uaid: format!("uaid:aid:bench{i:09}"),
                        endpoint: format!("https://host{}.example/agents/{i}", i % 1000),
                        outcome: outcome(i),
                        at: 1_800_000_000_000 + i as i64,
                        latency_ms: Some(40),
                    })
                    .collect();
                published += store.write(move |conn| record(conn, &checks)).await?.len();
            }
            anyhow::Ok(())
        })?;
        let took = started.elapsed().as_secs_f64();
        println!(
            "availability, {label}: {agents} checks in {took:.1} s, {:.0}/s, {published} published",
            agents as f64 / took
        );
        Ok(())
    };
    round("first checks", &|_| Outcome::HostDown)?;
    round("a steady round", &|_| Outcome::HostDown)?;
    round("every tenth agent turns", &|i| if i % 10 == 0 { Outcome::Reached } else { Outcome::HostDown })?;
    drop(store);
    let bytes: u64 = ["", "-wal"]
        .iter()
        .filter_map(|suffix| std::fs::metadata(format!("{}{suffix}", path.display())).ok())
        .map(|m| m.len())
        .sum();
    println!(
        "availability: live store {:.1} MB, {:.0} bytes an agent (its outbox included)",
        bytes as f64 / 1e6,
        bytes as f64 / agents as f64
    );
    println!(
        "availability: a round calling each of {agents} agents at the default pace ({DEFAULT_RATE:.0}/s): {:.1} h",
        agents as f64 / DEFAULT_RATE / 3600.0
    );
    Ok(())
}

/// `bench signin BASE SECONDS`: sign-ins (challenge, ed25519 signature,
/// verify) from 16 concurrent clients against a running api.
fn signin(base: &str, seconds: u64) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    let http = http_client::client();
    let args = api::auth::login::LoginArgs {
        base: base.to_string(),
        account: "0.0.1001".into(),
        network: "testnet".into(),
        keys: None,
    };
    let key = std::sync::Arc::new(api::auth::login::key(&args)?);
    let total = runtime.block_on(for_clients(16, seconds, move |_, _| {
        let (http, args, key) = (http.clone(), args.clone(), key.clone());
        async move { api::auth::login::login(&http, &args, &key).await.map(drop) }
    }))?;
    println!("sign-ins (challenge + verify over HTTP): {:.0}/s", total as f64 / seconds as f64);
    Ok(())
}

/// Registers `agents` generated agents over HTTP (32 clients), filling
/// the api's live overlay: prints registrations per second and their
/// latency. The account's credits are granted in the store first.
/// `bench journal`: the next file of the api's journal in `dir`, of
/// `changes` agent events after those already there (half of them agents
/// registered, two fifths agents of `source` (an `agents.jsonl`) updated,
/// the rest deleted), as a layer over changed agents takes them.
fn journal(source: &Path, dir: &Path, changes: usize) -> Result<()> {
    use std::io::{BufRead, Write};
    use std::path::PathBuf;
    std::fs::create_dir_all(dir)?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    files.retain(|f| f.extension().is_some_and(|e| e == "jsonl"));
    files.sort();
    let (mut seq, mut gone) = (0u64, std::collections::HashSet::new());
    for file in &files {
        for line in std::fs::read_to_string(file)?.lines() {
            let record: serde_json::Value = serde_json::from_str(line)?;
            seq = record["seq"].as_u64().context("a journal record without seq")?;
            if record["event"] == "delete" {
                gone.insert(record["uaid"].as_str().unwrap_or_default().to_string());
            }
        }
    }
    let round = files.len() + 1;
    let (registered, updated) = (changes / 2, changes * 2 / 5);
    let deleted = changes - registered - updated;
    let at = "2026-11-24T11:00:00Z";
    let mut out = std::io::BufWriter::new(std::fs::File::create(dir.join(format!("{round:04}.jsonl")))?);
    let mut write = |event: serde_json::Value| -> Result<()> {
        seq += 1;
        let mut record = event;
        record["seq"] = seq.into();
        record["at"] = at.into();
        writeln!(out, "{record}")?;
        Ok(())
    };
    for (i, agent) in broker_model::generate::agents(registered, 7 + round as u64).into_iter().enumerate() {
        // Named for the round: no clash with the source's agents or an
        // earlier round's.
        let mut agent = serde_json::to_value(&agent)?;
        agent["id"] = format!("{}:journal-{round}-{i}", agent["registry"].as_str().unwrap_or_default()).into();
        let uaid =
            agent["uaid"].as_str().unwrap_or_default().replacen(";uid=", &format!(";uid=journal-{round}-{i}-"), 1);
        if agent["profile"].get("uaid").is_some() {
            agent["profile"]["uaid"] = uaid.clone().into();
        }
        agent["uaid"] = uaid.into();
        write(serde_json::json!({"event": "register", "agent": agent}))?;
    }
    // The existing agents changed, spread over the source.
    let lines = std::io::BufReader::new(std::fs::File::open(source)?).lines().count();
    let step = (lines / (updated + deleted).max(1)).max(1);
    let (mut changed, mut kept) = (0, Vec::new());
    for (i, line) in std::io::BufReader::new(std::fs::File::open(source)?).lines().enumerate() {
        if changed == updated + deleted {
            break;
        }
        if !(i + round * 7).is_multiple_of(step) {
            continue;
        }
        let mut agent: serde_json::Value = serde_json::from_str(&line?)?;
        if gone.contains(agent["uaid"].as_str().unwrap_or_default()) {
            continue;
        }
        changed += 1;
        if changed <= updated {
            let description =
                format!("{} Revised in round {round}.", agent["description"].as_str().unwrap_or_default());
            agent["description"] = description.into();
            agent["updatedAt"] = at.into();
            write(serde_json::json!({"event": "update", "agent": agent}))?;
        } else {
            kept.push(agent["uaid"].clone());
        }
    }
    for uaid in kept {
        write(serde_json::json!({"event": "delete", "uaid": uaid}))?;
    }
    out.flush()?;
    Ok(())
}

/// Registers `agents` agents over HTTP, 32 clients spread over the apis
/// at `bases` (which share the store at `store`, where the account is
/// granted its credits first).
fn register(bases: &[String], store: &live_store::Location, agents: usize) -> Result<()> {
    use api::store::credits::{self, Change, Kind};
    use api::store::{Settings, Store};

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let account = "0.0.1001";
    let base = &bases[0];
    let args = api::auth::login::LoginArgs {
        base: base.to_string(),
        account: account.into(),
        network: "testnet".into(),
        keys: None,
    };
    let http = http_client::client();
    let key = runtime.block_on(async {
        let store = Store::open(store.clone(), Settings::default())?;
        let grant = Change {
            account: account.into(),
            kind: Kind::Grant,
            credits: 1 << 40,
            idempotency_key: format!("bench-register-{}", std::process::id()),
            reason: "bench".into(),
            reference: None,
        };
        store.write(move |conn| credits::post(conn, &grant, 0)).await?;
        let signing = api::auth::login::key(&args)?;
        let verified = api::auth::login::login(&http, &args, &signing).await?;
        verified["key"].as_str().map(str::to_string).context("the sign-in gave no key")
    })?;
    let bodies: Vec<serde_json::Value> = broker_model::generate::agents(agents, 5)
        .into_iter()
        .enumerate()
        .map(|(i, agent)| {
            serde_json::json!({
                "profile": {"version": "1.0", "type": 1, "display_name": agent.name, "bio": agent.description,
                            "aiAgent": {"type": 1, "model": "gpt-4o", "capabilities": agent.capabilities}},
                "endpoint": format!("https://bench-{}-{i}.example/a2a", std::process::id()),
                "communicationProtocol": "a2a",
            })
        })
        .collect();
    let bodies = std::sync::Arc::new(std::sync::Mutex::new(bodies));
    let started = Instant::now();
    let tasks: Vec<_> = (0..32)
        .map(|client| {
            let base = &bases[client % bases.len()];
            let (http, bodies, key, url) =
                (http.clone(), bodies.clone(), key.clone(), format!("{base}/api/v1/register"));
            runtime.spawn(async move {
                let mut times = Vec::new();
                loop {
                    let Some(body) = bodies.lock().expect("bodies").pop() else { break };
                    let sent = Instant::now();
                    let response = http.post(&url).header("x-api-key", &key).json(&body).send().await?;
                    anyhow::ensure!(response.status() == 200, "{}: {}", response.status(), response.text().await?);
                    times.push(sent.elapsed());
                }
                Ok::<_, anyhow::Error>(times)
            })
        })
        .collect();
    let mut times = Vec::new();
    for task in tasks {
        times.extend(runtime.block_on(task)??);
    }
    let elapsed = started.elapsed();
    times.sort();
    let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    println!(
        "registrations over HTTP (32 clients, {} api{}): {agents} in {:.1} s, {:.0}/s, latency p50 {:.1} ms p99 {:.1} ms",
        bases.len(),
        if bases.len() == 1 { "" } else { "s" },
        elapsed.as_secs_f64(),
        agents as f64 / elapsed.as_secs_f64(),
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3
    );
    Ok(())
}

/// Two apis on the build in `site` and `data` sharing a live store in a
/// throwaway PostgreSQL cluster (synced, as a deployment runs it):
/// registrations over HTTP through both, then how long an agent
/// registered through one takes to be found through the other (`probes`
/// times each way: register, then search the other until it answers).
fn replicas(site: &Path, data: &Path, agents: usize, probes: usize) -> Result<()> {
    let cluster = pg_scratch::Cluster::start(pg_scratch::Durability::Synced)?;
    let url = cluster.create_database("bench")?;
    let journals = tests::TempDir::new("bench-replicas");
    let mut apis = Vec::new();
    for n in 0..2 {
        let journal = journals.path().join(format!("journal-{n}"));
        apis.push(start_api(site, data, &["--store", &url, "--journal-dir", journal.to_str().context("a path")?])?);
    }
    let bases: Vec<String> = apis.iter().map(|(_, base)| base.clone()).collect();
    register(&bases, &live_store::Location::Postgres(url.clone()), agents)?;

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let http = http_client::client();
    let args = api::auth::login::LoginArgs {
        base: bases[0].clone(),
        account: "0.0.1001".into(),
        network: "testnet".into(),
        keys: None,
    };
    let mut delays = runtime.block_on(async {
        let signing = api::auth::login::key(&args)?;
        let verified = api::auth::login::login(&http, &args, &signing).await?;
        let key = verified["key"].as_str().context("the sign-in gave no key")?.to_string();
        let mut delays = Vec::new();
        for probe in 0..probes * 2 {
            let (through, seen_at) = (&bases[probe % 2], &bases[1 - probe % 2]);
            let word = format!("probe{}x{probe}", std::process::id());
            let body = serde_json::json!({
                "profile": {"version": "1.0", "type": 1, "display_name": format!("Visibility {word}"),
                            "bio": "a probe", "aiAgent": {"type": 1, "model": "gpt-4o", "capabilities": [0]}},
                "endpoint": format!("https://{word}.example/a2a"),
                "communicationProtocol": "a2a",
            });
            let response =
                http.post(format!("{through}/api/v1/register")).header("x-api-key", &key).json(&body).send().await?;
            anyhow::ensure!(response.status() == 200, "{}: {}", response.status(), response.text().await?);
            let registered = Instant::now();
            let search = format!("{seen_at}/api/v1/search?q={word}");
            loop {
                let found: serde_json::Value = http.get(&search).send().await?.json().await?;
                if found["total"].as_u64().unwrap_or(0) > 0 {
                    break;
                }
                anyhow::ensure!(registered.elapsed() < Duration::from_secs(30), "{word} was never found");
            }
            delays.push(registered.elapsed());
        }
        Ok::<_, anyhow::Error>(delays)
    })?;
    delays.sort();
    let at = |q: f64| delays[((delays.len() as f64 * q) as usize).min(delays.len() - 1)].as_secs_f64() * 1e3;
    println!(
        "cross-replica visibility ({} probes, each way): an agent registered through one api is found through the other after p50 {:.1} ms, p99 {:.1} ms, at most {:.1} ms",
        probes,
        at(0.5),
        at(0.99),
        at(1.0)
    );
    apis.into_iter().for_each(stop_api);
    pinned_search(site, data, &url, &journals.path().join("journal-pinned"))?;
    cluster.stop();
    Ok(())
}

/// Search throughput of one api pinned to one CPU (`taskset`) against two
/// apis pinned to one CPU each on the same store, three rounds, the
/// order alternated: `wrk` with bench/search.lua, 32 connections in all (two
/// `wrk`s of 16 for two apis, each at its own). wrk runs unpinned, so on
/// a 2-CPU machine it shares the CPUs the two apis hold.
fn pinned_search(site: &Path, data: &Path, url: &str, journal: &Path) -> Result<()> {
    let script = shared::checkout::root().join("bench/search.lua");
    let wrk = |base: &str, threads: &str, connections: &str| -> Result<std::process::Child> {
        std::process::Command::new("wrk")
            .args(["-t", threads, "-c", connections, "-d10s", "-s"])
            .arg(&script)
            .arg(base)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .context("running wrk (bench/run.sh installs it)")
    };
    let rate = |child: std::process::Child| -> Result<f64> {
        let out = String::from_utf8(child.wait_with_output()?.stdout)?;
        let line = out.lines().find(|l| l.starts_with("Requests/sec:")).context("wrk printed no rate")?;
        Ok(line.split_whitespace().nth(1).context("a rate")?.parse()?)
    };
    // Started, and serving the build (its load is not measured).
    let pinned = |cpu: usize| -> Result<(std::process::Child, String)> {
        let flags = ["--store", url, "--journal-dir", journal.to_str().context("a path")?];
        let api = start_api_with(site, data, &flags, &["taskset", "-c", &cpu.to_string()])?;
        let started = Instant::now();
        loop {
            let health: serde_json::Value = http_client::blocking::get(format!("{}/health", api.1))?.json()?;
            if health["build"].is_string() {
                break Ok(api);
            }
            anyhow::ensure!(started.elapsed() < Duration::from_secs(120), "the api loaded no build");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let one = || -> Result<f64> {
        let api = pinned(0)?;
        let rate = rate(wrk(&api.1, "2", "32")?)?;
        stop_api(api);
        Ok(rate)
    };
    let two = || -> Result<f64> {
        let apis = [pinned(0)?, pinned(1)?];
        let loads = [wrk(&apis[0].1, "1", "16")?, wrk(&apis[1].1, "1", "16")?];
        let mut both = 0.0;
        for load in loads {
            both += rate(load)?;
        }
        apis.into_iter().for_each(stop_api);
        Ok(both)
    };
    for round in 1..=3 {
        // Alternated: one api first in odd rounds, two in even ones.
        let (single, both) = match round % 2 {
            1 => (one()?, two()?),
            _ => {
                let both = two()?;
                (one()?, both)
            }
        };
        println!(
            "round {round}: search, one api on CPU 0 {single:.0}/s; two apis on CPUs 0 and 1 {both:.0}/s ({:.2}x)",
            both / single
        );
    }
    Ok(())
}

fn stop_api((mut child, _): (std::process::Child, String)) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Starts the api beside this binary on the build in `site` and `data`,
/// on a port the system picks: the process and its base URL.
fn start_api(site: &Path, data: &Path, flags: &[&str]) -> Result<(std::process::Child, String)> {
    start_api_with(site, data, flags, &[])
}

/// [`start_api`] run by `wrapper` (`taskset -c 0`, say), when not empty.
fn start_api_with(site: &Path, data: &Path, flags: &[&str], wrapper: &[&str]) -> Result<(std::process::Child, String)> {
    use std::io::{BufRead, BufReader};
    let api = std::env::current_exe()?.with_file_name("api");
    let mut command = match wrapper.split_first() {
        Some((program, args)) => {
            let mut command = std::process::Command::new(program);
            command.args(args).arg(api);
            command
        }
        None => std::process::Command::new(api),
    };
    // No availability checks: the build's agents are not on this machine,
    // and a benchmark calls loopback only.
    let mut child = command
        .env("ALMANAC_AVAILABILITY_EVERY_S", "0")
        .args(["--bind", "127.0.0.1:0", "--site-dir"])
        .arg(site)
        .arg("--data-dir")
        .arg(data)
        .args(flags)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    let stdout = child.stdout.take().context("a piped stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let base = loop {
        let line = lines.next().context("the api ended before it listened")??;
        if let Some(addr) = line.strip_prefix("api listening on ") {
            break addr.to_string();
        }
    };
    // The rest of its output is read away, so the pipe never fills.
    std::thread::spawn(move || lines.for_each(drop));
    Ok((child, base))
}

/// Runs `clients` clients until `seconds` have passed, each doing `op`
/// (told its client number and how many it did before) again and again;
/// returns how many were done in all.
async fn for_clients<F, Fut>(clients: usize, seconds: u64, op: F) -> Result<u64>
where
    F: Fn(usize, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<()>> + Send,
{
    let until = Instant::now() + Duration::from_secs(seconds);
    let tasks: Vec<_> = (0..clients)
        .map(|client| {
            let op = op.clone();
            tokio::spawn(async move {
                let mut n = 0u64;
                while Instant::now() < until {
                    op(client, n).await?;
                    n += 1;
                }
                Ok::<u64, anyhow::Error>(n)
            })
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await??;
    }
    Ok(total)
}

/// The `q` quantile of sorted `values`.
fn quantile(values: &[Duration], q: f64) -> Duration {
    values[((values.len() as f64 - 1.0) * q).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Starts the api's demo A2A agent in this process (each streamed word
/// after `pace`): its base URL.
async fn demo_agent(pace: Duration) -> Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/", listener.local_addr()?);
    tokio::spawn(warp::serve(api::demo::a2a(url.clone(), pace)).incoming(listener).run());
    Ok(url.trim_end_matches('/').to_string())
}

/// One POST, timed to its whole answer, or (`first`) to the first bytes
/// that hold `first` (the first text of a stream).
async fn timed(
    http: &reqwest::Client,
    url: &str,
    body: &serde_json::Value,
    headers: &[(&str, &str)],
    first: Option<&str>,
) -> Result<Duration> {
    let started = Instant::now();
    let mut request = http.post(url).json(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let mut response = request.send().await?;
    anyhow::ensure!(response.status().is_success(), "{url} answered {}", response.status());
    if let Some(marker) = first {
        let mut seen = Vec::new();
        while let Some(chunk) = response.chunk().await? {
            seen.extend_from_slice(&chunk);
            if seen.windows(marker.len()).any(|w| w == marker.as_bytes()) {
                return Ok(started.elapsed());
            }
        }
        anyhow::bail!("{url}: the stream ended before {marker}");
    }
    response.bytes().await?;
    Ok(started.elapsed())
}

/// The relay's cost: `messages` sequential turns sent straight to a
/// local A2A agent and the same number through the api (a session opened
/// by its URL), interleaved so that noise hits both alike; then the time
/// to the first byte of a streamed reply, direct and relayed.
fn chat(base: &str, messages: usize) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    runtime.block_on(async {
        let http = http_client::client();
        let agent = demo_agent(Duration::ZERO).await?;
        let session = open_session(&http, base, &agent).await?;
        let direct_body = |i: usize, method: &str| {
            serde_json::json!({"jsonrpc": "2.0", "id": i, "method": method, "params": {"message": {
                "messageId": format!("m{i}"), "role": "ROLE_USER", "parts": [{"text": "how high is the tide"}]}}})
        };
        let relayed_body = serde_json::json!({"sessionId": session, "message": "how high is the tide"});
        let a2a = [("a2a-version", "1.0")];
        let message = format!("{base}/api/v1/chat/message");
        let (mut direct, mut relayed) = (Vec::new(), Vec::new());
        for i in 0..messages {
            direct.push(timed(&http, &format!("{agent}/"), &direct_body(i, "SendMessage"), &a2a, None).await?);
            relayed.push(timed(&http, &message, &relayed_body, &[], None).await?);
        }
        direct.sort();
        relayed.sort();
        for (name, q) in [("p50", 0.5), ("p99", 0.99)] {
            let (d, r) = (quantile(&direct, q), quantile(&relayed, q));
            println!(
                "chat turn {name}: direct {:.2} ms, relayed {:.2} ms, added {:.2} ms",
                ms(d),
                ms(r),
                ms(r) - ms(d)
            );
        }
        // The first text of a stream (the agent paces its words 20 ms apart,
        // the first at once): its first artifact chunk, direct, against the
        // first relayed event.
        let paced = demo_agent(Duration::from_millis(20)).await?;
        let session = open_session(&http, base, &paced).await?;
        let stream_body =
            serde_json::json!({"sessionId": session, "message": "stream the tide table", "streaming": true});
        let (mut direct, mut relayed) = (Vec::new(), Vec::new());
        for i in 0..200 {
            let headers = [("a2a-version", "1.0"), ("accept", "text/event-stream")];
            let body = direct_body(i, "SendStreamingMessage");
            direct.push(timed(&http, &format!("{paced}/"), &body, &headers, Some("artifactUpdate")).await?);
            let events = [("accept", "text/event-stream")];
            relayed.push(timed(&http, &message, &stream_body, &events, Some("\"text\"")).await?);
        }
        direct.sort();
        relayed.sort();
        println!(
            "first streamed text, median: direct {:.2} ms, relayed {:.2} ms (p99 {:.2} / {:.2} ms)",
            ms(quantile(&direct, 0.5)),
            ms(quantile(&relayed, 0.5)),
            ms(quantile(&direct, 0.99)),
            ms(quantile(&relayed, 0.99))
        );
        Ok(())
    })
}

/// Opens a chat session with the agent at `agent`: its id.
async fn open_session(http: &reqwest::Client, base: &str, agent: &str) -> Result<String> {
    let session: serde_json::Value = http
        .post(format!("{base}/api/v1/chat/session"))
        .json(&serde_json::json!({"agentUrl": agent}))
        .send()
        .await?
        .json()
        .await?;
    Ok(session["sessionId"].as_str().context("no session")?.to_string())
}

/// Resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).context("no VmRSS")?;
    Ok(line.split_whitespace().nth(1).context("no value")?.parse()?)
}

/// Holds `count` streams open at once through the api (each a session
/// with an agent that sends a word a second for a minute), and prints the
/// api's resident memory before and with them.
fn streams(base: &str, api_pid: u32, count: usize) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(async {
        let http = http_client::builder().pool_max_idle_per_host(0).build()?;
        let agent = demo_agent(Duration::from_secs(1)).await?;
        let before = rss_kib(api_pid)?;
        let started = Instant::now();
        let mut open = Vec::with_capacity(count);
        let mut sessions = Vec::with_capacity(count);
        for chunk in (0..count).collect::<Vec<_>>().chunks(200) {
            let made = futures_util::future::join_all(chunk.iter().map(|_| {
                let http = http.clone();
                let (agent, base) = (agent.clone(), base.to_string());
                async move { open_session(&http, &base, &agent).await }
            }))
            .await;
            for session in made {
                sessions.push(session?);
            }
        }
        for chunk in sessions.chunks(200) {
            let made = futures_util::future::join_all(chunk.iter().map(|session| {
                let http = http.clone();
                let base = base.to_string();
                let body = serde_json::json!({"sessionId": session, "message": "a long tide table, word by word please",
                    "streaming": true});
                async move {
                    let mut response =
                        http.post(format!("{base}/api/v1/chat/message")).header("accept", "text/event-stream").json(&body).send().await?;
                    anyhow::ensure!(response.status().is_success(), "a stream answered {}", response.status());
                    response.chunk().await?;
                    anyhow::Ok(response)
                }
            }))
            .await;
            for response in made {
                open.push(response?);
            }
        }
        let opened = started.elapsed();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let with = rss_kib(api_pid)?;
        println!(
            "{} concurrent relayed streams open in {:.1} s; api RSS {} MiB before, {} MiB with them: {:.1} KiB a stream",
            open.len(),
            opened.as_secs_f64(),
            before / 1024,
            with / 1024,
            (with.saturating_sub(before)) as f64 / open.len() as f64
        );
        drop(open);
        Ok(())
    })
}

/// Prints `n` distinct search paths (see the module's doc).
fn queries(n: usize) -> Result<()> {
    let mut out = String::new();
    for path in query_paths(n) {
        out.push_str(&path);
        out.push('\n');
    }
    print!("{out}");
    Ok(())
}

/// `n` distinct search paths (see `bench queries`), the same every time.
fn query_paths(n: usize) -> Vec<String> {
    use broker_model::generate::{vocabulary, Rng};
    let (words, registries, protocols) = vocabulary();
    let mut rng = Rng::new(2026);
    let pick = |list: &[&'static str], rng: &mut Rng| list[rng.below(list.len() as u64) as usize];
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(n);
    while seen.len() < n {
        let mut params: Vec<String> = Vec::new();
        let terms = [0, 1, 1, 1, 2, 2, 3][rng.below(7) as usize];
        if terms > 0 {
            let mut q: Vec<String> = (0..terms).map(|_| pick(&words, &mut rng).to_lowercase()).collect();
            match rng.below(10) {
                // A stem or a prefix of the last word, as people type.
                0 => q.last_mut().into_iter().for_each(|w| w.truncate(w.len().clamp(3, 5))),
                1 => q.last_mut().into_iter().for_each(|w| w.push('s')),
                _ => {}
            }
            params.push(format!("q={}", q.join("+")));
        }
        let mut maybe = |percent: u64, param: String| {
            if rng.below(100) < percent {
                params.push(param);
            }
        };
        maybe(30, format!("registries={}", pick(&registries, &mut Rng::new(seen.len() as u64))));
        maybe(15, format!("protocols={}", pick(&protocols, &mut Rng::new(seen.len() as u64 + 7))));
        maybe(10, format!("type={}", ["ai-agents", "mcp-servers"][seen.len() % 2]));
        maybe(10, "online=true".into());
        maybe(10, format!("minTrust={}", 20 + seen.len() % 60));
        maybe(10, "metadata.isFree=true".into());
        maybe(25, format!("sortBy={}", ["trust-score", "name", "most-recent"][seen.len() % 3]));
        maybe(20, format!("page={}", 2 + seen.len() % 19));
        maybe(20, format!("limit={}", [10, 20, 50][seen.len() % 3]));
        let path = match params.is_empty() {
            true => "/api/v1/search".to_string(),
            false => format!("/api/v1/search?{}", params.join("&")),
        };
        if seen.insert(path.clone()) {
            out.push(path);
        }
    }
    out
}

/// Prints `n` agent-detail routes of the build in `dir` and their files.
fn sample(dir: &Path, n: usize) -> Result<()> {
    let index = shared::index::Index::open(dir)?;
    let details: Vec<(String, String)> = index
        .iter()
        .filter(|r| r.route.starts_with("/api/v1/agents/") && r.route.matches('/').count() == 4)
        .map(|r| (r.route, r.file))
        .collect();
    anyhow::ensure!(!details.is_empty(), "the build has no agents");
    let mut rng = broker_model::generate::Rng::new(7);
    let mut out = String::new();
    for _ in 0..n.min(details.len()) {
        let (route, file) = &details[rng.below(details.len() as u64) as usize];
        out.push_str(&format!("{route} /{file}\n"));
    }
    print!("{out}");
    Ok(())
}
