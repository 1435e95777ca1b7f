//! The canary: a generated vault hides a unique word in every secret form Oráculo reads
//! (`docs/secrets.md`), is ingested into the real index with the real embedded model under a
//! DM's configuration, annotated by a model that echoes what it reads, and then nothing a player
//! can reach holds any of them: fragments, compendium, sources, search candidates, the
//! prepared context with its summaries, the rerank prompt, extractive and model answers,
//! sources read in full, name autocomplete, timelines and recaps. The GM finds each one.
//!
//! The classes that are not text in a note have theirs elsewhere: a GM's answer words in the
//! logs (below), a channel that stops being a GM channel (`discord.rs`), two campaigns claiming
//! one channel (`config/campaign.rs`'s tests).

use std::sync::Arc;

use oraculo::answer::AnswerMode;
use oraculo::config::{CampaignConfig, CliOverrides, Config, RawConfig};
use oraculo::corpus::{LabelLanguage, Visibility};
use oraculo::index::Index;
use oraculo::ingest::{Quiet, annotate_fragments};
use oraculo::oracle::{AnswerSettings, AskRequest, Oracle, Preparation};
use oraculo::retrieve::{Audience, CompendiumIndex, PathSet, SearchRequest, search};

use crate::fake_ollama::FakeOllama;
use crate::harness::{Scratch, ThroughTheEntry, ingest_dir, ollama_chat, ollama_embedder, prose};

/// (canary, where it hides, whether the GM can search for it: an alias only in front matter
/// is in no fragment's text, and a note outside the campaign is never read).
pub const CANARIES: &[(&str, &str, bool)] = &[
    ("Zarnokel", "a secret callout nested in a note callout", true),
    ("Vemtrasco", "a folded secret callout", true),
    ("Quiliandro", "a secret callout with metadata", true),
    ("Brumtallo", "an unfolded GM callout", true),
    ("Oskarvelo", "a lazy continuation line of a secret callout", true),
    ("Drelmonte", "a gm comment at the start of a session", true),
    ("Feltragor", "a gm comment in the middle of a session", true),
    ("Hurdalmo", "a gm comment at the end of a session", true),
    ("Pexnorato", "a %% comment", true),
    ("Wendolrik", "a secret section, the only one over the word cap", true),
    ("Jastrobel", "a secret sheet's title", true),
    ("Yorvandel", "a secret sheet's alias", false),
    ("Krovathen", "a secret note a player note links to", true),
    ("Mizraboth", "a secret folder at depth 3", true),
    ("Plindestro", "a malformed gm opener", true),
    ("Trumbelax", "text before a gm closer with no opener", true),
    // Links: the name of a secret note, in a player's note.
    ("Ostrelvane", "a wikilink by name to a note only the secret folder has", true),
    ("Pradomir", "an embed of a secret note", true),
    ("Quelbrano", "a Markdown link to a secret note, its text the note's name", true),
    ("Sirvandel", "a reference link whose definition points at a secret note", true),
    ("Tarvomir", "a wikilink by name to a note its front matter makes secret", true),
    // Note-level marks.
    ("Ulbrecht", "a note whose front matter says secret: true", true),
    ("Varnoque", "a note whose front matter says dm: yes", true),
    ("Xandrevo", "a note whose front matter says visibility: gm", true),
    ("Ydrabel", "a note whose front matter says visibility: private", true),
    ("Zumbarel", "a note whose front matter tags hold secreto", true),
    ("Albrekno", "a note with an inline #dm tag", true),
    ("Bevlandro", "a note whose front matter says publish: false", true),
    // Broken front matter.
    ("Cendralio", "a note whose front matter is not valid YAML", true),
    // GM words in callout types and comment openers.
    ("Dorvestio", "a [!gm-only] callout", true),
    ("Esparvel", "a [!notas-dj] callout", true),
    ("Fenrobald", "a <!-- DJ: … --> … <!-- /DJ --> block", true),
    ("Galmurio", "a <!--- gm ---> block", true),
    ("Hestravel", "a [!Máster] callout", true),
    // Lists, line endings.
    ("Istrugo", "a secret callout in a list item, continued by indented lines", true),
    ("Jorvalde", "a secret callout in a note with CR-only line endings", true),
    ("Kestrimo", "a %% comment across lines of a note with CRLF line endings", true),
    // Configuration: secret_paths adds to the defaults.
    ("Lumbrano", "a default secret folder (Secrets) the configuration does not list", true),
    ("Mardovel", "the secret folder the configuration adds (Planes)", true),
    // Symbolic links.
    ("Nerabold", "a secret note also reached through a link from a public folder", true),
    ("Obrindel", "a note outside the campaign, reached through a link", false),
    // A line of two hundred thousand markers.
    ("Quarnebel", "a gm comment at the end of one line of 200 KB of markers", true),
    // The one rule over named things (its classes), each form written as DMs write it.
    ("Grindolmo", "a `## Notas del DJ` section at the end of an NPC sheet", true),
    ("Halvestre", "a paragraph that opens with **GM:**", true),
    ("Ixbalto", "a list item that opens with Secreto:", true),
    ("Jurmenal", "a table column headed GM", true),
    ("Kelvastro", "an Admonition fence ```spoiler", true),
    ("Lorquembe", "a <details> whose summary says it is for the DM", true),
    ("Morvandio", "a Dataview inline field dm::", true),
    ("Nustrabel", "a camelCase front matter key gmOnly: true", true),
    ("Oclavero", "a camelCase tag #GMNotes", true),
    ("Pelgrastio", "draft: true", true),
    ("Quenduril", "dg-publish: false", true),
    ("Rostibel", "a type property written as a list, as Obsidian's Properties editor does", true),
    ("Sarnavel", "a CSS class that paints the note as secret", true),
    ("Tolvemar", "a folder named _Secretos", true),
    ("Uldravio", "a folder named Spoilers", true),
    ("Vesmarco", "a folder named DM", true),
    ("Wilbresto", "a numbered folder 99 - DM", true),
    ("Xelbrando", "next session's prep saved among the sessions as Sesión 12 (prep GM).md", true),
    ("Yulbertio", "a file named Villano.secret.md", true),
    (
        "Zembrolio",
        "a secret true name kept as an alias of a public sheet, named in its body only in a secret span",
        true,
    ),
    ("Abrelunda", "an inline <span class=\"gm\"> in a session", true),
    ("Bastrugio", "a callout [!quote|dm] whose metadata says DM", true),
];

