//! Pipeline benchmark (measures, asserts nothing): corpus split, ingest, unchanged re-ingest
//! and retrieval latency on generated Spanish campaigns of 100 and 1000 sessions, then the
//! warm oracle (the bot's case: the process already running, the index open): a whole search
//! call through `Notes::search`, and the same with the real e5-small query embedding when its
//! model file is present.
//!
//! Embedding is excluded from the first figures: a feature-hashing embedder stands in for the
//! model (microseconds per text), so they are the pipeline's own cost. Run:
//! `cargo bench --bench pipeline` (release) or `cargo bench --profile dev --bench pipeline`.
//!
//! Two more groups time the parser itself: the sample campaign (`eval/campaign/`) split and
//! ingested, and one note that is a single long line of secret markers (`%%`, `<!--`), which
//! a parser that rescans the rest of the line for each marker would stall on. Name groups to
//! run only those: `cargo bench --profile dev --bench pipeline -- sample markers`
//! (`generated`, `sample`, `markers`; none named: all).

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use async_trait::async_trait;
use oraculo::config::{CampaignConfig, DEFAULT_IGNORED, DEFAULT_MAX_NOTE_BYTES};
use oraculo::corpus::{self, CorpusConfig, LabelLanguage, default_kind_folders};
use oraculo::index::{Index, campaign_index_dir};
use oraculo::ingest::{Quiet, ingest_campaign};
use oraculo::llm::chat::NoChat;
use oraculo::llm::{EmbedRole, Embedder, LlmError, normalize};
use oraculo::oracle::{AnswerSettings, AskRequest, Oracle};
use oraculo::retrieve::{Audience, CompendiumIndex, DEFAULT_K, PathSet, SearchRequest, search};

const DIMENSION: usize = 384;
const WORDS_PER_SESSION: usize = 600;

const NAMES: &[&str] = &[
    "Baika",
    "Norkiel",
    "Vaskrith",
    "Ulrico",
    "Selvia",
    "Tomás",
    "Mendaña",
    "Ayla",
    "Garrik",
    "Oriana",
    "Brunhilda",
    "Zafira",
    "Teodoro",
    "Lucana",
    "Ferrán",
    "Ismara",
    "Quintín",
    "Rocío",
    "Aldebrán",
    "Yelena",
    "Bastián",
    "Cyrena",
    "Doroteo",
    "Elvira",
    "Fausto",
    "Gisela",
    "Hernán",
    "Irune",
    "Jacinta",
    "Kasimir",
];
const WORDS: &[&str] = &[
    "el",
    "grupo",
    "llega",
    "al",
    "puerto",
    "de",
    "Galerna",
    "donde",
    "una",
    "tormenta",
    "arrasa",
    "los",
    "muelles",
    "y",
    "la",
    "guardia",
    "busca",
    "culpables",
    "entre",
    "pescadores",
    "mientras",
    "el",
    "archiduque",
    "reúne",
    "tropas",
    "en",
    "el",
    "norte",
    "una",
    "estatua",
    "de",
    "bronce",
    "desaparece",
    "del",
    "templo",
    "nadie",
    "sabe",
    "quién",
    "la",
    "robó",
    "pero",
    "las",
    "huellas",
    "llevan",
    "hacia",
    "el",
    "faro",
    "abandonado",
    "allí",
    "encuentran",
    "mapas",
    "antiguos",
    "monedas",
    "de",
    "plata",
    "y",
    "un",
    "diario",
    "escrito",
    "con",
    "tinta",
    "roja",
    "cayó",
    "en",
    "combate",
    "defendiendo",
    "el",
    "puente",
    "el",
    "dragón",
    "blanco",
    "vuela",
    "sobre",
    "la",
    "bahía",
    "los",
    "héroes",
    "negocian",
    "con",
    "el",
    "gremio",
    "de",
    "tejedores",
    "que",
    "exige",
    "oro",
    "a",
    "cambio",
    "de",
    "información",
    "sobre",
    "la",
    "orden",
    "secreta",
];

/// Deterministic feature hashing: microseconds per text, so embedding drops out of the figures.
struct HashEmbedder {
    calls: AtomicUsize,
}

