//! "never show a player what the DM marked secret": each way a secret could reach a
//! player, attacked through the real index.

use std::sync::Arc;

use oraculo::index::Index;
use oraculo::oracle::{AnswerSettings, AskRequest, Oracle, Pipeline, Preparation};
use oraculo::retrieve::{Audience, CompendiumIndex, PathSet, SearchRequest, search};

use crate::fake_ollama::FakeOllama;
use crate::harness::{Scratch, ThroughTheEntry, campaign_config, ingest_dir, ollama_chat, ollama_embedder};

/// A word found only in GM-only text.
const CANARY: &str = "Umbravela";

#[tokio::test]
async fn a_reingest_between_search_and_answer_shows_no_secret() {
    // One chronicle: its fragments hold the highest ids, the ones a plain rowid hands out again.
    let scratch = Scratch::new(&[(
        "Crónica.md",
        "## Sesión 1\nEl grupo llega al puerto de Galerna.\n\n## Sesión 2\nEl grupo conoce al capitán del faro.\n",
    )]);
    let fake = FakeOllama::start(&["bge-m3", "qwen2.5:14b"]).await;
    let embedder = Arc::new(ollama_embedder(&fake, "bge-m3").await);
    let config = campaign_config(&[]);
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &config, embedder.as_ref()).await.unwrap();
    let chat = ollama_chat(fake.url());
    let oracle = Oracle::new(&scratch.index_dir(), embedder.clone(), chat, AnswerSettings::new(256));

    // A player searches…
    let question = "¿Quién es el capitán del faro?";
    let index = Index::open_existing(&scratch.index_dir()).await.unwrap();
    let compendium = CompendiumIndex::load(&index.store, Audience::Player).unwrap();
    let request = SearchRequest { question, history: &[], audience: Audience::Player, k: 8, paths: PathSet::ALL };
    let searched = search(&index, &compendium, embedder.as_ref(), &request).await.unwrap();
    assert!(searched.candidates.iter().any(|c| c.label == "Sesión 2"), "{:?}", searched.candidates);

    // …the DM rewrites the chronicle and reingests before the answer is prepared: session 2 is
    // gone and session 1 has a GM-only part, which a reused id would hand to "Sesión 2".
    scratch.write(
        "Crónica.md",
        &format!(
            "## Sesión 1\nEl grupo llega al puerto de Galerna.\n%%El capitán del faro es {CANARY}, el traidor.%%\n"
        ),
    );
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &config, embedder.as_ref()).await.unwrap();

    let ask = AskRequest { question, history: &[], audience: Audience::Player };
    let stale = Preparation { pipeline: Pipeline { paths: PathSet::ALL, rerank: false }, pool: Some(searched) };
    fake.enqueue_reply("El capitán del faro [Sesión 2] [Sesión 1].");
    let (prepared, answer) = oracle.ask_as(&ask, stale).await.unwrap();
    assert!(!prepared.context.text.contains(CANARY), "{}", prepared.context.text);
    for shown in &prepared.context.full {
        assert!(!shown.text.contains(CANARY), "{}", shown.text);
    }
    // Nothing the stale search found is shown: each id now holds other text or none.
    assert!(prepared.context.full.is_empty(), "{:?}", prepared.context.full);
    for citation in &answer.citations {
        assert!(!citation.excerpt.as_deref().unwrap_or("").contains(CANARY), "{citation:?}");
    }

    // A fresh search after the reingest finds the new player text, never the secret.
    let no_rerank = Pipeline { paths: PathSet::ALL, rerank: false };
    let fresh = oracle.read(&ask, Preparation { pipeline: no_rerank, pool: None }).await.unwrap();
    assert!(!fresh.context.text.contains(CANARY), "{}", fresh.context.text);
    assert!(fresh.context.full.iter().any(|shown| shown.label == "Sesión 1"), "{:?}", fresh.context.full);
}