/// What the DM's `config.toml` says: one more secret folder, `Planes`; the defaults
/// (`Secretos`, `Secrets`) stay.
pub const VAULT_CAMPAIGN_TOML: &str = "secret_paths = [\"Planes\"]\n";

/// The vault's campaign settings, read as the bot and the CLI read them.
pub fn vault_config() -> CampaignConfig {
    let text = format!("[campaign]\n{VAULT_CAMPAIGN_TOML}");
    let raw = RawConfig::parse(&text, std::path::Path::new("config.toml")).unwrap();
    let home = |key: &str| (key == "HOME").then(|| "/home/dm".to_string());
    Config::from_layers(raw, &home, &CliOverrides::default()).unwrap().campaign
}

pub fn vault() -> Scratch {
    let long_secret = format!("{} Wendolrik {}", prose("relleno", 900), prose("resto", 500));
    let markers = "<!---->%%%%".repeat(200_000 / "<!---->%%%%".len());
    let files: Vec<(String, String)> = vec![
        (
            "Sesiones/Sesion 1.md".into(),
            "# Sesión 1
<!-- gm -->Drelmonte espera en el muelle.<!-- /gm -->
Los héroes llegan al puerto de Galerna y alquilan un bote.
> [!note] Pista
> La puerta del faro está cerrada.
> > [!secret]
> > Zarnokel guarda la llave.
>
> El farero no abre a nadie.
Compran cuerdas. <!-- gm -->Feltragor los vigila.<!-- /gm --> Zarpan al alba.
> [!secret]-
> Vemtrasco es el contrabandista.

Llegan al islote.
<!-- gm -->
Hurdalmo los sigue desde la costa.
<!-- /gm -->
"
            .into(),
        ),
        (
            "Sesiones/Sesion 2.md".into(),
            "# Sesión 2
El grupo explora el islote y encuentra una cueva.
> [!secret|right] Nota al margen
> Quiliandro vive en la cueva.

> [!GM]+
> Brumtallo es su hermano.

> [!secret]
> El islote se hunde con la marea.
Oskarvelo lo sabe desde siempre.

Vuelven al bote. %%Pexnorato robó los remos.%% Reman de vuelta.
"
            .into(),
        ),
        (
            "Sesiones/Sesion 3.md".into(),
            format!(
                "# Sesión 3
El grupo descansa en la posada del puerto.
<!-- gm -->
{long_secret}
<!-- /gm -->
Al día siguiente hablan con [[Secretos/Krovathen|el capitán]] del puerto.
"
            ),
        ),
        (
            "Sesiones/Sesion 4.md".into(),
            "# Sesión 4
El grupo visita el mercado del puerto.
<!-- GM: Plindestro -->
Plindestro envenenó el pozo.
<!-- /gm -->
Compran pan y queso.
"
            .into(),
        ),
        (
            "Sesiones/Sesion 5.md".into(),
            "# Sesión 5
El grupo vuelve al faro.
<!- gm -->
Trumbelax enciende la luz falsa. <!-- /gm -->
El faro se apaga.
"
            .into(),
        ),
        (
            "Sesiones/Sesion 6.md".into(),
            "# Sesión 6
El grupo busca al espía en la taberna del puerto.
Hablan de [[Ostrelvane]] con el tabernero, y de [[Tarvomir]] con su mujer.
En la pared cuelga ![[Secretos/Pradomir]] junto a ![[Pradomir]].
Leen [Quelbrano](Secretos/Quelbrano.md) y [el mapa viejo](../Secretos/Quelbrano.md).
Recuerdan [el ermitaño][s] del faro.

[s]: Secretos/Sirvandel.md
"
            .into(),
        ),
        (
            "Sesiones/Sesion 7.md".into(),
            "# Sesión 7
El grupo vuelve a la posada.
> [!gm-only]
> Dorvestio envenena la cerveza.

> [!notas-dj] Para mí
> Esparvel es su cómplice.

La noche pasa tranquila en la posada.
<!-- DJ: Fenrobald -->
Fenrobald escucha tras la puerta.
<!-- /DJ -->
Duermen. <!--- gm --->Galmurio roba la bolsa.<!--- /gm ---> Amanece en la posada.
> [!Máster]
> Hestravel lo ve todo.

- Compran pan en la posada.
- > [!secret]
  > Istrugo los sigue.
  > Istrugo no duerme.
"
            .into(),
        ),
        (
            "Sesiones/Sesion 8.md".into(),
            "# Sesión 8\rEl grupo navega hacia el islote.\r> [!secret]\r> Jorvalde espera en el islote.\r\rDesembarcan en el islote.\r".into(),
        ),
        (
            "Sesiones/Sesion 9.md".into(),
            "# Sesión 9\r\nEl grupo pesca en la bahía.\r\n%%Kestrimo\r\nvigila la bahía%%\r\nVuelven con peces.\r\n".into(),
        ),
        (
            "Sesiones/Sesion 10.md".into(),
            format!(
                "# Sesión 10\nEl grupo cuenta las monedas del cofre.\n{markers}<!-- gm -->Quarnebel guarda una moneda.<!-- /gm --> Fin.\n"
            ),
        ),
        (
            "Secretos/Jastrobel.md".into(),
            "---\naliases: [Yorvandel]\ntype: npc\n---\n# Jastrobel\nJastrobel es el verdadero dueño del faro.\n"
                .into(),
        ),
        ("Secretos/Krovathen.md".into(), "# Krovathen\nKrovathen es el traidor del puerto.\n".into()),
        ("Mundo/Lugares/Secretos/Guarida.md".into(), "# Guarida\nMizraboth se esconde bajo el faro.\n".into()),
        ("Secretos/Ostrelvane.md".into(), "# Ostrelvane\nOstrelvane es el espía del archiduque.\n".into()),
        ("Secretos/Pradomir.md".into(), "# Pradomir\nPradomir pintó el retrato del traidor.\n".into()),
        ("Secretos/Quelbrano.md".into(), "# Quelbrano\nQuelbrano dibujó el mapa del tesoro.\n".into()),
        ("Secretos/Sirvandel.md".into(), "# Sirvandel\nSirvandel es el ermitaño que lo vio todo.\n".into()),
        ("Secretos/Nerabold.md".into(), "# Nerabold\nNerabold esconde el oro en la cripta.\n".into()),
        ("Mundo/Tarvomir.md".into(), "---\ngm: true\n---\n# Tarvomir\nTarvomir paga al espía.\n".into()),
        ("Mundo/Ulbrecht.md".into(), "---\nsecret: true\n---\nUlbrecht financia a los contrabandistas.\n".into()),
        ("Mundo/Varnoque.md".into(), "---\ndm: yes\n---\nVarnoque es el verdadero heredero.\n".into()),
        ("Mundo/Xandrevo.md".into(), "---\nvisibility: gm\n---\nXandrevo custodia la cripta.\n".into()),
        ("Mundo/Ydrabel.md".into(), "---\nvisibility: private\n---\nYdrabel conoce la contraseña.\n".into()),
        ("Mundo/Zumbarel.md".into(), "---\ntags: [lugar, secreto]\n---\nZumbarel es la isla escondida.\n".into()),
        ("Mundo/Albrekno.md".into(), "#lugar #dm\nAlbrekno es la torre sumergida.\n".into()),
        ("Mundo/Bevlandro.md".into(), "---\npublish: false\n---\nBevlandro vende mapas falsos.\n".into()),
        (
            "Mundo/Faro viejo.md".into(),
            "---\ntitle: El faro viejo\nnotas_dj: Cendralio es: el traidor\n---\nCendralio vigila el faro viejo.\n"
                .into(),
        ),
        ("Secrets/Lumbrano.md".into(), "# Lumbrano\nLumbrano acuña moneda falsa.\n".into()),
        ("Planes/Mardovel.md".into(), "# Mardovel\nMardovel asaltará el puerto en invierno.\n".into()),
        ("PNJs/Baika.md".into(), "# Baika\nTejedora de redes del puerto.\n".into()),
        // The one rule over named things.
        (
            "PNJs/Merla.md".into(),
            "---\ntype: npc\ngmOnly: false\n---\n# Merla\nMerla vende pescado en el muelle.\n\n## Notas del DJ\nGrindolmo es su verdadero nombre.\n".into(),
        ),
        (
            "Sesiones/Sesion 11.md".into(),
            "# Sesión 11
El grupo vuelve al puerto y cena en la posada.
**GM:** Halvestre los espía desde la barra.

- Compran sal.
- Secreto: Ixbalto envenenó la sal.
- Pagan al posadero.

| PNJ | Rol | GM |
|---|---|---|
| Baika | tejedora | Jurmenal la paga |

```spoiler
Kelvastro hundió el barco.
```

<details><summary>Solo para el DM</summary>
Lorquembe es el hijo del farero.
</details>

dm:: Morvandio guarda el mapa
La posadera sonríe. <span class=\"gm\">Abrelunda escucha.</span> Se van a dormir.

> [!quote|dm] Al oído
> Bastrugio lo dijo primero.
"
            .into(),
        ),
        ("Mundo/Nustrabel.md".into(), "---\ngmOnly: true\n---\nNustrabel paga a los guardias.\n".into()),
        ("Mundo/Oclavero.md".into(), "#GMNotes\nOclavero es el banquero del archiduque.\n".into()),
        ("Mundo/Pelgrastio.md".into(), "---\ndraft: true\n---\nPelgrastio compra el faro.\n".into()),
        ("Mundo/Quenduril.md".into(), "---\ndg-publish: false\n---\nQuenduril cruza el estrecho.\n".into()),
        ("Mundo/Rostibel.md".into(), "---\ntype:\n  - npc\n  - secreto\n---\nRostibel trabaja en la aduana.\n".into()),
        ("Mundo/Sarnavel.md".into(), "---\ncssclasses: [gm-only]\n---\nSarnavel vende pólvora.\n".into()),
        ("_Secretos/Tolvemar.md".into(), "Tolvemar conoce el pasadizo.\n".into()),
        ("Spoilers/Uldravio.md".into(), "Uldravio traicionará al grupo.\n".into()),
        ("DM/Vesmarco.md".into(), "Vesmarco es el asesino.\n".into()),
        ("99 - DM/Wilbresto.md".into(), "Wilbresto lleva la corona.\n".into()),
        ("Sesiones/Sesión 12 (prep GM).md".into(), "# Sesión 12\nXelbrando tenderá una emboscada en el muelle.\n".into()),
        ("PNJs/Villano.secret.md".into(), "# Villano\nYulbertio es el villano.\n".into()),
        (
            "PNJs/La Dama Gris.md".into(),
            "---\ntype: npc\naliases: [Zembrolio]\n---\n# La Dama Gris\nLa Dama Gris vende velas en el puerto.\n%%Es Zembrolio, la reina exiliada.%%\n".into(),
        ),
    ];
    let scratch = Scratch::of(&files);
    link_vault(&scratch);
    scratch
}

