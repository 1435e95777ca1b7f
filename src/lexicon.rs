//! Stopwords: the Spanish and English words that carry no topic of their own.
//!
//! BM25 retrieval drops them from questions so that "¿qué pasó con Baika?" ranks by
//! "Baika", not by "qué" and "con"; the compendium ignores an alias made only of them.
//! Every word is stored folded (`crate::text::fold`: lowercase, no accents), so callers
//! fold first and then ask [`is_stopword`].
//!
//! The lists keep to function words and the handful of verbs questions are built from
//! (ser, estar, haber, hacer, pasar, decir, tener, ir, poder…). A verb form that is also a
//! likely topic word stays out on purpose ("llama": la Llama Quieta); "paso" stays in
//! because "¿qué pasó?" is far more frequent than the noun. A word in both languages
//! ("he", "has", "no") is listed once, under Spanish; homographs within Spanish ("estás" and
//! "estas", "hacía" and "hacia") once, under the first class.

use std::collections::HashSet;
use std::sync::LazyLock;

use crate::corpus::LabelLanguage;
use crate::text::fold;

/// Whether `folded_word` (already folded: lowercase, no accents) is a Spanish or English
/// stopword.
pub fn is_stopword(folded_word: &str) -> bool {
    STOPWORDS.contains(folded_word)
}

static STOPWORDS: LazyLock<HashSet<&'static str>> =
    LazyLock::new(|| SPANISH.iter().chain(ENGLISH).flat_map(|group| group.iter().copied()).collect());

static SPANISH_WORDS: LazyLock<HashSet<&'static str>> =
    LazyLock::new(|| SPANISH.iter().flat_map(|group| group.iter().copied()).collect());
static ENGLISH_WORDS: LazyLock<HashSet<&'static str>> =
    LazyLock::new(|| ENGLISH.iter().flat_map(|group| group.iter().copied()).collect());

/// The language a question is written in, for what Oráculo itself writes around an answer
/// (an extractive answer's introduction, "not in the notes"): the function words of each
/// language are counted, `¿`, `¡`, `ñ` and accents count for Spanish, and a tie is Spanish
/// (the campaigns this is for are mostly Spanish).
pub fn language_of(text: &str) -> LabelLanguage {
    let mut spanish =
        2 * text.chars().filter(|c| matches!(c, '¿' | '¡' | 'ñ' | 'Ñ' | 'á' | 'é' | 'í' | 'ó' | 'ú')).count();
    let mut english = 0;
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty()) {
        let folded = fold(word);
        if SPANISH_WORDS.contains(folded.as_str()) {
            spanish += 1;
        } else if ENGLISH_WORDS.contains(folded.as_str()) {
            english += 1;
        }
    }
    if english > spanish { LabelLanguage::En } else { LabelLanguage::Es }
}

/// Stems of the words that tell a change in someone's story, Spanish and English, folded:
/// what «¿qué pasó con X?» asks for in each session where X appears. The sentence of a
/// session that says X vanished, died, came back, fled, betrayed, was freed or became
/// someone else answers it; the sentence that only names X (X opens the ball, X greets the
/// party) does not. Kept to verbs and nouns of change that are rarely anything else.
const CHANGE_STEMS: &[&str] = &[
    // Spanish
    "desaparec",
    "esfum",
    "muri",
    "muer",
    "asesin",
    "cayo",
    "volvi",
    "vuelve",
    "regres",
    "reaparec",
    "huy",
    "hui",
    "escap",
    "traicion",
    "captur",
    "secuestr",
    "encarcel",
    "liber",
    "rescat",
    "convirt",
    "conviert",
    "transform",
    "cristaliz",
    "destierr",
    "desterr",
    "abdic",
    "derrot",
    "revel",
    "descubr",
    "perdi",
    "pierde",
    "hered",
    // English
    "disappear",
    "vanish",
    "died",
    "dies",
    "death",
    "dead",
    "kill",
    "murder",
    "return",
    "came back",
    "fled",
    "flee",
    "escap",
    "betray",
    "captur",
    "kidnap",
    "imprison",
    "freed",
    "releas",
    "rescu",
    "became",
    "becom",
    "turned into",
    "transform",
    "banish",
    "exile",
    "abdicat",
    "defeat",
    "reveal",
    "discover",
    "lost",
    "inherit",
];

