//! Issue 12's canary: a generated vault hides a unique word in every secret form Oráculo
//! knows, is ingested into the real index with the real embedded model, and then nothing a
//! player can reach (search, the prepared context, the compendium, the sources) holds any of
//! them, while the GM finds each one.

use std::sync::Arc;
use std::time::Duration;

use oraculo::corpus::Visibility;
use oraculo::index::Index;
use oraculo::llm::chat::ChatModel;
use oraculo::llm::ollama_chat::OllamaChat;
use oraculo::oracle::{AnswerSettings, AskRequest, Oracle, Pipeline};
use oraculo::retrieve::{Audience, CompendiumIndex, PathSet, SearchRequest, search};

use crate::answer::chat_config;
use crate::embedded::e5;
use crate::fake_ollama::FakeOllama;
use crate::support::{Scratch, campaign_config, ingest_dir, prose};

/// (canary, where it hides, whether the GM can search for it: an alias only in front matter
/// is in no fragment's text).
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
];

pub fn vault() -> Scratch {
    let long_secret = format!("{} Wendolrik {}", prose("relleno", 900), prose("resto", 500));
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
            "Secretos/Jastrobel.md".into(),
            "---\naliases: [Yorvandel]\ntype: npc\n---\n# Jastrobel\nJastrobel es el verdadero dueño del faro.\n"
                .into(),
        ),
        ("Secretos/Krovathen.md".into(), "# Krovathen\nKrovathen es el traidor del puerto.\n".into()),
        ("Mundo/Lugares/Secretos/Guarida.md".into(), "# Guarida\nMizraboth se esconde bajo el faro.\n".into()),
        ("PNJs/Baika.md".into(), "# Baika\nTejedora de redes del puerto.\n".into()),
    ];
    let refs: Vec<(&str, &str)> = files.iter().map(|(path, text)| (path.as_str(), text.as_str())).collect();
    Scratch::new(&refs)
}

/// Every canary `text` holds, with where it hid.
pub fn canaries_in(text: &str) -> Vec<String> {
    let folded = text.to_lowercase();
    CANARIES
        .iter()
        .filter(|(canary, _, _)| folded.contains(&canary.to_lowercase()))
        .map(|(canary, hiding, _)| format!("{canary} ({hiding})"))
        .collect()
}

#[tokio::test]
async fn issue_12_no_canary_reaches_a_player_and_the_gm_finds_each() {
    let scratch = vault();
    let embedder = Arc::new(e5());
    let summary =
        ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &campaign_config(&["Secretos"]), embedder.as_ref())
            .await
            .unwrap();
    let index = Index::open_existing(&scratch.index_dir()).await.unwrap();

    // The index: no player fragment holds a canary.
    for stored in index.store.fragments(Some(Visibility::Player)).unwrap() {
        let leaked = canaries_in(&stored.fragment.text);
        assert!(leaked.is_empty(), "{} leaks {leaked:?}:\n{}", stored.fragment.label, stored.fragment.text);
    }
    // The compendium and the sources, as a player sees them.
    let listing = index.store.compendium_listing(Some(Visibility::Player)).unwrap();
    let listing = serde_json::to_string(&listing).unwrap();
    assert!(canaries_in(&listing).is_empty(), "compendium leaks {:?}: {listing}", canaries_in(&listing));
    let sources = serde_json::to_string(&index.store.sources_visible(Some(Visibility::Player)).unwrap()).unwrap();
    assert!(canaries_in(&sources).is_empty(), "sources leak {:?}: {sources}", canaries_in(&sources));
    // The diagnostics name both malformed markers.
    let lines: Vec<(String, Option<u32>)> =
        summary.warnings.iter().map(|warning| (warning.path.clone(), warning.line)).collect();
    assert!(lines.contains(&("Sesiones/Sesion 4.md".to_string(), Some(3))), "{:#?}", summary.warnings);
    assert!(lines.contains(&("Sesiones/Sesion 5.md".to_string(), Some(4))), "{:#?}", summary.warnings);
    // Diagnostics are logged and listed by `sources`: they never quote a secret.
    let diagnostics = format!("{:?}", index.store.diagnostics().unwrap());
    assert!(canaries_in(&diagnostics).is_empty(), "diagnostics leak {:?}: {diagnostics}", canaries_in(&diagnostics));

    // Search and the prepared context, as a player, asking for each canary by name and for
    // the sessions around them.
    let fake = FakeOllama::start(&["qwen2.5:14b"]).await;
    let chat: Arc<dyn ChatModel> = Arc::new(OllamaChat::new(chat_config(fake.url(), Duration::from_secs(10))).unwrap());
    let oracle = Oracle::new(&scratch.index_dir(), embedder.clone(), chat, AnswerSettings::new(256));
    let compendium = CompendiumIndex::load(&index.store).unwrap();
    let mut questions: Vec<String> = CANARIES.iter().map(|(canary, _, _)| format!("¿Quién es {canary}?")).collect();
    questions.extend(
        ["¿Qué pasó en el faro?", "¿Quién es el capitán del puerto?", "¿Qué hay en la cueva del islote?"]
            .map(String::from),
    );
    let no_rerank = Pipeline { paths: PathSet::ALL, rerank: false };
    for question in &questions {
        let request = SearchRequest { question, history: &[], audience: Audience::Player, k: 8, paths: PathSet::ALL };
        let searched = search(&index, &compendium, embedder.as_ref(), &request).await.unwrap();
        // Everything the search returns but the question it echoes.
        let searched = serde_json::to_string(&(&searched.candidates, &searched.entities)).unwrap();
        assert!(canaries_in(&searched).is_empty(), "{question}: search leaks {:?}: {searched}", canaries_in(&searched));
        let ask = AskRequest { question, history: &[], audience: Audience::Player };
        let prepared = oracle.prepare(&index, &compendium, &ask, no_rerank).await.unwrap();
        let context = format!("{}{:?}", prepared.context.text, prepared.context.full);
        assert!(canaries_in(&context).is_empty(), "{question}: context leaks {:?}: {context}", canaries_in(&context));
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
}