/// The vault's symbolic links: its secret folder reached from a public one, and a note outside
/// the campaign folder (in the data folder) reached from inside it.
#[cfg(unix)]
fn link_vault(scratch: &Scratch) {
    use std::os::unix::fs::symlink;
    let campaign = scratch.campaign.path();
    symlink("../Secretos", campaign.join("Mundo/Archivo")).unwrap();
    let outside = scratch.data.path().join("fuera");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("Obrindel.md"), "# Obrindel\nObrindel vive fuera de la campaña.\n").unwrap();
    symlink(&outside, campaign.join("Mundo/Fuera")).unwrap();
}

#[cfg(not(unix))]
fn link_vault(_scratch: &Scratch) {}

/// Every canary `text` holds, with where it hid.
pub fn canaries_in(text: &str) -> Vec<String> {
    let folded = text.to_lowercase();
    CANARIES
        .iter()
        .filter(|(canary, _, _)| folded.contains(&canary.to_lowercase()))
        .map(|(canary, hiding, _)| format!("{canary} ({hiding})"))
        .collect()
}

/// `text` with every `typed` string taken out: what a player typed may come back to them.
fn without(text: &str, typed: &str) -> String {
    text.replace(typed, "")
}

fn assert_no_canary(what: &str, text: &str) {
    let leaked = canaries_in(text);
    assert!(leaked.is_empty(), "{what} leaks {leaked:?}:\n{text}");
}

