//! Every sentence the bot says, in Spanish and English.
//!
//! A slash command carries the user's Discord locale; a thread message does not, so it gets
//! the campaign's label language. Each message says what happened and what to do; details
//! never appear here (they go to the log).

use std::sync::OnceLock;

use crate::corpus::LabelLanguage;
use crate::ingest::{IngestSummary, MassRemoval};

/// Most characters of an ingest error a notice quotes: the path and the cause fit; the rest
/// is in the bot's log.
const WATCH_ERROR_CHARS: usize = 600;

/// The registered `/reingest` command's id, set once the commands are registered, so that
/// notices can mention it (a command mention shows and runs the command in any client
/// language). One bot per process: the id is the process's.
pub static REINGEST_COMMAND_ID: OnceLock<u64> = OnceLock::new();

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Lang {
    Es,
    En,
}

impl Lang {
    /// `en-US`, `en-GB` → English; every other locale → `fallback` (Spanish campaigns first).
    pub fn from_locale(locale: Option<&str>, fallback: Lang) -> Lang {
        match locale {
            Some(locale) if locale.starts_with("en") => Lang::En,
            Some(locale) if locale.starts_with("es") => Lang::Es,
            _ => fallback,
        }
    }

    pub fn of_labels(language: LabelLanguage) -> Lang {
        match language {
            LabelLanguage::Es => Lang::Es,
            LabelLanguage::En => Lang::En,
        }
    }

    fn pick(self, es: &str, en: &str) -> String {
        match self {
            Lang::Es => es.to_string(),
            Lang::En => en.to_string(),
        }
    }

    pub fn sources_title(self) -> String {
        self.pick("Fuentes", "Sources")
    }

    pub fn invented_footer(self, n_invented: usize) -> String {
        self.pick(
            &format!("{n_invented} cita(s) sin fuente verificable quedaron marcadas con [?]."),
            &format!("{n_invented} citation(s) with no verifiable source were marked [?]."),
        )
    }

    /// The footer of an answer searched without some retrieval paths (`dense`, `bm25`…).
    pub fn partial_search_footer(self, paths: &[&str]) -> String {
        let paths = paths.join(", ");
        self.pick(
            &format!("Búsqueda parcial: la vía {paths} no respondió; la respuesta sale de las demás."),
            &format!("Partial search: the {paths} path failed; the answer comes from the others."),
        )
    }

    pub fn empty_answer(self) -> String {
        self.pick(
            "El modelo no devolvió ninguna respuesta. Prueba a reformular la pregunta.",
            "The model returned no answer. Try rephrasing the question.",
        )
    }

    pub fn source_continued(self) -> String {
        self.pick("(continúa)", "(continued)")
    }

    pub fn queued(self, position: usize) -> String {
        match self {
            Lang::Es => {
                format!("⏳ En cola (posición {position}): respondo en cuanto acaben las preguntas anteriores.")
            }
            Lang::En => {
                format!("⏳ Queued (position {position}): I will answer as soon as the questions before it are done.")
            }
        }
    }

    /// The queue has no room for a question (or its place holds its share): when to come back.
    pub fn busy(self, busy: &super::queue::Busy) -> String {
        let (waiting, wait) = (busy.waiting, busy.wait.as_secs().max(1));
        match (self, busy.place_full) {
            (Lang::Es, false) => format!(
                "⏳ El oráculo está ocupado: {waiting} preguntas esperan ya su turno. Vuelve a preguntar en unos {wait} s."
            ),
            (Lang::Es, true) => format!(
                "⏳ Ya esperan {waiting} preguntas de este canal: el resto de la cola queda para los demás. Vuelve a \
                 preguntar en unos {wait} s."
            ),
            (Lang::En, false) => {
                format!("⏳ The oracle is busy: {waiting} questions are already waiting. Ask again in about {wait} s.")
            }
            (Lang::En, true) => format!(
                "⏳ {waiting} questions from this channel are already waiting: the rest of the queue is kept for the \
                 others. Ask again in about {wait} s."
            ),
        }
    }

    pub fn rate_limited(self, wait_secs: u64) -> String {
        self.pick(
            &format!("Demasiadas preguntas seguidas: espera {wait_secs} s y vuelve a preguntar."),
            &format!("Too many questions in a row: wait {wait_secs} s and ask again."),
        )
    }