#[tokio::test]
async fn hidden_folders_are_never_read_even_with_an_empty_ignore_list() {
    let scratch = Scratch::new(&[
        ("Sesiones/Sesion 1.md", "# Sesión 1\nEl grupo llega al puerto.\n"),
        (".trash/Sesion 2.md", &format!("# Sesión 2\nBorrado: {CANARY}.\n")),
        ("Notas/.borrador/idea.md", &format!("# Idea\n{CANARY} a medias.\n")),
        ("Notas/.oculto.md", &format!("# Oculto\n{CANARY}.\n")),
    ]);
    let fake = FakeOllama::start(&["bge-m3"]).await;
    let embedder = ollama_embedder(&fake, "bge-m3").await;
    let mut config = campaign_config(&[]);
    config.ignore = vec!["Borradores".to_string()];
    let summary = ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &config, &embedder).await.unwrap();
    assert_eq!(summary.files, 1, "{summary:#?}");
    let index = Index::open_existing(&scratch.index_dir()).await.unwrap();
    for stored in index.store.fragments(None).unwrap() {
        assert!(!stored.fragment.text.contains(CANARY), "{}", stored.fragment.source_path);
    }
}

#[cfg(unix)]
#[tokio::test]
async fn the_index_is_its_owners_alone() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new(&[("Secretos/Plan.md", &format!("# Plan\n{CANARY}.\n"))]);
    let fake = FakeOllama::start(&["bge-m3"]).await;
    let embedder = ollama_embedder(&fake, "bge-m3").await;
    // A data dir that does not exist yet: created private, like everything under it.
    let data_dir = scratch.data.path().join("oraculo");
    let index_dir = oraculo::index::campaign_index_dir(&data_dir, scratch.campaign.path());
    ingest_dir(&index_dir, scratch.campaign.path(), &campaign_config(&["Secretos"]), &embedder).await.unwrap();
    let mode = |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    for dir in [data_dir.clone(), data_dir.join("campaigns"), index_dir.clone()] {
        assert_eq!(mode(&dir), 0o700, "{}", dir.display());
    }
    for file in [index_dir.join("index.sqlite"), index_dir.join("ingest.lock")] {
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }

    // An index from before (world-readable) is made private when it is opened again.
    std::fs::set_permissions(&index_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(index_dir.join("index.sqlite"), std::fs::Permissions::from_mode(0o644)).unwrap();
    drop(Index::open_existing(&index_dir).await.unwrap());
    assert_eq!(mode(&index_dir), 0o700);
    assert_eq!(mode(&index_dir.join("index.sqlite")), 0o600);
}

#[cfg(unix)]
#[tokio::test]
async fn a_note_reached_through_a_link_keeps_the_visibility_of_its_real_path() {
    use std::os::unix::fs::symlink;
    let scratch = Scratch::new(&[
        ("Sesiones/Sesion 1.md", "# Sesión 1\nEl grupo llega al puerto.\n"),
        ("Secretos/Plan.md", &format!("# Plan\n{CANARY} traicionará al grupo.\n")),
        ("Secretos/Otro.md", &format!("# Otro\nLa orden de {CANARY}.\n")),
        (".trash/Borrado.md", &format!("# Borrado\n{CANARY} borrado.\n")),
    ]);
    let outside = tempfile::TempDir::new().unwrap();
    std::fs::write(outside.path().join("Fuera.md"), format!("# Fuera\n{CANARY} de fuera.\n")).unwrap();
    let campaign = scratch.campaign.path();
    std::fs::create_dir_all(campaign.join("Mundo")).unwrap();
    // A folder and a file inside the campaign, reached through links from a public folder.
    symlink("../Secretos", campaign.join("Mundo/Archivo")).unwrap();
    symlink("../Secretos/Otro.md", campaign.join("Mundo/Otro.md")).unwrap();
    // Links out of the campaign, and into a folder never read.
    symlink(outside.path(), campaign.join("Mundo/Externo")).unwrap();
    symlink(outside.path().join("Fuera.md"), campaign.join("Mundo/Fuera.md")).unwrap();
    symlink("../.trash/Borrado.md", campaign.join("Mundo/Borrado.md")).unwrap();

    let fake = FakeOllama::start(&["bge-m3"]).await;
    let embedder = ollama_embedder(&fake, "bge-m3").await;
    let summary = ingest_dir(&scratch.index_dir(), campaign, &campaign_config(&["Secretos"]), &embedder).await.unwrap();
    let warning = |path: &str| -> String {
        summary.warnings.iter().filter(|w| w.path == path).map(|w| w.message.clone()).collect::<Vec<_>>().join("; ")
    };
    assert!(warning("Mundo/Externo").contains("outside the campaign"), "{:#?}", summary.warnings);
    assert!(warning("Mundo/Fuera.md").contains("outside the campaign"), "{:#?}", summary.warnings);
    assert!(warning("Mundo/Borrado.md").contains("never read"), "{:#?}", summary.warnings);
    assert!(summary.warnings.iter().all(|w| !w.message.contains(CANARY)), "{:#?}", summary.warnings);

    let index = Index::open_existing(&scratch.index_dir()).await.unwrap();
    let fragments = index.store.fragments(None).unwrap();
    let mut paths: Vec<(&str, oraculo::corpus::Visibility)> =
        fragments.iter().map(|stored| (stored.fragment.source_path.as_str(), stored.fragment.visibility)).collect();
    paths.sort();
    use oraculo::corpus::Visibility::{DmOnly, Player};
    // Each real file once, under its real path: nothing under `Mundo/`, nothing from outside.
    assert_eq!(
        paths,
        [("Secretos/Otro.md", DmOnly), ("Secretos/Plan.md", DmOnly), ("Sesiones/Sesion 1.md", Player)],
        "{:#?}",
        summary.warnings
    );
    for stored in index.store.fragments(Some(Player)).unwrap() {
        assert!(!stored.fragment.text.contains(CANARY), "{}", stored.fragment.source_path);
    }
}