#[async_trait]
impl Embedder for HashEmbedder {
    fn id(&self) -> &str {
        "bench-hash"
    }
    fn dimension(&self) -> usize {
        DIMENSION
    }
    fn window_words(&self) -> usize {
        4000
    }
    async fn embed(&self, texts: &[String], _role: EmbedRole) -> Result<Vec<Vec<f32>>, LlmError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(texts
            .iter()
            .map(|text| {
                let mut vector = vec![0.0f32; DIMENSION];
                for word in text.split_whitespace() {
                    let hash =
                        word.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3));
                    vector[(hash % DIMENSION as u64) as usize] += 1.0;
                }
                vector[0] += 0.01;
                normalize(&mut vector);
                vector
            })
            .collect())
    }
}

/// A small deterministic generator (xorshift), so every run writes the same campaign.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 as usize
    }
}

fn write_campaign(dir: &Path, n_sessions: usize) {
    let mut rng = Rng(0x9e3779b97f4a7c15);
    std::fs::create_dir_all(dir.join("Sesiones")).unwrap();
    std::fs::create_dir_all(dir.join("PNJs")).unwrap();
    for name in NAMES {
        std::fs::write(
            dir.join("PNJs").join(format!("{name}.md")),
            format!("# {name}\nPersonaje de la campaña, visto en el puerto.\n"),
        )
        .unwrap();
    }
    for session in 1..=n_sessions {
        let mut text = format!("# Sesión {session}\n\n");
        for i in 0..WORDS_PER_SESSION {
            if i % 40 == 0 {
                text.push_str(NAMES[rng.next() % NAMES.len()]);
            } else {
                text.push_str(WORDS[rng.next() % WORDS.len()]);
            }
            text.push(if i % 15 == 14 { '\n' } else { ' ' });
        }
        std::fs::write(dir.join("Sesiones").join(format!("Sesion {session}.md")), text).unwrap();
    }
}