/// Words before and after a mention of someone where a change told is theirs: «ha
/// desaparecido el archiduque», «Leandro de Valdemora ha desaparecido»; not the caravans that
/// vanished nine words after the archduke was named.
const CHANGE_WORDS_BEFORE: usize = 3;
const CHANGE_WORDS_AFTER: usize = 5;

fn folded_words(text: &str) -> Vec<String> {
    fold(text).split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty()).map(str::to_string).collect()
}

/// The [`CHANGE_STEMS`] told by the words at `within`, in the list's order; the words
/// around them say whether a «volvió» is a return.
fn changes_told(words: &[String], within: std::ops::Range<usize>) -> Vec<&'static str> {
    // «se volvió» is a turn of the head, «volvió» a return; «vuelve a celebrar» is doing it
    // again.
    let reflexive = |at: usize| at > 0 && words[at - 1] == "se";
    let again = |at: usize| {
        words.get(at + 1).is_some_and(|word| word == "a") && words.get(at + 2).is_some_and(|word| is_infinitive(word))
    };
    let no_return = |at: usize| reflexive(at) || again(at);
    let within = within.start.min(words.len())..within.end.min(words.len());
    CHANGE_STEMS
        .iter()
        .copied()
        .filter(|stem| match stem.split_once(' ') {
            Some((first, second)) => within
                .clone()
                .any(|at| words[at] == first && words.get(at + 1).is_some_and(|next| next.starts_with(second))),
            None => within
                .clone()
                .any(|at| words[at].starts_with(stem) && !(REFLEXIVE_TURNS.contains(stem) && no_return(at))),
        })
        .collect()
}

/// Whether a folded Spanish word is an infinitive, with its object pronouns or not
/// («celebrar», «verlo», «decírselo» folded «decirselo»).
fn is_infinitive(word: &str) -> bool {
    const ENCLITICS: &[&str] = &["los", "las", "les", "nos", "lo", "la", "le", "se", "me", "te", "os"];
    let mut stem = word;
    for _ in 0..2 {
        if let Some(shorter) = ENCLITICS.iter().find_map(|clitic| stem.strip_suffix(clitic)) {
            if ["ar", "er", "ir"].iter().any(|ending| shorter.ends_with(ending)) {
                return true;
            }
            stem = shorter;
        }
    }
    // A short word ending so is rarely a verb («mar», «par»), but these are.
    const SHORT_INFINITIVES: &[&str] = &["ir", "ver", "dar", "ser", "oir"];
    (word.len() > 3 && ["ar", "er", "ir"].iter().any(|ending| word.ends_with(ending)))
        || SHORT_INFINITIVES.contains(&word)
}

/// Change stems whose reflexive form is no change: «se volvió» (turned round), «se vuelve»;
/// nor is their «volver a» before an infinitive, a thing done again («vuelve a celebrar»).
const REFLEXIVE_TURNS: &[&str] = &["volvi", "vuelve"];

/// The changes `text` tells of the one named at `mentions` (byte spans): each change word
/// ([`CHANGE_STEMS`]: one of its words, or two-word phrases, starts with a stem) among the
/// [`CHANGE_WORDS_BEFORE`] words before a mention or the [`CHANGE_WORDS_AFTER`] after it, as
/// its stem: «desaparec» for «Leandro ha desaparecido» and for «desde que el archiduque
/// desapareció» alike, so that a story can tell a change told before.
pub fn changes_told_of(text: &str, mentions: &[(usize, usize)]) -> Vec<&'static str> {
    let words = folded_words(text);
    let mut told: Vec<&'static str> = Vec::new();
    for &(start, end) in mentions {
        let (Some(before), Some(named)) = (text.get(..start), text.get(start..end)) else { continue };
        let first = folded_words(before).len();
        let after = first + folded_words(named).len();
        // The name's own words are not near it: «el Desaparecido» tells nothing by its name.
        let near = [first.saturating_sub(CHANGE_WORDS_BEFORE)..first, after..after + CHANGE_WORDS_AFTER];
        for stem in near.into_iter().flat_map(|within| changes_told(&words, within)) {
            if !told.contains(&stem) {
                told.push(stem);
            }
        }
    }
    told
}