/// A small deterministic generator (xorshift64*): a failing case names its seed and replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, options: &[&'a str]) -> &'a str {
        options[self.below(options.len())]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Random notes built from the secret forms, with the words each one hides: public words are
/// `abiertoN`, words inside a secret span `ocultoN`'s stand-in `zekretN` (no GM word), so a
/// player fragment holding a `zekret` word shows text from inside a secret span.
struct SecretNotesGenerator {
    rng: Rng,
    n_words: usize,
    /// The campaign's secret note names (`zekretN`), which links may name.
    secret_names: Vec<String>,
}

const GM_OPENERS: &[(&str, &str)] = &[
    ("<!-- gm -->", "<!-- /gm -->"),
    ("<!-- GM -->", "<!-- /GM -->"),
    ("<!--dm-->", "<!--/dm-->"),
    ("<!-- DJ -->", "<!-- /DJ -->"),
    ("<!-- secreto -->", "<!-- /secreto -->"),
    ("<!-- gm-only -->", "<!-- end gm -->"),
    ("<!-- notas del DJ -->", "<!-- fin DJ -->"),
    ("<!--- gm --->", "<!--- /gm --->"),
    ("<!-- Máster -->", "<!-- /máster -->"),
];
const CALLOUT_TYPES: &[&str] =
    &["secret", "GM", "gm-only", "dm-notes", "notas-dj", "Secreto", "secret|right", "DM notes", "narrador", "privado"];
const CALLOUT_FOLDS: &[&str] = &["", "-", "+"];
const LIST_MARKERS: &[&str] = &["- ", "* ", "1. ", "+ "];

impl SecretNotesGenerator {
    fn public(&mut self, n: usize) -> String {
        (0..n).map(|_| self.word("abierto")).collect::<Vec<_>>().join(" ")
    }

    fn secret(&mut self, n: usize) -> String {
        (0..n.max(1)).map(|_| self.word("zekret")).collect::<Vec<_>>().join(" ")
    }

    fn word(&mut self, stem: &str) -> String {
        self.n_words += 1;
        format!("{stem}{}", self.n_words)
    }

    /// Secret text that may itself hold other markers (nesting): a comment in a GM block, a
    /// `%%` in a comment, a callout-looking line in a GM block.
    fn nested_secret(&mut self) -> String {
        let inner = self.secret(2);
        match self.rng.below(5) {
            0 => format!("{inner} <!-- {} --> {}", self.secret(1), self.secret(1)),
            1 => format!("{inner} %% {}", self.secret(1)),
            2 => format!("> [!note] {inner}"),
            3 => format!("{inner} [[{}]]", self.secret(1)),
            _ => inner,
        }
    }