#[tokio::test]
async fn no_canary_reaches_a_player_and_the_gm_finds_each() {
    let scratch = vault();
    // The stand-in's embeddings: what is under test is which texts reach a player, not how
    // e5 ranks them (the GM's finding each canary below is the positive control).
    let fake = FakeOllama::start(&["bge-m3", "qwen2.5:14b"]).await;
    let embedder = Arc::new(ollama_embedder(&fake, "bge-m3").await);
    let summary =
        ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &vault_config(), embedder.as_ref()).await.unwrap();
    let index = Index::open_existing(&scratch.index_dir()).await.unwrap();

    // Annotations made by a model that echoes the fragment it reads: the GM's fragments get
    // annotations holding their secrets, which the rerank and the summaries must never show.
    fake.echo_prompts();
    let chat = ollama_chat(fake.url());
    let annotated = annotate_fragments(&index, chat.as_ref(), &Quiet).await;
    assert!(annotated.error.is_none() && annotated.missing == 0, "{annotated:?}");
    let gm_annotations = fake.chat_requests("/api/chat").iter().map(|r| r.body.to_string()).collect::<String>();
    assert!(canaries_in(&gm_annotations).len() > 20, "the annotations do hold the secrets");
    let annotation_requests = fake.chat_requests("/api/chat").len();

    // The index: no player fragment holds a canary, and nothing from outside the campaign.
    for stored in index.store.fragments(Some(Visibility::Player)).unwrap() {
        assert_no_canary(&stored.fragment.label, &stored.fragment.text);
    }
    let every_text = serde_json::to_string(&index.store.fragments(None).unwrap()).unwrap();
    assert!(!every_text.contains("Obrindel"), "a note outside the campaign was read");
    // The compendium and the sources, as a player sees them.
    let listing = serde_json::to_string(&index.store.compendium_listing(Some(Visibility::Player)).unwrap()).unwrap();
    assert_no_canary("the compendium", &listing);
    let sources = serde_json::to_string(&index.store.sources_visible(Some(Visibility::Player)).unwrap()).unwrap();
    assert_no_canary("the sources", &sources);
    // The diagnostics name the malformed markers and the broken front matter, and the link out
    // of the campaign; they never quote a secret.
    let lines: Vec<(String, Option<u32>)> =
        summary.warnings.iter().map(|warning| (warning.path.clone(), warning.line)).collect();
    for expected in [
        ("Sesiones/Sesion 4.md", Some(3)),
        ("Sesiones/Sesion 5.md", Some(4)),
        ("Sesiones/Sesion 7.md", Some(10)),
        ("Mundo/Faro viejo.md", Some(3)),
    ] {
        assert!(lines.contains(&(expected.0.to_string(), expected.1)), "{expected:?}: {:#?}", summary.warnings);
    }
    if cfg!(unix) {
        assert!(lines.contains(&("Mundo/Fuera".to_string(), None)), "{:#?}", summary.warnings);
    }
    let diagnostics = format!("{:?}", index.store.diagnostics().unwrap());
    assert_no_canary("the diagnostics", &diagnostics);

    // Search, the prepared context (full fragments and annotation summaries, after a rerank
    // over the annotations), and the answers, as a player, asking for each canary by name and
    // for the sessions around them.
    let mut oracle = Oracle::new(&scratch.index_dir(), embedder.clone(), chat.clone(), AnswerSettings::new(256));
    let compendium = CompendiumIndex::load(&index.store, Audience::Player).unwrap();
    let mut questions: Vec<String> = CANARIES.iter().map(|(canary, _, _)| format!("¿Quién es {canary}?")).collect();
    questions.extend(
        [
            "¿Qué pasó en el faro?",
            "¿Quién es el capitán del puerto?",
            "¿Qué hay en la cueva del islote?",
            "¿Quién es el espía del puerto?",
            "¿Qué pasó en la posada?",
            "¿Qué hicieron en la taberna?",
        ]
        .map(String::from),
    );
    for question in &questions {
        let request = SearchRequest { question, history: &[], audience: Audience::Player, k: 8, paths: PathSet::ALL };
        let searched = search(&index, &compendium, embedder.as_ref(), &request).await.unwrap();
        assert!(!searched.candidates.is_empty(), "{question}: a player search that finds nothing proves nothing");
        // Everything the search returns but the question it echoes.
        let found = serde_json::to_string(&(&searched.candidates, &searched.entities)).unwrap();
        assert_no_canary(&format!("{question}: the search"), &found);
        let ask = AskRequest { question, history: &[], audience: Audience::Player };
        let prepared = oracle.read(&ask, Preparation::default()).await.unwrap();
        assert!(!prepared.context.full.is_empty(), "{question}: nothing shown");
        let context = format!("{}{:?}{:?}", prepared.context.text, prepared.context.full, prepared.context.summaries);
        assert_no_canary(&format!("{question}: the context"), &context);
        for mode in [AnswerMode::Free, AnswerMode::Extractive] {
            oracle.set_mode(mode);
            let answer = oracle.ask(&ask, None).await.unwrap();
            let said = format!("{}{:?}", answer.text, answer.citations);
            assert_no_canary(&format!("{question}: the {mode:?} answer"), &without(&said, question));
        }
    }
    // Every prompt a player's question sent (the reranks over annotations, the answers): the
    // model echoed each one, so a secret in a prompt would also be in an answer.
    let player_prompts = fake.chat_requests("/api/chat");
    assert!(player_prompts.len() > annotation_requests + questions.len(), "the rerank and the answers ran");
    let reranked = player_prompts[annotation_requests..].iter().filter(|r| r.body["format"].is_object()).count();
    assert!(reranked > 0, "a rerank prompt was sent");
    for prompt in &player_prompts[annotation_requests..] {
        let mut body = prompt.body.to_string();
        for question in &questions {
            body = without(&body, question);
        }
        assert_no_canary("a player's prompt", &body);
    }
    // Sources read in full, names offered, timelines and recaps, as a player.
    let labels: Vec<String> = index.store.sources().unwrap().into_iter().map(|source| source.label.into()).collect();
    for label in &labels {
        let read = oracle.notes().read_source(label, Audience::Player).await.unwrap();
        assert_no_canary(&format!("the source {label}"), &serde_json::to_string(&read).unwrap());
    }
    let player_sources = serde_json::to_string(&oracle.notes().sources(Audience::Player).await.unwrap()).unwrap();
    assert_no_canary("the labels offered", &player_sources);
    for typed in ["", "a", "e", "o", "r", "zem"] {
        let names = oracle.notes().entity_names_matching(typed, 100, Audience::Player).await.unwrap();
        assert_no_canary(&format!("the names offered for {typed:?}"), &names.join("\n"));
    }
    let names = oracle.notes().entity_names_matching("", 100, Audience::Player).await.unwrap();
    for name in names.iter().map(String::as_str).chain(CANARIES.iter().map(|(canary, _, _)| *canary)) {
        let timeline = oraculo::timeline::timeline(&oracle, name, Audience::Player).await;
        let shown = without(&format!("{timeline:?}"), name);
        assert_no_canary(&format!("the timeline of {name}"), &shown);
    }
    oracle.set_mode(AnswerMode::Free);
    for session in (1..=11).map(Some).chain([None]) {
        let recap = oraculo::timeline::recap(&oracle, session, Audience::Player, LabelLanguage::Es, None).await;
        let shown = match &recap {
            Ok(recap) => format!("{}{:?}", recap.answer.text, recap.answer.citations),
            Err(err) => err.to_string(),
        };
        assert!(recap.is_ok(), "the recap of session {session:?}: {shown}");
        assert_no_canary(&format!("the recap of session {session:?}"), &shown);
    }

    // The GM finds every canary that is in some text.
    let gm_texts = index.store.fragments(None).unwrap();
    for (canary, hiding, _) in CANARIES.iter().filter(|(_, _, findable)| *findable) {
        let question = format!("¿Quién es {canary}?");
        let request =
            SearchRequest { question: &question, history: &[], audience: Audience::Gm, k: 8, paths: PathSet::ALL };
        let searched = search(&index, &compendium, embedder.as_ref(), &request).await.unwrap();
        let found = searched.candidates.iter().any(|candidate| {
            gm_texts.iter().any(|stored| stored.id == candidate.fragment_id && stored.fragment.text.contains(canary))
        });
        assert!(found, "the GM cannot find {canary} ({hiding}): {:?}", searched.candidates);
    }
    // The GM's compendium holds the secret notes and their aliases; a GM question naming a
    // secret note's alias finds that note (the alias is in no fragment's text).
    let gm_compendium = CompendiumIndex::load(&index.store, Audience::Gm).unwrap();
    let gm_listing = serde_json::to_string(&index.store.compendium_listing(None).unwrap()).unwrap();
    for name in ["Jastrobel", "Yorvandel", "Zembrolio"] {
        assert!(gm_listing.contains(name), "the GM's compendium lacks {name}: {gm_listing}");
    }
    for (alias, note) in [("Yorvandel", "Secretos/Jastrobel.md"), ("Zembrolio", "PNJs/La Dama Gris.md")] {
        let question = format!("¿Quién es {alias}?");
        let request =
            SearchRequest { question: &question, history: &[], audience: Audience::Gm, k: 8, paths: PathSet::ALL };
        let searched = search(&index, &gm_compendium, embedder.as_ref(), &request).await.unwrap();
        assert!(
            searched.candidates.iter().any(|candidate| candidate.source_path == note),
            "the GM asking for {alias} does not find {note}: {:?}",
            searched.candidates
        );
        assert!(
            gm_compendium.detect(&question).iter().any(|(_, entity)| entity.alias == alias),
            "the GM's entity path does not know {alias}"
        );
        assert!(compendium.detect(&question).is_empty(), "the players' entity path knows {alias}");
    }
    // The prep note is never the players' «last session».
    let last = oraculo::timeline::recap(&oracle, None, Audience::Player, LabelLanguage::Es, None).await.unwrap();
    assert_eq!(last.session.0, 11, "the players' last session is the public one, not the GM's prep");
}