fn campaign_config() -> CampaignConfig {
    CampaignConfig {
        dir: None,
        corpus: CorpusConfig {
            label_language: LabelLanguage::Es,
            kind_folders: default_kind_folders(),
            secret_paths: Vec::new(),
            secret_words: oraculo::corpus::default_secret_words(),
            player_paths: Vec::new(),
            session_patterns: oraculo::corpus::SessionPattern::defaults(),
        },
        ignore: DEFAULT_IGNORED.iter().map(|s| s.to_string()).collect(),
        max_note_bytes: DEFAULT_MAX_NOTE_BYTES,
        watch: oraculo::config::WatchConfig::default(),
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The figures a run records for the side-by-side table: (what, milliseconds).
type Figures = Vec<(String, f64)>;

async fn bench_campaign(n_sessions: usize, figures: &mut Figures) {
    let campaign = tempfile::TempDir::new().unwrap();
    let data = tempfile::TempDir::new().unwrap();
    write_campaign(campaign.path(), n_sessions);
    let config = campaign_config();

    // 1. Parse + fragment only (pure corpus).
    let started = Instant::now();
    let mut sources = Vec::new();
    for entry in walkdir::WalkDir::new(campaign.path()).into_iter().flatten().filter(|e| e.file_type().is_file()) {
        let text = std::fs::read_to_string(entry.path()).unwrap();
        let path = entry.path().strip_prefix(campaign.path()).unwrap().to_string_lossy().to_string();
        sources.push((path, text));
    }
    let fragments = split_sources(&sources, &config.corpus);
    let split_s = started.elapsed().as_secs_f64();

    // 2. Full ingest: read, split, compendium, FTS, vectors (hash embedder), commit.
    let embedder = HashEmbedder { calls: AtomicUsize::new(0) };
    let index_dir = campaign_index_dir(data.path(), campaign.path());
    let mut index = Index::open(&index_dir).await.unwrap();
    let started = Instant::now();
    let first = ingest_campaign(&mut index, campaign.path(), &config, &embedder, 64, &Quiet).await.unwrap();
    let ingest_s = started.elapsed().as_secs_f64();

    // 3. Unchanged re-ingest.
    let calls_before = embedder.calls.load(Ordering::Relaxed);
    let started = Instant::now();
    let again = ingest_campaign(&mut index, campaign.path(), &config, &embedder, 64, &Quiet).await.unwrap();
    let reingest_s = started.elapsed().as_secs_f64();
    let reingest_calls = embedder.calls.load(Ordering::Relaxed) - calls_before;

    println!(
        "{n_sessions} sessions ({} fragments, {} entities): split {:.3} s | ingest {:.3} s ({} windows, {} calls) | unchanged re-ingest {:.3} s, {} embedding calls (changed files {})",
        fragments.len(),
        first.entities,
        split_s,
        ingest_s,
        first.windows_embedded,
        first.embedding_calls,
        reingest_s,
        reingest_calls,
        again.files_changed,
    );

    // 4. Retrieval: three paths + fusion, query embedding excluded.
    let compendium = CompendiumIndex::load(&index.store, Audience::Player).unwrap();
    let questions = [
        "¿Qué pasó con el archiduque?",
        "¿Quién cayó en combate en el puente?",
        "¿Dónde está la estatua de bronce?",
        "¿Qué sabemos de Baika?",
        "¿Qué hizo Norkiel en el faro?",
        "¿Quién robó el diario de tinta roja?",
        "¿Qué exige el gremio de tejedores?",
        "¿Qué relación hay entre Vaskrith y la bahía?",
        "¿Por qué la guardia busca culpables?",
        "¿Y Ulrico?",
    ];
    let mut totals = Vec::new();
    let mut window_ms = Vec::new();
    let mut pool_sizes = Vec::new();
    for round in 0..5 {
        for question in questions {
            let request =
                SearchRequest { question, history: &[], audience: Audience::Player, k: DEFAULT_K, paths: PathSet::ALL };
            let result = search(&index, &compendium, &embedder, &request).await.unwrap();
            let t = &result.timings;
            let windows = rank_chosen_windows(&index, &result, embedder.window_words());
            if round > 0 {
                totals.push(t.dense_ms + t.bm25_ms + t.entity_ms + t.fuse_ms);
                window_ms.push(windows);
                pool_sizes.push(result.candidates.len());
            }
        }
    }
    window_ms.sort_by(f64::total_cmp);
    figures.push((format!("{n_sessions} sessions: window ranking of the top k p50"), percentile(&window_ms, 0.5)));
    figures.push((format!("{n_sessions} sessions: window ranking of the top k p95"), percentile(&window_ms, 0.95)));
    println!(
        "{n_sessions} sessions: the top {DEFAULT_K}'s windows ranked (BM25 over their windows + the fusion) p50 {:.2} ms, p95 {:.2} ms",
        percentile(&window_ms, 0.5),
        percentile(&window_ms, 0.95),
    );
    totals.sort_by(f64::total_cmp);
    let paths_p50 = percentile(&totals, 0.5);
    figures.push((format!("{n_sessions} sessions: paths + fusion p50"), paths_p50));
    figures.push((format!("{n_sessions} sessions: paths + fusion p95"), percentile(&totals, 0.95)));
    let mean_pool = pool_sizes.iter().sum::<usize>() as f64 / pool_sizes.len() as f64;
    println!(
        "{n_sessions} sessions: paths + fusion p50 {:.1} ms, p95 {:.1} ms over {} searches; pool {:.1} candidates on average (min {}, max {})",
        percentile(&totals, 0.5),
        percentile(&totals, 0.95),
        totals.len(),
        mean_pool,
        pool_sizes.iter().min().unwrap(),
        pool_sizes.iter().max().unwrap(),
    );
    drop(index);

    // 5. The warm oracle: one Oracle kept across questions, as the bot keeps it (the index
    // stays open between questions, the compendium matcher is built once per generation).
    let warm = |embedder: std::sync::Arc<dyn Embedder>| {
        Oracle::new(&index_dir, embedder, std::sync::Arc::new(NoChat), AnswerSettings::new(256))
    };
    let oracle = warm(std::sync::Arc::new(HashEmbedder { calls: AtomicUsize::new(0) }));
    let (search_p50, search_p95) = warm_searches(&oracle, &questions).await;
    figures.push((format!("{n_sessions} sessions: warm search call p50 (hash embedder)"), search_p50));
    println!(
        "{n_sessions} sessions, warm oracle (hash embedder): whole search call p50 {search_p50:.1} ms, p95 {search_p95:.1} ms (paths + fusion alone p50 {paths_p50:.1} ms)"
    );
    if n_sessions == 100
        && let Some(e5) = e5_embedder()
    {
        let mut embed_ms = Vec::new();
        for question in questions.iter().cycle().take(50) {
            let started = Instant::now();
            e5.embed(&[question.to_string()], EmbedRole::Query).await.unwrap();
            embed_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        embed_ms.sort_by(f64::total_cmp);
        figures.push(("e5-small query embedding p50".to_string(), percentile(&embed_ms, 0.5)));
        figures.push(("e5-small query embedding p95".to_string(), percentile(&embed_ms, 0.95)));
        println!(
            "e5-small query embedding alone: p50 {:.1} ms, p95 {:.1} ms",
            percentile(&embed_ms, 0.5),
            percentile(&embed_ms, 0.95)
        );
        if cfg!(debug_assertions) {
            // Embedding the whole campaign with e5 in a debug build takes many minutes.
            println!("(debug: the warm search with e5-small is measured in release only)");
        } else {
            // The real query embedder: the same campaign ingested with e5-small into its own
            // data dir (its vectors are e5's), then whole search calls.
            let e5_data = tempfile::TempDir::new().unwrap();
            let e5_index_dir = campaign_index_dir(e5_data.path(), campaign.path());
            let mut e5_index = Index::open(&e5_index_dir).await.unwrap();
            ingest_campaign(&mut e5_index, campaign.path(), &config, e5.as_ref(), 16, &Quiet).await.unwrap();
            drop(e5_index);
            let oracle = Oracle::new(&e5_index_dir, e5, std::sync::Arc::new(NoChat), AnswerSettings::new(256));
            let (search_p50, search_p95) = warm_searches(&oracle, &questions).await;
            figures.push((format!("{n_sessions} sessions: warm search call p50 (e5-small)"), search_p50));
            println!(
                "{n_sessions} sessions, warm oracle (e5-small): whole search call p50 {search_p50:.1} ms, p95 {search_p95:.1} ms"
            );
        }
    }
}

/// What a time plan adds to a search: the top `k` fragments' windows ranked (BM25 over their
/// windows, the dense path's window hits, their place), as the oracle ranks them; ms. The
/// fragments' word counts come with their texts, which the oracle reads for the context anyway.
fn rank_chosen_windows(index: &Index, result: &oraculo::retrieve::SearchResult, window_words: usize) -> f64 {
    use oraculo::retrieve::windows::{WindowSource, rank_windows, window_evidence};
    let chosen: Vec<_> = result.candidates.iter().take(DEFAULT_K).collect();
    let wanted: Vec<_> = chosen.iter().map(|c| (c.fragment_id, c.content_hash.as_str())).collect();
    let stored = index.store.fragments_checked(&wanted, Audience::Player.visibility_filter()).unwrap();
    let started = Instant::now();
    let sources: Vec<WindowSource> = stored
        .iter()
        .map(|s| WindowSource { fragment_id: s.id, n_words: s.fragment.text.split_whitespace().count(), named: false })
        .collect();
    let ids: Vec<_> = sources.iter().map(|source| source.fragment_id).collect();
    let evidence = window_evidence(&index.store, result, &ids, window_words).unwrap();
    let ranked = rank_windows(&sources, &evidence);
    std::hint::black_box(ranked);
    started.elapsed().as_secs_f64() * 1000.0
}

/// Whole `Notes::search` calls (open index lent, compendium, embedding, paths, fusion),
/// after one warm-up round: p50 and p95 in ms.
async fn warm_searches(oracle: &Oracle, questions: &[&str]) -> (f64, f64) {
    let mut wall = Vec::new();
    for round in 0..5 {
        for question in questions {
            let request = AskRequest { question, history: &[], audience: Audience::Player };
            let started = Instant::now();
            oracle.notes().search(&request).await.unwrap();
            if round > 0 {
                wall.push(started.elapsed().as_secs_f64() * 1000.0);
            }
        }
    }
    wall.sort_by(f64::total_cmp);
    (percentile(&wall, 0.5), percentile(&wall, 0.95))
}

/// The embedded e5-small, when its model file is where `scripts/fetch-models.sh` puts it.
fn e5_embedder() -> Option<std::sync::Arc<dyn Embedder>> {
    // Where the default configuration looks: ORACULO_E5_MODEL, else the data dir's models/.
    let data_dir = std::env::var_os("XDG_DATA_HOME")
        .map(|dir| Path::new(&dir).join("oraculo"))
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".local/share/oraculo")))?;
    let path = oraculo::llm::embed::e5::E5Embedder::default_path(&data_dir);
    if !path.is_file() {
        println!("(no e5-small figures: {} is absent; scripts/fetch-models.sh fetches it)", path.display());
        return None;
    }
    match oraculo::llm::embed::e5::E5Embedder::load(&path) {
        Ok(embedder) => Some(std::sync::Arc::new(embedder)),
        Err(err) => {
            println!("(no e5-small figures: {err})");
            None
        }
    }
}