    /// One secret form, as lines.
    fn secret_form(&mut self) -> Vec<String> {
        match self.rng.below(9) {
            0 => vec![format!("{} %%{}%% {}", self.public(2), self.secret(2), self.public(2))],
            1 => vec![
                format!("{} %%{}", self.public(1), self.secret(1)),
                format!("{}%% {}", self.secret(1), self.public(1)),
            ],
            2 => {
                let (open, close) = GM_OPENERS[self.rng.below(GM_OPENERS.len())];
                let mut lines = vec![open.to_string()];
                for _ in 0..1 + self.rng.below(3) {
                    lines.push(self.nested_secret());
                }
                lines.push(close.to_string());
                lines
            }
            3 => {
                let (open, close) = GM_OPENERS[self.rng.below(GM_OPENERS.len())];
                vec![format!("{} {open}{}{close} {}", self.public(1), self.secret(2), self.public(1))]
            }
            4 => vec![format!("<!-- DJ: {} -->", self.secret(1)), self.nested_secret(), "<!-- /DJ -->".to_string()],
            5 => vec![format!("{} <!-- {} --> {}", self.public(1), self.secret(2), self.public(1))],
            6 => {
                // A secret callout: folded or not, titled, lazily continued, in a list item.
                let kind = self.rng.pick(CALLOUT_TYPES);
                let fold = self.rng.pick(CALLOUT_FOLDS);
                let (first, indent) = if self.rng.chance(30) {
                    let marker = self.rng.pick(LIST_MARKERS);
                    (marker.to_string(), " ".repeat(marker.len()))
                } else {
                    (String::new(), String::new())
                };
                let mut lines = vec![format!("{first}> [!{kind}]{fold} {}", self.secret(1))];
                for _ in 0..1 + self.rng.below(3) {
                    lines.push(format!("{indent}> {}", self.nested_secret()));
                }
                if self.rng.chance(30) {
                    lines.push(self.secret(2));
                }
                lines.push(String::new());
                lines
            }
            7 => {
                // Nested in a note callout, which stays public.
                let kind = self.rng.pick(CALLOUT_TYPES);
                vec![
                    format!("> [!note] {}", self.public(1)),
                    format!("> {}", self.public(2)),
                    format!("> > [!{kind}]"),
                    format!("> > {}", self.secret(2)),
                    ">".to_string(),
                    format!("> {}", self.public(1)),
                    String::new(),
                ]
            }
            _ => {
                // A link to a secret note: its name is the secret.
                let name = self.secret_names[self.rng.below(self.secret_names.len())].clone();
                let link = match self.rng.below(6) {
                    0 => format!("[[Secretos/{name}]]"),
                    1 => format!("[[{name}]]"),
                    2 => format!("![[{name}]]"),
                    3 => format!("[{name}](Secretos/{name}.md)"),
                    4 => format!("[{}](<Mundo/{name}.md>)", self.public(1)),
                    _ => format!("[[{name}#{}|{}]]", self.secret(1), self.public(1)),
                };
                vec![format!("{} {link} {}", self.public(2), self.public(1))]
            }
        }
    }

    /// A note of random public paragraphs and secret forms, with front matter or not, in one
    /// of the three line endings. `true` when a front matter mark (or front matter that cannot
    /// be read) makes the whole note GM-only.
    fn note(&mut self) -> (String, bool) {
        let mut all_secret = false;
        let front: Vec<String> = match self.rng.below(6) {
            0 => vec!["tags: [npc, puerto]".to_string()],
            1 => {
                all_secret = true;
                let mark = self.rng.pick(&["secret: true", "gm: yes", "visibility: dm", "tags: [secreto]", "dm:"]);
                vec![mark.to_string()]
            }
            2 => {
                all_secret = true;
                vec![format!("notas_dj: {}: [", self.secret(1))]
            }
            _ => Vec::new(),
        };
        let mut lines = Vec::new();
        if !front.is_empty() {
            lines.push("---".to_string());
            lines.extend(front);
            lines.push("---".to_string());
        }
        lines.push(format!("# {}", self.public(1)));
        for _ in 0..2 + self.rng.below(6) {
            if self.rng.chance(50) {
                lines.extend(self.secret_form());
            } else {
                lines.push(self.public(3));
                if self.rng.chance(30) {
                    lines.push(String::new());
                }
            }
        }
        let ending = self.rng.pick(&["\n", "\r\n", "\r"]);
        (lines.join(ending) + ending, all_secret)
    }
}