    pub fn sources_rate_limited(self, wait_secs: u64) -> String {
        self.pick(
            &format!("Demasiadas fuentes seguidas: espera {wait_secs} s y vuelve a pedirla."),
            &format!("Too many sources in a row: wait {wait_secs} s and ask again."),
        )
    }

    /// The status of an answer before its first words (searching and choosing the notes).
    pub fn searching(self) -> String {
        self.pick("🔎 Buscando en las notas…", "🔎 Searching the notes…")
    }

    /// The model reads the notes it was shown and writes (before its first word).
    pub fn reading_notes(self, notes: usize) -> String {
        self.pick(
            &format!("📚 Leyendo {notes} notas y escribiendo la respuesta…"),
            &format!("📚 Reading {notes} notes and writing the answer…"),
        )
    }

    /// The footer of an answer while it is written.
    pub fn writing(self) -> String {
        self.pick("✍️ Escribiendo… (las fuentes aparecen al terminar)", "✍️ Writing… (sources appear when it is done)")
    }

    /// The language a question is written in (its answer's, and the lines around the notes'
    /// sentences).
    pub fn of_question(question: &str) -> Lang {
        Lang::of_labels(crate::oracle::question_language(question))
    }

    /// Under the instant answer while the model writes.
    pub fn instant_writing(self) -> String {
        self.pick(
            "📜 Frases de las notas, tal cual. ✍️ El modelo está escribiendo su respuesta…",
            "📜 Sentences from the notes, as written. ✍️ The model is writing its answer…",
        )
    }

    /// Under the instant answer of a question waiting for the model.
    pub fn instant_queued(self, position: usize) -> String {
        match self {
            Lang::Es => format!(
                "📜 Frases de las notas, tal cual. ⏳ En cola (posición {position}): el modelo escribirá su respuesta \
                 cuando llegue su turno."
            ),
            Lang::En => format!(
                "📜 Sentences from the notes, as written. ⏳ Queued (position {position}): the model will write its \
                 answer when its turn comes."
            ),
        }
    }

    /// Under the instant answer when it stays: why the model's answer is not there.
    pub fn instant_kept(self, why: crate::oracle::InstantKept) -> String {
        use crate::oracle::InstantKept;
        match why {
            InstantKept::ModelFailed => self.pick(
                "📜 Frases de las notas, tal cual: el modelo no ha podido responder.",
                "📜 Sentences from the notes, as written: the model could not answer.",
            ),
            InstantKept::ModelOutOfTime => self.pick(
                "📜 Frases de las notas, tal cual: el modelo no terminó a tiempo.",
                "📜 Sentences from the notes, as written: the model did not finish in time.",
            ),
            InstantKept::ModelAbstained => self.pick(
                "📜 Frases de las notas, tal cual: el modelo no encontró en ellas la respuesta.",
                "📜 Sentences from the notes, as written: the model found no answer in them.",
            ),
        }
    }

    /// Under an extractive answer given because the model did not answer.
    pub fn model_not_answering(self) -> String {
        self.pick(
            "El modelo no está respondiendo: esto son frases de las notas, tal cual.",
            "The model is not answering: these are sentences from the notes, as written.",
        )
    }

    /// A mention with no question.
    pub fn mention_help(self) -> String {
        self.pick(
            "Pregúntame mencionándome con tu pregunta («@Oráculo ¿qué pasó con el archiduque?»), con /oraculo, o respondiendo a una de mis respuestas.",
            "Ask me by mentioning me with your question (“@Oráculo what happened to the archduke?”), with /oracle, or by replying to one of my answers.",
        )
    }

    /// Said in a direct or group message the bot does not answer in.
    pub fn ask_in_the_server(self) -> String {
        self.pick(
            "El oráculo solo responde en el servidor de la campaña.",
            "The oracle only answers in the campaign's server.",
        )
    }

    /// What a refused user reads (never sent for a server the bot does not serve).
    pub fn barred(self, barred: super::access::Barred) -> String {
        match barred {
            super::access::Barred::NoCampaign => self.pick(
                "Este canal no pertenece a ninguna campaña: pregunta en el canal de tu mesa.",
                "This channel belongs to no campaign: ask in your table's channel.",
            ),
            _ => self.ask_in_the_server(),
        }
    }