/// The language a folded definite article belongs to: «el», «la», «los», «las» are Spanish,
/// "the" is English. What marks a title («el Archiduque», "the Thunderlord") and the phrase a
/// question names it with, so that a title is only looked for across languages
/// (`retrieve::entity`'s translated names).
pub fn article_language(folded_word: &str) -> Option<LabelLanguage> {
    match folded_word {
        "el" | "la" | "los" | "las" => Some(LabelLanguage::Es),
        "the" => Some(LabelLanguage::En),
        _ => None,
    }
}

/// Spanish, by word class. Accented forms appear once, folded (`qué` → `que`, `él` → `el`).
#[rustfmt::skip]
const SPANISH: &[&[&str]] = &[
    // Articles and contractions.
    &["el", "la", "los", "las", "lo", "un", "una", "unos", "unas", "al", "del"],
    // Prepositions.
    &[
        "a", "ante", "bajo", "con", "contra", "de", "desde", "durante", "en", "entre", "hacia", "hasta", "mediante",
        "para", "por", "segun", "sin", "sobre", "tras", "via", "excepto", "salvo", "acerca", "respecto",
    ],
    // Conjunctions and the words that open a follow-up question.
    &[
        "y", "e", "ni", "o", "u", "pero", "sino", "aunque", "porque", "pues", "que", "si", "como", "mientras",
        "entonces", "luego", "despues", "antes", "ademas", "embargo", "tambien", "tampoco", "incluso", "sea",
    ],
    // Personal, possessive and reflexive pronouns.
    &[
        "yo", "tu", "ella", "ello", "nosotros", "nosotras", "vosotros", "vosotras", "ellos", "ellas", "usted",
        "ustedes", "me", "te", "se", "nos", "os", "le", "les", "mi", "mis", "tus", "su", "sus", "nuestro",
        "nuestra", "nuestros", "nuestras", "vuestro", "vuestra", "vuestros", "vuestras", "mio", "mia", "mios",
        "mias", "tuyo", "tuya", "tuyos", "tuyas", "suyo", "suya", "suyos", "suyas", "conmigo", "contigo",
        "consigo",
    ],
    // Demonstratives.
    &[
        "este", "esta", "estos", "estas", "ese", "esa", "esos", "esas", "aquel", "aquella", "aquellos",
        "aquellas", "esto", "eso", "aquello",
    ],
    // Indefinites and quantifiers.
    &[
        "algo", "alguien", "algun", "alguno", "alguna", "algunos", "algunas", "nada", "nadie", "ningun", "ninguno",
        "ninguna", "otro", "otra", "otros", "otras", "mismo", "misma", "mismos", "mismas", "todo", "toda",
        "todos", "todas", "cada", "mucho", "mucha", "muchos", "muchas", "poco", "poca", "pocos", "pocas",
        "varios", "varias", "tanto", "tanta", "tantos", "tantas", "demas", "ambos", "ambas", "cualquier",
        "cualquiera", "cuyo", "cuya", "cuyos", "cuyas",
    ],
    // Question words (`por qué` is `por` + `que`; `porque` is with the conjunctions).
    &[
        "quien", "quienes", "cual", "cuales", "cuando", "donde", "adonde", "cuanto", "cuanta", "cuantos",
        "cuantas",
    ],
    // Adverbs of degree, time, place and manner.
    &[
        "no", "muy", "mas", "menos", "tan", "solo", "solamente", "ya", "aun", "todavia", "aqui", "alli", "ahi",
        "aca", "alla", "ahora", "siempre", "nunca", "jamas", "casi", "asi", "bien", "mal", "quiza", "quizas",
        "acaso", "tal", "vez", "etc",
    ],
    // Words of stance: how sure or exact the asker wants the answer, never what is asked
    // («¿Quién es en realidad el Penitente?» asks who the Penitente is).
    &[
        "realidad", "realmente", "verdad", "verdaderamente", "exactamente", "concretamente", "precisamente",
        "justamente",
    ],
    // ser
    &[
        "ser", "soy", "eres", "es", "somos", "sois", "son", "era", "eras", "eramos", "erais", "eran", "fui",
        "fuiste", "fue", "fuimos", "fuisteis", "fueron", "sera", "seras", "seremos", "seran", "seria", "serian",
        "seas", "seamos", "sean", "fuera", "fueran", "fuese", "sido", "siendo",
    ],
    // estar
    &[
        "estar", "estoy", "estamos", "estais", "estan", "estaba", "estabas", "estabamos", "estaban",
        "estuve", "estuvo", "estuvimos", "estuvieron", "estara", "estaran", "estaria", "esten", "estuviera",
        "estado", "estando",
    ],
    // haber
    &[
        "haber", "he", "has", "ha", "hemos", "habeis", "han", "hay", "habia", "habias", "habiamos", "habian",
        "hubo", "hubieron", "habra", "habran", "habria", "haya", "hayan", "hubiera", "hubiese", "habido",
        "habiendo",
    ],
    // hacer
    &[
        "hacer", "hago", "haces", "hace", "hacemos", "haceis", "hacen", "haciamos", "hacian", "hice",
        "hiciste", "hizo", "hicimos", "hicieron", "hara", "haran", "haria", "haga", "hagan", "hiciera", "hecho",
        "haciendo",
    ],
    // pasar, ocurrir, suceder: "¿qué pasó?", "¿qué ocurrió?"
    &[
        "pasar", "pasa", "pasan", "pasaba", "pasaban", "paso", "pasaron", "pasara", "pasado", "pasando", "ocurrir",
        "ocurre", "ocurrio", "ocurrieron", "ocurrido", "suceder", "sucede", "sucedio", "sucedieron", "sucedido",
    ],
    // decir
    &[
        "decir", "digo", "dices", "dice", "decimos", "dicen", "decia", "decian", "dije", "dijo", "dijimos",
        "dijeron", "dira", "diga", "digan", "dicho", "diciendo",
    ],
    // tener
    &[
        "tener", "tengo", "tienes", "tiene", "tenemos", "tienen", "tenia", "tenian", "tuve", "tuvo", "tuvimos",
        "tuvieron", "tendra", "tenga", "tengan", "tenido", "teniendo",
    ],
    // ir
    &[
        "ir", "voy", "vas", "va", "vamos", "van", "iba", "ibas", "ibamos", "iban", "ira", "iran", "vaya", "vayan",
        "ido", "yendo",
    ],
    // poder, saber
    &[
        "poder", "puedo", "puedes", "puede", "podemos", "pueden", "podia", "podian", "pude", "pudo", "pudieron",
        "podra", "podria", "pueda", "puedan", "podido", "saber", "sabe", "sabes", "sabemos", "saben", "sabia",
        "sabian", "sabido",
    ],
    // How players type in a chat: «q paso con Odo», «xq se fue», «porfa».
    &["q", "xq", "pq", "porfa", "porfi", "xfa", "tb", "tmb"],
];