#[test]
fn no_player_fragment_holds_text_from_inside_a_secret_span() {
    use oraculo::corpus::{Visibility, fragment_campaign, parse_campaign};
    let config = campaign_config(&["Secretos"]).corpus;
    let mut n_public_shown = 0;
    let mut n_public = 0;
    for seed in 1..=200u64 {
        let mut generator = SecretNotesGenerator {
            rng: Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            n_words: 0,
            secret_names: Vec::new(),
        };
        let mut notes: Vec<(String, String)> = Vec::new();
        for _ in 0..3 {
            let name = generator.secret(1);
            notes.push((format!("Secretos/{name}.md"), format!("# {name}\n{}\n", generator.secret(3))));
            generator.secret_names.push(name.clone());
        }
        let marked = generator.secret(1);
        notes.push((format!("Mundo/{marked}.md"), format!("---\nsecret: true\n---\n{}\n", generator.secret(2))));
        generator.secret_names.push(marked);
        let mut all_secret_notes = Vec::new();
        for note_idx in 0..8 {
            let (text, all_secret) = generator.note();
            let path = format!("Sesiones/Sesion {note_idx}.md");
            if all_secret {
                all_secret_notes.push(path.clone());
            }
            notes.push((path, text));
        }
        let sources: Vec<(&str, &str)> = notes.iter().map(|(path, text)| (path.as_str(), text.as_str())).collect();
        let (parsed, _) = parse_campaign(&sources, &config);
        let (fragments, _) = fragment_campaign(&parsed, &config);
        let shown: std::collections::HashSet<&str> = fragments
            .iter()
            .filter(|fragment| fragment.visibility == Visibility::Player)
            .flat_map(|fragment| fragment.text.split(|c: char| !c.is_alphanumeric()))
            .filter(|word| !word.is_empty())
            .collect();
        for word in &shown {
            assert!(
                !word.starts_with("zekret"),
                "seed {seed}: {word} from inside a secret span reaches a player:\n{}",
                notes.iter().map(|(path, text)| format!("--- {path}\n{text}")).collect::<String>()
            );
        }
        for (path, text) in &notes {
            let words = text.split(|c: char| !c.is_alphanumeric()).filter(|word| word.starts_with("abierto"));
            for word in words {
                n_public += 1;
                if shown.contains(word) {
                    n_public_shown += 1;
                    assert!(!all_secret_notes.contains(path), "seed {seed}: {word} of a GM-only note {path} is shown");
                }
            }
        }
    }
    // Not vacuous: most public text is still shown.
    assert!(n_public_shown * 2 > n_public, "{n_public_shown} of {n_public} public words shown");
}

/// The one rule, attacked: notes built from every kind of named thing × GM words in Spanish
/// and English × casing (camelCase, UPPER, accents, plurals) × nesting (none, list item,
/// quote, callout) × line endings. Each note hides one unique word inside what its named thing
/// covers and shows one outside it: no player fragment or players' compendium name holds the
/// hidden word, the GM's fragments hold each, and the public word stays public.
mod named_things {
    use oraculo::compendium::Compendium;
    use oraculo::corpus::{Fragment, Visibility, fragment_campaign, parse_campaign};

    use crate::harness::campaign_config;

    /// GM words as DMs write them: phrases for headings and labels, one-token forms for keys,
    /// tags, classes and folders.
    const PHRASES: &[&str] = &[
        "Notas del DJ",
        "DM Notes",
        "GM",
        "Secreto",
        "SECRETOS",
        "Solo para el Máster",
        "spoilers",
        "Narradora",
        "Hidden",
        "privado",
        "notas ocultas",
    ];
    const TOKENS: &[&str] =
        &["gmOnly", "GMNotes", "DMnotes", "notasDJ", "dm_only", "gm-only", "Secret", "SPOILER", "máster"];
    /// Words that are not GM words, in the same places: nothing may be hidden for them.
    const PLAIN_PHRASES: &[&str] = &["Notas del grupo", "Tesoro", "Admin", "Recompensas", "dmg"];
    const PLAIN_TOKENS: &[&str] = &["partyNotes", "tesoro", "gmnotes", "Admin", "djinn"];

    /// A note's body with `{W}` where the named thing goes, `{H}` the hidden word and `{P}`
    /// the public one; `nestable`: whether it may sit in a list item, quote or callout.
    struct Kind {
        name: &'static str,
        template: &'static str,
        token: bool,
        nestable: bool,
    }