    pub fn shutting_down(self) -> String {
        self.pick(
            "El oráculo se está reiniciando: vuelve a preguntar dentro de un minuto.",
            "The oracle is restarting: ask again in a minute.",
        )
    }

    /// The first line of an answer a restart delayed, posted in the channel (the slash
    /// command's token had expired): which question it answers.
    pub fn resumed_answer(self, user: u64, question: &str) -> String {
        self.pick(
            &format!("↩️ El oráculo se reinició mientras respondía a <@{user}>: «{question}»"),
            &format!("↩️ The oracle restarted while answering <@{user}>: «{question}»"),
        )
    }

    /// A question a restart interrupted more than once, or too long ago, given up.
    pub fn resume_given_up(self, user: u64, question: &str) -> String {
        match self {
            Lang::Es => format!(
                "El oráculo se reinició sin poder responder a <@{user}> («{question}»): vuelve a preguntar, por favor."
            ),
            Lang::En => {
                format!("The oracle restarted without answering <@{user}> («{question}»): please ask again.")
            }
        }
    }

    pub fn interrupted(self) -> String {
        self.pick(
            "El oráculo se reinició antes de terminar esta respuesta: vuelve a preguntar dentro de un minuto.",
            "The oracle restarted before finishing this answer: ask again in a minute.",
        )
    }

    pub fn empty_question(self) -> String {
        self.pick(
            "La pregunta está vacía: escribe qué quieres saber.",
            "The question is empty: write what you want to know.",
        )
    }

    pub fn question_too_long(self, chars: usize, max: usize) -> String {
        self.pick(
            &format!("La pregunta es demasiado larga ({chars} caracteres; como mucho {max}): acórtala."),
            &format!("The question is too long ({chars} characters; at most {max}): shorten it."),
        )
    }

    pub fn not_built(self) -> String {
        self.pick(
            &format!(
                "Las notas de la campaña aún no están indexadas: el DM debe usar {} primero.",
                self.reingest_command()
            ),
            &format!("The campaign's notes are not indexed yet: the DM must run {} first.", self.reingest_command()),
        )
    }

    /// `/reingest` as the user's client shows it: a clickable command mention once the
    /// command is registered (its id known), else its name in this language.
    pub fn reingest_command(self) -> String {
        let name = self.pick("reindexar", "reingest");
        match REINGEST_COMMAND_ID.get() {
            Some(id) => format!("</{name}:{id}>"),
            None => format!("/{name}"),
        }
    }

    pub fn model_unavailable(self) -> String {
        self.pick(
            "El modelo de lenguaje no responde ahora mismo (¿Ollama apagado o el modelo sin descargar?). Avisa al DM; los detalles están en el registro del bot.",
            "The language model is not answering right now (Ollama down or the model not pulled?). Tell the DM; the details are in the bot's log.",
        )
    }

    pub fn index_stale(self) -> String {
        self.pick(
            &format!(
                "El índice se hizo con otro modelo de embeddings que el configurado: el DM debe usar {}.",
                self.reingest_command()
            ),
            &format!(
                "The index was built with another embedding model than the configured one: the DM must run {}.",
                self.reingest_command()
            ),
        )
    }

    pub fn missing_bot_permissions(self, permissions: &str) -> String {
        match self {
            Lang::Es => {
                format!("Me faltan permisos en este canal ({permissions}): pide a un administrador que me los dé.")
            }
            Lang::En => {
                format!("I am missing permissions in this channel ({permissions}): ask an administrator to grant them.")
            }
        }
    }

    pub fn search_failed(self) -> String {
        self.pick(
            "No pude buscar en las notas. Vuelve a intentarlo; si sigue fallando, avisa al DM (los detalles están en el registro del bot).",
            "I could not search the notes. Try again; if it keeps failing, tell the DM (the details are in the bot's log).",
        )
    }

    pub fn unexpected(self) -> String {
        self.pick(
            "Algo falló al responder. Vuelve a intentarlo; si sigue fallando, avisa al DM (los detalles están en el registro del bot).",
            "Something failed while answering. Try again; if it keeps failing, tell the DM (the details are in the bot's log).",
        )
    }