/// English, by word class.
#[rustfmt::skip]
const ENGLISH: &[&[&str]] = &[
    // Articles, conjunctions and the words that open a follow-up question.
    &["an", "the", "and", "or", "but", "nor", "so", "yet", "if", "then", "than", "because", "as", "also", "either"],
    // Prepositions.
    &[
        "of", "at", "by", "for", "with", "about", "against", "between", "into", "through", "during", "before",
        "after", "above", "below", "to", "from", "up", "down", "in", "out", "on", "off", "over", "under", "upon",
        "within", "without", "towards",
    ],
    // Pronouns and determiners.
    &[
        "i", "my", "myself", "we", "us", "our", "ours", "ourselves", "you", "your", "yours", "yourself",
        "yourselves", "him", "his", "himself", "she", "her", "hers", "herself", "it", "its", "itself", "they",
        "them", "their", "theirs", "themselves", "this", "that", "these", "those", "all", "any", "both", "each",
        "few", "more", "most", "other", "some", "such", "own", "same", "another", "anyone", "someone", "something",
        "anything", "nothing", "everyone", "everything",
    ],
    // Question words.
    &["what", "which", "who", "whom", "whose", "when", "where", "why", "how", "whatever"],
    // Adverbs.
    &[
        "not", "only", "too", "very", "just", "now", "here", "there", "again", "further", "ever", "still", "even",
        "already", "almost", "really",
    ],
    // Words of stance (as the Spanish ones).
    &["actually", "exactly", "truly", "precisely", "indeed", "reality"],
    // Auxiliaries and modals, with the pieces contractions leave (`didn't` → `didn`, `t`).
    &[
        "am", "is", "are", "was", "were", "be", "been", "being", "have", "having", "had", "do", "does", "did",
        "doing", "done", "can", "could", "will", "would", "shall", "should", "may", "might", "must", "don", "doesn",
        "didn", "isn", "wasn", "aren", "weren", "won", "wouldn", "couldn", "shouldn", "ll", "ve", "re", "s", "t",
        "d", "m",
    ],
    // The verbs questions are built from: happen, say, tell, get, make, go, know.
    &[
        "happen", "happens", "happened", "happening", "say", "says", "said", "tell", "tells", "told", "get",
        "gets", "got", "make", "makes", "made", "go", "goes", "went", "gone", "know", "knows", "knew", "known",
        "let", "lets",
    ],
    // How players type in a chat: the contractions above without their apostrophe ("whats
    // calebs moms name" holds no other word of either language), and "pls".
    &[
        "whats", "whos", "wheres", "whens", "whys", "hows", "thats", "theres", "dont", "doesnt", "didnt", "isnt",
        "wasnt", "arent", "werent", "cant", "couldnt", "wouldnt", "shouldnt", "hasnt", "havent", "hadnt", "im",
        "ive", "youre", "theyre", "please", "pls", "plz",
    ],
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `text` tells any change, anywhere in it.
    fn tells_a_change(text: &str) -> bool {
        let words = folded_words(text);
        !changes_told(&words, 0..words.len()).is_empty()
    }

    #[test]
    fn volver_a_before_any_infinitive_is_doing_it_again_and_before_a_place_a_return() {
        let verbs = [
            "celebrar", "hablar", "pedir", "escribir", "leer", "decir", "poner", "reír", "oír", "ir", "ver", "dar",
            "ser",
        ];
        let pronouns = ["", "lo", "la", "les", "nos", "se", "selo", "sela"];
        let heads = ["volvió", "vuelve", "volvieron", "volvía"];
        for head in heads {
            for verb in verbs {
                for pronoun in pronouns {
                    let text = format!("El archiduque {head} a {verb}{pronoun} en la lonja.");
                    assert!(!tells_a_change(&text), "{text}");
                }
            }
            for place in ["Puerto Salobre", "la ciudad", "casa", "palacio", "Oruel", "su celda", "la Corona"] {
                let text = format!("El archiduque {head} a {place}.");
                assert!(tells_a_change(&text), "{text}");
            }
        }
    }

    #[test]
    fn a_change_in_a_story_is_told_by_its_words_not_by_a_name() {
        for text in [
            "Leandro de Valdemora desaparece de sus aposentos.",
            "A las once, el archiduque ha DESAPARECIDO.",
            "Tomás cayó en el puente.",
            "Un año después volvió como el Heraldo.",
            "She came back as the Herald of the Low Tide.",
            "Kiri was left with the Schusters and turned into a hen.",
            "Destierra a su hermana de la ciudad.",
        ] {
            assert!(tells_a_change(text), "{text}");
        }
        // Only a change of the one named, near the name.
        let of = |text: &str, name: &str| {
            let start = text.find(name).expect("named");
            !changes_told_of(text, &[(start, start + name.len())]).is_empty()
        };
        assert!(of("A las once, Leandro de Valdemora desaparece de sus aposentos.", "Leandro de Valdemora"));
        assert!(of("Ha desaparecido el archiduque.", "el archiduque"));
        assert!(!of("El Desaparecido saluda al grupo.", "El Desaparecido"), "a name tells nothing by its words");
        assert!(
            !of("Un año desde que el archiduque se fue, y Salobre vuelve a celebrar la fiesta.", "el archiduque"),
            "a «vuelve a» at the window's edge reads the infinitive past it"
        );
        assert!(!of("El archiduque ofrece 300 coronas por investigar las caravanas desaparecidas.", "El archiduque"));
        for text in [
            "El archiduque abre el baile con su hermana.",
            "Los recibe en la lonja y les ofrece trescientas coronas.",
            "La Corona de Sal brilla en el altar.",
            "The archduke greets the party.",
            "Se esconden en el matorral.",
            "Una vieja le tiró un farolillo y el Heraldo ni se volvió.",
            "Puerto Salobre vuelve a celebrar la Fiesta de las Mareas.",
            "El archiduque volvió a verlos al día siguiente.",
            "Nunca volvió a decírselo.",
        ] {
            assert!(!tells_a_change(text), "{text}");
        }
        for text in ["El archiduque volvió a Puerto Salobre.", "Leandro vuelve a la ciudad.", "Lara volvió."] {
            assert!(tells_a_change(text), "{text}");
        }
    }

    /// One row per word: whether it is a stopword once folded.
    fn check(cases: &[(&str, bool)]) {
        for &(word, expect) in cases {
            assert_eq!(is_stopword(&fold(word)), expect, "{word:?}");
        }
    }

    #[test]
    fn stopwords() {
        check(&[
            ("qué", true),
            ("Quién", true),
            ("cómo", true),
            ("cuándo", true),
            ("dónde", true),
            ("por", true),
            ("pasó", true),
            ("realidad", true),
            ("actually", true),
            ("murió", false),
            ("él", true),
            ("Está", true),
            ("hubo", true),
            ("dijo", true),
            ("the", true),
            ("happened", true),
            ("Who", true),
            ("Baika", false),
            ("dragón", false),
            ("Norkiel", false),
            ("llama", false),
            ("sesión", false),
        ]);
    }

    #[test]
    fn the_language_of_a_question() {
        for (question, expect) in [
            ("¿Qué pasó con el archiduque?", LabelLanguage::Es),
            ("que paso con el archiduque", LabelLanguage::Es),
            ("What happened to the archduke?", LabelLanguage::En),
            ("did she ever get it back", LabelLanguage::En),
            ("Who is Baika?", LabelLanguage::En),
            ("Baika", LabelLanguage::Es),
            ("", LabelLanguage::Es),
            // As players type in a chat (the players' banks: these were answered in Spanish).
            ("whats calebs moms name", LabelLanguage::En),
            ("recap session 37 pls", LabelLanguage::En),
            ("q paso con odo", LabelLanguage::Es),
            ("xq se fue Nela", LabelLanguage::Es),
        ] {
            assert_eq!(language_of(question), expect, "{question:?}");
        }
    }

    #[test]
    fn every_contraction_typed_without_its_apostrophe_is_an_english_function_word() {
        // Generated from the pieces an apostrophe leaves: «didn't» typed «didnt», «what's»
        // typed «whats». "won't" stays out: «wont» is a word of its own; "been" and "can" are
        // whole words, "can't" typed «cant» all the same.
        let auxiliaries = ENGLISH.iter().find(|group| group.contains(&"didn")).expect("the auxiliaries' group");
        let pieces = auxiliaries.iter().copied();
        let negations: Vec<String> = pieces
            .filter(|piece| piece.ends_with('n') && !["won", "been"].contains(piece))
            .map(|piece| format!("{piece}t"))
            .collect();
        let is_words: Vec<String> =
            ["what", "who", "where", "when", "why", "how", "that", "there"].iter().map(|w| format!("{w}s")).collect();
        assert!(negations.len() >= 10, "{negations:?}");
        for typed in negations.iter().chain(&is_words) {
            assert!(ENGLISH_WORDS.contains(typed.as_str()), "{typed} is not read as English");
            assert_eq!(language_of(&format!("{typed} calebs moms name")), LabelLanguage::En, "{typed}");
        }
    }

    #[test]
    fn stopwords_are_stored_folded_and_once() {
        let mut seen = HashSet::new();
        for word in SPANISH.iter().chain(ENGLISH).flat_map(|group| group.iter()) {
            assert_eq!(fold(word), *word, "{word:?} is not folded");
            assert!(seen.insert(*word), "{word:?} repeats");
        }
        assert!((400..=700).contains(&seen.len()), "{} stopwords", seen.len());
    }
}