    const BODY_KINDS: &[Kind] = &[
        Kind {
            name: "heading",
            template: "## {W}\n{H} vive aquí.\n## Otra cosa\n{P} vive allí.",
            token: false,
            nestable: true,
        },
        Kind { name: "label", template: "**{W}:** {H} miente.\n\n{P} dice la verdad.", token: false, nestable: true },
        Kind { name: "plain label", template: "{W}: {H} miente.\n\n{P} dice la verdad.", token: false, nestable: true },
        Kind {
            name: "list label",
            template: "- Compran sal.\n- {W}: {H} envenena la sal.\n- {P} paga.",
            token: false,
            nestable: true,
        },
        Kind {
            name: "label alone",
            template: "{W}:\n\n{H} es el traidor.\n\n## Después\n{P} llega.",
            token: false,
            nestable: false,
        },
        Kind { name: "column", template: "| PNJ | {W} |\n|---|---|\n| {P} | {H} |", token: false, nestable: true },
        Kind {
            name: "cell label",
            template: "| PNJ | Rol |\n|---|---|\n| {P} | **{W}:** {H} |",
            token: false,
            nestable: true,
        },
        Kind { name: "fence", template: "```{W}\n{H} hundió el barco.\n```\n{P} nada.", token: true, nestable: true },
        Kind {
            name: "details",
            template: "<details><summary>{W}</summary>\n{H} es hijo del farero.\n</details>\n\n{P} es hija.",
            token: false,
            nestable: true,
        },
        Kind {
            name: "class",
            template: "<div class=\"{W}\">\n{H} escucha.\n</div>\n\n{P} habla.",
            token: true,
            nestable: true,
        },
        Kind {
            name: "title",
            template: "{P} sonríe. <span title=\"{W}\">{H} escucha.</span> Fin.",
            token: false,
            nestable: true,
        },
        Kind { name: "field", template: "{W}:: {H} guarda el mapa\n\n{P} busca el mapa.", token: true, nestable: true },
        Kind {
            name: "bracket field",
            template: "{P} tiene [{W}:: {H} como hijo] y un perro.",
            token: true,
            nestable: true,
        },
        Kind { name: "callout type", template: "> [!{W}]\n> {H} lo sabe.\n\n{P} no.", token: true, nestable: false },
        Kind {
            name: "callout title",
            template: "> [!note] {W}\n> {H} lo sabe.\n\n{P} no.",
            token: false,
            nestable: false,
        },
        Kind {
            name: "callout metadata",
            template: "> [!quote|{W}] Al oído\n> {H} lo dijo.\n\n{P} lo oyó.",
            token: true,
            nestable: false,
        },
    ];

    /// Whole-note kinds: the path or the front matter.
    const NOTE_KINDS: &[Kind] = &[
        Kind { name: "folder", template: "path:{W}/nota.md", token: true, nestable: false },
        Kind { name: "numbered folder", template: "path:99 - {W}/nota.md", token: true, nestable: false },
        Kind { name: "file name", template: "path:PNJs/Villano ({W}).md", token: false, nestable: false },
        Kind { name: "dotted file name", template: "path:PNJs/Villano.{W}.md", token: true, nestable: false },
        Kind { name: "front matter key", template: "---\n{W}: true\n---\n", token: true, nestable: false },
        Kind { name: "front matter value", template: "---\ntype: {W}\n---\n", token: true, nestable: false },
        Kind {
            name: "front matter list",
            template: "---\ntype:\n  - npc\n  - {W}\n---\n",
            token: true,
            nestable: false,
        },
        Kind { name: "front matter tag", template: "---\ntags: [lugar, {W}]\n---\n", token: true, nestable: false },
        Kind { name: "inline tag", template: "#{W}\n", token: true, nestable: false },
    ];

    fn nest(body: &str, nesting: &str) -> String {
        match nesting {
            // The first line opens a list item; the rest follows it as CommonMark's lazy lines.
            "list" => format!("- {body}"),
            "quote" => body.lines().map(|line| format!("> {line}")).collect::<Vec<_>>().join("\n"),
            "callout" => format!(
                "> [!note] Nota\n{}",
                body.lines().map(|line| format!("> {line}")).collect::<Vec<_>>().join("\n")
            ),
            _ => body.to_string(),
        }
    }