    pub fn bad_argument(self) -> String {
        self.pick(
            "No entendí los datos del comando. Escríbelo de nuevo desde el menú de /.",
            "I could not read the command's options. Type it again from the / menu.",
        )
    }

    pub fn command_outdated(self) -> String {
        self.pick(
            "Este comando cambió desde que Discord lo guardó. Espera unos minutos y vuelve a escribirlo.",
            "This command changed since Discord stored it. Wait a few minutes and type it again.",
        )
    }

    pub fn not_allowed(self) -> String {
        self.pick("No puedes usar ese comando aquí.", "You cannot use that command here.")
    }

    pub fn reingest_refused(self) -> String {
        self.pick(
            "Solo el DM de la campaña puede reindexar las notas. Si eres el DM, pide que añadan tu id (o tu rol) a [discord] dm_user_ids / dm_role_ids.",
            "Only the campaign's DM may reindex the notes. If you are the DM, have your id (or role) added to [discord] dm_user_ids / dm_role_ids.",
        )
    }

    pub fn report_refused(self) -> String {
        self.pick(
            "Solo el DM de la campaña puede ver el informe de lo preguntado.",
            "Only the campaign's DM may read the report of what was asked.",
        )
    }

    pub fn reingest_running(self) -> String {
        self.pick(
            "⏳ Reindexando las notas… las preguntas siguen usando el índice anterior hasta que termine.",
            "⏳ Reindexing the notes… questions keep using the previous index until it is done.",
        )
    }

    pub fn reingest_already_running(self) -> String {
        self.pick(
            "Ya hay una reindexación en marcha: espera a que termine (te aviso aquí cuando acabe la primera).",
            "A reindex is already running: wait for it to finish.",
        )
    }

    pub fn reingest_failed(self) -> String {
        self.pick(
            "La reindexación falló y el índice anterior sigue en uso. Los detalles están en el registro del bot.",
            "The reindex failed and the previous index is still in use. The details are in the bot's log.",
        )
    }

    /// The mass-removal guard refused an ingest: what was read, where, and how to confirm.
    pub fn removal_refused(self, refused: &MassRemoval) -> String {
        let MassRemoval { path, indexed, removed, read } = refused;
        let what = match (self, *read) {
            (Lang::Es, 0) => format!(
                "La carpeta de la campaña `{path}` no tiene ninguna nota ahora (¿vacía, sin montar, o no es la carpeta?) y el índice tiene {indexed}."
            ),
            (Lang::Es, _) => format!(
                "Esta lectura borraría {removed} de las {indexed} notas indexadas (la carpeta `{path}` tiene {read} ahora)."
            ),
            (Lang::En, 0) => format!(
                "The campaign folder `{path}` holds no note now (empty, not mounted, or not the folder meant) where the index holds {indexed}."
            ),
            (Lang::En, _) => format!(
                "This read would remove {removed} of the {indexed} indexed notes (the folder `{path}` holds {read} now)."
            ),
        };
        let command = self.reingest_command();
        let option = self.pick("permitir_borrado", "allow_removal");
        let how = match self {
            Lang::Es => format!(
                "\n🛡️ No se ha borrado nada: el índice anterior sigue en uso. Si las borraste a propósito, confírmalo con {command} `{option}: True` (o `oraculo ingest --allow-removal`)."
            ),
            Lang::En => format!(
                "\n🛡️ Nothing was removed: the previous index is still in use. If you deleted them on purpose, confirm with {command} `{option}: True` (or `oraculo ingest --allow-removal`)."
            ),
        };
        format!("{what}{how}")
    }

    /// A watched ingest failed (`error`, from the log); `more` others failed since the last notice.
    pub fn watched_ingest_failed(self, error: &str, more: usize) -> String {
        let since = match (self, more) {
            (_, 0) => String::new(),
            (Lang::Es, n) => format!(" ({n} fallo(s) más desde el último aviso)"),
            (Lang::En, n) => format!(" ({n} more failure(s) since the last notice)"),
        };
        let error: String = error.chars().take(WATCH_ERROR_CHARS).collect::<String>().replace('`', "'");
        match self {
            Lang::Es => {
                format!("⚠️ No pude leer las notas guardadas{since}; el índice anterior sigue en uso.\n`{error}`")
            }
            Lang::En => {
                format!("⚠️ I could not read the saved notes{since}; the previous index is still in use.\n`{error}`")
            }
        }
    }