/// What a `tracing` subscriber writes, kept for the test to read.
#[derive(Clone, Default)]
struct CapturedLog(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for CapturedLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for CapturedLog {
    type Writer = CapturedLog;
    fn make_writer(&'a self) -> CapturedLog {
        self.clone()
    }
}

/// A GM's answers hold GM text: the logs carry their counts and reasons at info and warn, and
/// their words only at debug. The model's replies here put a canary in every place the oracle
/// logs about: a sentence re-cited to the note that backs it, a sentence dropped (a number the
/// notes lack), a structured reply citing a label it was not shown, and an invented citation.
#[tokio::test]
async fn a_gm_answer_s_words_are_logged_only_at_debug() {
    use crate::harness::{campaign_config, ollama_embedder};
    const CANARY: &str = "Teodrasil";
    let scratch = Scratch::new(&[
        ("Sesiones/Sesion 1.md", "# Sesión 1\nEl grupo llega al puerto de Galerna.\n"),
        ("Secretos/Plan.md", &format!("# El plan\n{CANARY} traicionará al grupo en el puerto.\n")),
    ]);
    let fake = FakeOllama::start(&["bge-m3", "qwen2.5:14b"]).await;
    let embedder = Arc::new(ollama_embedder(&fake, "bge-m3").await);
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &campaign_config(&["Secretos"]), embedder.as_ref())
        .await
        .unwrap();
    let chat = ollama_chat(fake.url());
    let settings = AnswerSettings { mode: AnswerMode::Structured, ..AnswerSettings::new(256) };
    let mut oracle = Oracle::new(&scratch.index_dir(), embedder, chat, settings);

    let log = CapturedLog::default();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter("oraculo=debug")
        .with_writer(log.clone())
        .with_ansi(false)
        .without_time()
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let question = "¿Qué planea el traidor del puerto?";
    let ask = AskRequest { question, history: &[], audience: Audience::Gm };
    let sentence = |text: String, sources: &[&str]| serde_json::json!({ "text": text, "sources": sources });
    let replies = [
        serde_json::json!({ "in_notes": true, "sentences": [
            sentence(format!("El grupo teme a {CANARY} en el puerto."), &["Sesión 1"]),
            sentence(format!("El plan de {CANARY} costó 777 monedas."), &["Mundo: Plan"]),
        ]}),
        serde_json::json!({ "in_notes": true, "sentences": [sentence(format!("{CANARY} huye."), &[&format!("Notas de {CANARY}")])] }),
        serde_json::json!({ "in_notes": true, "sentences": [sentence(format!("{CANARY} huye."), &[&format!("Notas de {CANARY}")])] }),
    ];
    for reply in &replies {
        fake.enqueue_reply(&reply.to_string());
    }
    let recited = oracle.ask(&ask, None).await.unwrap();
    assert!(recited.text.contains("Mundo: Plan]"), "re-cited to the note that backs it: {}", recited.text);
    assert_eq!(recited.ungrounded.len(), 1, "{:?}", recited.ungrounded);
    let unusable = oracle.ask(&ask, None).await.unwrap();
    assert_eq!(unusable.mode, AnswerMode::Extractive, "{unusable:?}");
    oracle.set_mode(AnswerMode::Free);
    fake.enqueue_reply(&format!("{CANARY} traicionará al grupo [Ficha: {CANARY}]."));
    let invented = oracle.ask(&ask, None).await.unwrap();
    assert!(!invented.invented_citations.is_empty(), "{invented:?}");

    let log = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let (debug, above): (Vec<&str>, Vec<&str>) =
        log.lines().partition(|line| line.trim_start().starts_with("DEBUG") || line.trim_start().starts_with("TRACE"));
    for reason in ["re-cited", "not back", "cannot be used", "labels it was not shown"] {
        let said = match reason {
            "re-cited" => "a sentence is cited to the notes that back it",
            "not back" => "a sentence the notes do not back is dropped",
            "cannot be used" => "the structured answer cannot be used",
            _ => "the answer cited labels it was not shown",
        };
        assert!(above.iter().any(|line| line.contains(said)), "{reason} is logged at info or warn:\n{log}");
    }
    for line in &above {
        assert!(!line.contains(CANARY), "a GM answer's words above debug: {line}");
    }
    assert!(debug.iter().any(|line| line.contains(CANARY)), "the words are there at debug:\n{log}");
}