    /// Every (path, text, hidden word, public word) the sweep builds for `kinds` and `words`.
    fn notes(kinds: &[Kind], phrases: &[&str], tokens: &[&str]) -> Vec<(String, String, String, String, String)> {
        let mut notes = Vec::new();
        let mut n = 0;
        for kind in kinds {
            let words = if kind.token { tokens } else { phrases };
            let nestings: &[&str] = if kind.nestable { &["none", "list", "quote", "callout"] } else { &["none"] };
            for word in words {
                for nesting in nestings {
                    for ending in ["\n", "\r\n", "\r"] {
                        n += 1;
                        let hidden = format!("Zekret{n}x");
                        let public = format!("Abierto{n}x");
                        let (path, text) = match kind.template.strip_prefix("path:") {
                            Some(path) => {
                                (path.replace("{W}", word), format!("# Sesión {n}\n{hidden} conoce a {public}.\n"))
                            }
                            // Front matter and tags open the note.
                            None if !kind.template.contains("{H}") => (
                                format!("Mundo/nota {n}.md"),
                                format!("{}{hidden} conoce a {public}.\n", kind.template.replace("{W}", word)),
                            ),
                            None => {
                                let body =
                                    kind.template.replace("{W}", word).replace("{H}", &hidden).replace("{P}", &public);
                                (format!("Sesiones/Sesión {n}.md"), format!("# Sesión {n}\n{}\n", nest(&body, nesting)))
                            }
                        };
                        let text = text.replace('\n', ending);
                        let described = format!("{} «{word}» nested {nesting}, ending {ending:?}", kind.name);
                        notes.push((path, text, hidden, public, described));
                    }
                }
            }
        }
        notes
    }

    fn read(path: &str, text: &str) -> (Vec<Fragment>, Compendium) {
        let config = campaign_config(&[]).corpus;
        let (parsed, _) = parse_campaign(&[(path, text)], &config);
        let (fragments, _) = fragment_campaign(&parsed, &config);
        (fragments, Compendium::build(&parsed, &config))
    }

    fn shown(fragments: &[Fragment], audience: Option<Visibility>) -> String {
        fragments
            .iter()
            .filter(|fragment| audience.is_none_or(|visibility| fragment.visibility == visibility))
            .map(|fragment| format!("{} {} {}\n", fragment.label, fragment.source_path, fragment.text))
            .collect()
    }

    /// Sweeps `kinds`: every hidden word is GM-only and found by the GM; with `whole_note`,
    /// the public word goes with it, else it stays public.
    fn check_hidden(kinds: &[Kind], whole_note: bool) -> usize {
        let built = notes(kinds, PHRASES, TOKENS);
        for (path, text, hidden, public, described) in &built {
            let (fragments, compendium) = read(path, text);
            let players = shown(&fragments, Some(Visibility::Player));
            assert!(
                !players.contains(hidden.as_str()),
                "{described}: {hidden} reaches players:\n{text}\n--- shown:\n{players}"
            );
            let names = serde_json::to_string(&compendium.for_players()).unwrap();
            assert!(!names.contains(hidden.as_str()), "{described}: the players' compendium holds {hidden}: {names}");
            assert!(
                shown(&fragments, None).contains(hidden.as_str()),
                "{described}: the GM cannot find {hidden}:\n{text}"
            );
            if !whole_note {
                assert!(
                    players.contains(public.as_str()),
                    "{described}: {public} was hidden too:\n{text}\n--- shown:\n{players}"
                );
            }
        }
        built.len()
    }

    #[test]
    fn every_body_named_thing_hides_what_it_covers() {
        let n = check_hidden(BODY_KINDS, false);
        assert!(n > 1000, "{n} notes");
    }

    #[test]
    fn every_path_and_front_matter_named_thing_hides_the_note() {
        let n = check_hidden(NOTE_KINDS, true);
        assert!(n > 200, "{n} notes");
    }

    #[test]
    fn a_note_with_no_gm_word_anywhere_is_not_hidden() {
        let kinds: Vec<&Kind> = BODY_KINDS.iter().chain(NOTE_KINDS).collect();
        let mut n = 0;
        for kind in kinds {
            for (path, text, hidden, public, described) in
                notes(std::slice::from_ref(kind), PLAIN_PHRASES, PLAIN_TOKENS)
            {
                let (fragments, _) = read(&path, &text);
                let players = shown(&fragments, Some(Visibility::Player));
                assert!(
                    players.contains(&hidden) && players.contains(&public),
                    "{described}: a note with no GM word lost text:\n{text}\n--- shown:\n{players}"
                );
                n += 1;
            }
        }
        assert!(n > 500, "{n} notes");
    }
}