/// Runs of the sample campaign's split (parse + fragment, no disk) and of its whole ingest:
/// the figure is the median.
const SAMPLE_SPLIT_RUNS: usize = 20;
const SAMPLE_INGEST_RUNS: usize = 5;

/// The sample campaign: the corpus's own cost on 44 real notes (files read once, outside the
/// timing), then whole ingests into fresh data dirs with the hash embedder.
async fn bench_sample_campaign(figures: &mut Figures) {
    let campaign = Path::new(env!("CARGO_MANIFEST_DIR")).join("eval/campaign");
    let config = campaign_config();
    let mut sources = Vec::new();
    for entry in walkdir::WalkDir::new(&campaign).sort_by_file_name().into_iter().flatten() {
        if entry.file_type().is_file() {
            let path = entry.path().strip_prefix(&campaign).unwrap().to_string_lossy().to_string();
            sources.push((path, std::fs::read_to_string(entry.path()).unwrap()));
        }
    }
    let mut split_ms = Vec::new();
    let mut n_fragments = 0;
    for _ in 0..SAMPLE_SPLIT_RUNS {
        let started = Instant::now();
        n_fragments = split_sources(&sources, &config.corpus).len();
        split_ms.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    split_ms.sort_by(f64::total_cmp);
    let mut ingest_ms = Vec::new();
    for _ in 0..SAMPLE_INGEST_RUNS {
        let data = tempfile::TempDir::new().unwrap();
        let embedder = HashEmbedder { calls: AtomicUsize::new(0) };
        let mut index = Index::open(&campaign_index_dir(data.path(), &campaign)).await.unwrap();
        let started = Instant::now();
        ingest_campaign(&mut index, &campaign, &config, &embedder, 64, &Quiet).await.unwrap();
        ingest_ms.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    ingest_ms.sort_by(f64::total_cmp);
    let (split_p50, ingest_p50) = (percentile(&split_ms, 0.5), percentile(&ingest_ms, 0.5));
    figures.push(("sample campaign: split p50".to_string(), split_p50));
    figures.push(("sample campaign: ingest p50 (hash embedder)".to_string(), ingest_p50));
    println!(
        "sample campaign ({} notes, {n_fragments} fragments): split p50 {split_p50:.1} ms (min {:.1}, max {:.1}, {SAMPLE_SPLIT_RUNS} runs) | ingest p50 {ingest_p50:.1} ms (min {:.1}, max {:.1}, {SAMPLE_INGEST_RUNS} runs)",
        sources.len(),
        split_ms[0],
        split_ms[split_ms.len() - 1],
        ingest_ms[0],
        ingest_ms[ingest_ms.len() - 1],
    );
}

/// Parses and fragments `(path, text)` notes: the corpus's whole job.
fn split_sources(sources: &[(String, String)], config: &CorpusConfig) -> Vec<corpus::Fragment> {
    let sources: Vec<(&str, &str)> = sources.iter().map(|(path, text)| (path.as_str(), text.as_str())).collect();
    let (notes, _) = corpus::parse_campaign(&sources, config);
    corpus::fragment_campaign(&notes, config).0
}

/// One line of markers, each form repeated up to the size: plain comments, openers that never
/// close, `%%` pairs and whole GM blocks.
const MARKER_FORMS: &[(&str, &str)] = &[
    ("html comments", "<!-- nota --> "),
    ("unclosed html openers", "<!-- "),
    ("%% pairs", "%%x%% "),
    ("gm blocks", "<!-- gm -->x<!-- /gm --> "),
];
/// The line sizes timed, the last one the figure that matters (1 MiB, an eighth of the
/// default `campaign.max_note_bytes`).
const MARKER_LINE_BYTES: &[usize] = &[16 << 10, 64 << 10, 256 << 10, 1 << 20];
/// A size that took longer than this is the last one timed for its form: a quadratic scan
/// would take hours at 1 MiB.
const MARKER_BUDGET: std::time::Duration = std::time::Duration::from_secs(30);

/// Parses one note holding a single long line of markers, growing it while it stays in budget.
fn bench_marker_lines(figures: &mut Figures) {
    let config = campaign_config();
    for (form, marker) in MARKER_FORMS {
        for &n_bytes in MARKER_LINE_BYTES {
            let line = marker.repeat(n_bytes / marker.len());
            let text = format!("# Notas\n{line}\nFin.\n");
            let started = Instant::now();
            let n_fragments = split_sources(&[("Notas.md".to_string(), text)], &config.corpus).len();
            let took = started.elapsed();
            let ms = took.as_secs_f64() * 1000.0;
            figures.push((format!("marker line, {form}, {} KiB", n_bytes >> 10), ms));
            println!("one line of {form}, {} KiB: {ms:.1} ms ({n_fragments} fragments)", n_bytes >> 10);
            if took > MARKER_BUDGET {
                println!("  (over {} s: larger lines of {form} not timed)", MARKER_BUDGET.as_secs());
                break;
            }
        }
    }
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes --bench; any other word names a group to run (none: all of them).
    let groups: Vec<String> = std::env::args().skip(1).filter(|arg| !arg.starts_with('-')).collect();
    let runs = |group: &str| groups.is_empty() || groups.iter().any(|named| named == group);
    let mut figures = Figures::new();
    if runs("sample") {
        bench_sample_campaign(&mut figures).await;
    }
    if runs("markers") {
        bench_marker_lines(&mut figures);
    }
    if runs("generated") {
        for n_sessions in [100, 1000] {
            bench_campaign(n_sessions, &mut figures).await;
        }
    }
    print_beside_other_profile(&figures);
}

/// Saves this run's figures under the target's tmp dir, one file per profile, and prints them
/// beside the other profile's last run: `cargo bench --bench pipeline` (release) and
/// `cargo bench --profile dev --bench pipeline` (debug), in either order.
fn print_beside_other_profile(figures: &Figures) {
    let profile = if cfg!(debug_assertions) { "debug" } else { "release" };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let file = |profile: &str| dir.join(format!("pipeline-bench-{profile}.json"));
    let read = |profile: &str| -> serde_json::Value {
        std::fs::read_to_string(file(profile))
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default()
    };
    // A run of some groups keeps the figures this profile saved for the others.
    let mut saved = match read(profile) {
        serde_json::Value::Object(saved) => saved,
        _ => serde_json::Map::new(),
    };
    saved.extend(figures.iter().map(|(what, ms)| (what.clone(), serde_json::json!(ms))));
    let saved = serde_json::Value::Object(saved).to_string();
    if let Err(err) = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(file(profile), saved)) {
        println!("(figures not saved: {err})");
    }
    let (release, debug) = (read("release"), read("debug"));
    println!("\n| ms | release | debug |\n|---|---|---|");
    for (what, _) in figures {
        let cell =
            |run: &serde_json::Value| run[what.as_str()].as_f64().map_or("—".to_string(), |ms| format!("{ms:.1}"));
        println!("| {what} | {} | {} |", cell(&release), cell(&debug));
    }
}