    pub fn reingest_summary(self, summary: &IngestSummary) -> String {
        let annotations = summary.annotations.as_ref().map(|report| match self {
            Lang::Es => format!("\nAnotaciones: {} nuevas, {} pendientes.", report.made, report.missing),
            Lang::En => format!("\nAnnotations: {} new, {} missing.", report.made, report.missing),
        });
        let warnings = match (self, summary.warnings.len()) {
            (_, 0) => String::new(),
            (Lang::Es, n) => format!("\n{n} aviso(s): `oraculo sources` los lista."),
            (Lang::En, n) => format!("\n{n} warning(s): `oraculo sources` lists them."),
        };
        let IngestSummary {
            seconds, files, files_changed, files_removed, fragments, dm_only_fragments, entities, ..
        } = summary;
        let head = self.pick(
            &format!(
                "✅ Notas reindexadas en {seconds:.1} s: {files} archivos ({files_changed} cambiados, {files_removed} eliminados), {fragments} fragmentos ({dm_only_fragments} solo para el DM), {entities} entidades."
            ),
            &format!(
                "✅ Notes reindexed in {seconds:.1} s: {files} files ({files_changed} changed, {files_removed} removed), {fragments} fragments ({dm_only_fragments} DM-only), {entities} entities."
            ),
        );
        format!("{head}{}{warnings}", annotations.unwrap_or_default())
    }

    pub fn source_not_found(self, label: &str) -> String {
        self.pick(
            &format!("No hay ninguna nota con la etiqueta «{label}» que se pueda mostrar aquí."),
            &format!("There is no note labelled “{label}” that can be shown here."),
        )
    }

    pub fn thread_fallback_name(self) -> String {
        self.pick("Oráculo", "Oracle")
    }

    // --- campaign time: /cronologia, /resumen

    pub fn timeline_title(self, entity: &str, page: usize, n_pages: usize) -> String {
        let pages = if n_pages > 1 { format!(" ({page}/{n_pages})") } else { String::new() };
        self.pick(&format!("Cronología: {entity}{pages}"), &format!("Timeline: {entity}{pages}"))
    }

    pub fn first_appearance(self) -> String {
        self.pick("primera aparición", "first appearance")
    }

    pub fn last_appearance(self) -> String {
        self.pick("última aparición", "last appearance")
    }

    pub fn only_appearance(self) -> String {
        self.pick("primera y última aparición", "first and last appearance")
    }

    pub fn also_in(self, labels: &[String]) -> String {
        self.pick(&format!("También en: {}", labels.join("; ")), &format!("Also in: {}", labels.join("; ")))
    }

    /// `items` joined by `separator` between the language's (opening, closing) text;
    /// nothing when there are none.
    fn listed(self, items: &[String], separator: &str, es: (&str, &str), en: (&str, &str)) -> String {
        if items.is_empty() {
            return String::new();
        }
        let (open, close) = match self {
            Lang::Es => es,
            Lang::En => en,
        };
        format!("{open}{}{close}", items.join(separator))
    }

    pub fn entity_in_no_session(self, entity: &str, other_labels: &[String]) -> String {
        let elsewhere = self.listed(other_labels, "; ", (" (sale en: ", ")"), (" (it is in: ", ")"));
        self.pick(
            &format!("{entity} no aparece en ninguna sesión que se pueda mostrar aquí{elsewhere}."),
            &format!("{entity} appears in no session that can be shown here{elsewhere}."),
        )
    }

    pub fn unknown_entity(self, name: &str, suggestions: &[String]) -> String {
        let hint = self.listed(suggestions, ", ", (" ¿Quizá: ", "?"), (" Did you mean: ", "?"));
        self.pick(
            &format!("No hay nadie ni nada llamado «{name}» en el compendio.{hint}"),
            &format!("Nothing called “{name}” is in the compendium.{hint}"),
        )
    }

    pub fn no_sessions(self) -> String {
        self.pick(
            "Esta campaña no tiene sesiones numeradas (solo fichas y documentos del mundo): no hay cronología ni resumen que hacer.",
            "This campaign has no numbered sessions (only character sheets and world documents): there is no timeline or recap to make.",
        )
    }

    pub fn missing_session(self, asked: u32, highest: u32) -> String {
        self.pick(
            &format!("La sesión {asked} no está en las notas: la última que hay es la {highest}."),
            &format!("Session {asked} is not in the notes: the last session there is {highest}."),
        )
    }

    pub fn recap_heading(self, session: u32, is_last: bool) -> String {
        match (self, is_last) {
            (Lang::Es, true) => format!("Resumen de la sesión {session} (la última)"),
            (Lang::Es, false) => format!("Resumen de la sesión {session}"),
            (Lang::En, true) => format!("Recap of session {session} (the last one)"),
            (Lang::En, false) => format!("Recap of session {session}"),
        }
    }

    // --- 👍/👎 and the DM's report (`discord/feedback.rs`) ---

    /// The ephemeral question after a 👎.
    pub fn what_was_wrong(self) -> String {
        self.pick("Anotado 👎. ¿Qué estaba mal? (opcional)", "Noted 👎. What was wrong? (optional)")
    }

    /// The three choices after a 👎.
    pub fn reason_label(self, reason: crate::feedback::Reason) -> String {
        use crate::feedback::Reason;
        match reason {
            Reason::Wrong => self.pick("Era incorrecta", "It was wrong"),
            Reason::Incomplete => self.pick("Estaba incompleta", "It was incomplete"),
            Reason::InTheNotes => self.pick("Estaba en las notas", "It was in the notes"),
        }
    }

    /// After a 👍, or a reason given.
    pub fn verdict_noted(self) -> String {
        self.pick(
            "Anotado, gracias: el DM lo verá en su informe.",
            "Noted, thank you: the DM will see it in their report.",
        )
    }

    /// A verdict on an answer no longer kept (older than `keep_days`).
    pub fn verdict_too_old(self) -> String {
        self.pick(
            "Esa respuesta ya no se guarda: no se anotó nada.",
            "That answer is no longer kept: nothing was noted.",
        )
    }

    /// `/oraculo_informe`'s first line: how many questions, whose.
    pub fn report_heading(self, n_questions: usize, n_unanswered: usize, gm_view: bool) -> String {
        match (self, gm_view) {
            (Lang::Es, true) => format!(
                "**{n_questions} pregunta(s) guardada(s)** (todos los canales); las notas no respondieron {n_unanswered}."
            ),
            (Lang::Es, false) => format!(
                "**{n_questions} pregunta(s) guardada(s)** (canales de jugadores); las notas no respondieron \
                 {n_unanswered}."
            ),
            (Lang::En, true) => {
                format!("**{n_questions} question(s) kept** (every channel); the notes did not answer {n_unanswered}.")
            }
            (Lang::En, false) => format!(
                "**{n_questions} question(s) kept** (players' channels); the notes did not answer {n_unanswered}."
            ),
        }
    }

    pub fn report_unanswered(self) -> String {
        self.pick(
            "**Sin respuesta en las notas**, por lo que nombran (lo más preguntado primero):",
            "**Not answered by the notes**, by what they name (most asked first):",
        )
    }

    pub fn report_session(self, session: &str) -> String {
        self.pick(&format!("sesión {session}"), &format!("session {session}"))
    }

    pub fn report_nothing_named(self) -> String {
        self.pick("(nada nombrado)", "(nothing named)")
    }

    pub fn report_marked_wrong(self) -> String {
        self.pick(
            "**Marcadas como mal 👎**, con las etiquetas que citaban:",
            "**Marked wrong 👎**, with the labels they cited:",
        )
    }

    pub fn report_weeks(self) -> String {
        self.pick(
            "**Por semana** (preguntas · sin respuesta · 👍 · 👎):",
            "**By week** (asked · unanswered · 👍 · 👎):",
        )
    }

    pub fn report_empty(self) -> String {
        self.pick("No hay preguntas guardadas todavía.", "No question is kept yet.")
    }
}
