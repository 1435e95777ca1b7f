//! The slash commands.
//!
//! - `/oraculo pregunta:<texto>`: defers at once (Discord's 3-second window), answers with
//!   cited embeds (`reply`), and opens a thread on the answer for follow-ups.
//! - `/reingest`: the campaign's DM only (a poise `check`); runs the incremental ingest in the
//!   background and reports ephemerally. Questions meanwhile read the previous index.
//! - `/fuente etiqueta:<label>`: a cited source in full, only to the asker.
//! - `/cronologia nombre:<entity>`: every session where an entity appears, in order, each
//!   with one cited line; first and last appearance marked; paged.
//! - `/resumen [sesion]`: a cited recap of a session (default: the last one), queued like a
//!   question.
//! - `/oraculo_informe [dias]`: the campaign's DM only (the same check as `/reingest`): what
//!   the players asked that the notes did not answer, the answers marked wrong, the weeks
//!   (`feedback`), ephemerally; a players' channel shows only what players asked.
//!
//! Who may use them, and where, is `access`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use poise::serenity_prelude as serenity;
use tracing::Instrument;

use super::access::{command_place, refuse_barred};
use super::builders;
use super::errors::{ask_error_text, lang_of, log_discord_error, tell};
use super::layout::{self, Message};
use super::locale::Lang;
use super::place::Place;
use super::reply::{Outlet, Question, answer_question, interaction_token_usable, refuse_question, source_messages_for};
use super::{Context, Data, Desk, Error, Job, ReingestSetup};
use crate::ingest::{IngestError, IngestOptions, IngestSummary, Quiet, Removal};
use crate::oracle::Oracle;
use crate::retrieve::{Audience, Turn, TurnRole};
use crate::text::fold;

/// Every command, in the order `/` lists them.
pub fn commands() -> Vec<poise::Command<Data, Error>> {
    vec![oraculo(), fuente(), reingest(), cronologia(), resumen(), oraculo_informe()]
}

/// The deferred "thinking…" response, sent before any slow work; mentions off like every
/// message (poise's own `defer` sets no `allowed_mentions`).
async fn defer(ctx: Context<'_>, ephemeral: bool) -> Result<(), serenity::Error> {
    if let poise::Context::Application(app) = ctx
        && !app.has_sent_initial_response.load(Ordering::SeqCst)
    {
        app.interaction.create_response(ctx.serenity_context(), builders::deferred_response(ephemeral)).await?;
        app.has_sent_initial_response.store(true, Ordering::SeqCst);
    }
    Ok(())
}

// --- /oraculo ----------------------------------------------------------------------------

/// Pregunta al oráculo de la campaña; responde citando las notas del DM.
#[poise::command(
    slash_command,
    name_localized("es-ES", "oraculo"),
    name_localized("es-419", "oraculo"),
    name_localized("en-US", "oracle"),
    name_localized("en-GB", "oracle"),
    description_localized("en-US", "Ask the campaign's oracle; it answers citing the DM's notes."),
    description_localized("en-GB", "Ask the campaign's oracle; it answers citing the DM's notes."),
    description_localized("es-ES", "Pregunta al oráculo de la campaña; responde citando las notas del DM."),
    description_localized("es-419", "Pregunta al oráculo de la campaña; responde citando las notas del DM.")
)]
pub async fn oraculo(
    ctx: Context<'_>,
    #[description = "Lo que quieres saber de la campaña"]
    #[name_localized("en-US", "question")]
    #[name_localized("en-GB", "question")]
    #[description_localized("en-US", "What you want to know about the campaign")]
    #[description_localized("en-GB", "What you want to know about the campaign")]
    #[max_length = 1000]
    pregunta: String,
) -> Result<(), Error> {
    let data = ctx.data();
    let lang = lang_of(ctx);
    let question = pregunta.trim();
    let where_asked = command_place(ctx);
    if let Some(refusal) = refuse_question(data, ctx.author().id.get(), question, lang) {
        tell(ctx, &refusal).await;
        return Ok(());
    }
    let desk = data.desk(ctx.author().id.get(), where_asked.location)?;
    // No room in the queue: told to the asker alone, before anything is posted in the channel.
    if let Some(busy) = data.queue.busy_for(where_asked.place.id()) {
        tell(ctx, &lang.busy(&busy)).await;
        return Ok(());
    }
    // Written down before Discord is told the question was taken: a restart answers it.
    let delivery = super::resume::Delivery {
        user: ctx.author().id.get(),
        location: where_asked.location,
        place: where_asked.place,
        lang,
        interaction: match ctx {
            poise::Context::Application(app) => Some((app.interaction.id.get(), app.interaction.token.clone())),
            poise::Context::Prefix(_) => None,
        },
        asking_message: None,
    };
    let in_flight = super::resume::remember(&desk, question, &delivery).await;
    defer(ctx, false).await?;
    let user = ctx.author().id.get();
    let audience = desk.access.audience(user, where_asked.location);
    let span = tracing::info_span!("discord.reply", campaign = %desk.name, place = ?where_asked.place, ?audience, user = ctx.author().id.get());
    async move {
        let outlet = Outlet::Command { ctx, original_used: std::sync::atomic::AtomicBool::new(false) };
        let Some(answered) = answer_question(
            data,
            &desk,
            &outlet,
            Question { text: question, asker: user, place: where_asked.place, audience, lang, in_flight },
        )
        .await
        else {
            return;
        };
        if where_asked.can_open_thread
            && let Some(message_id) = answered.first_message
        {
            open_thread(ctx, &desk, message_id, question, &answered.text, audience, lang).await;
        }
    }
    .instrument(span)
    .await;
    Ok(())
}

/// Opens a thread on the answer, starting its history with the exchange it was opened on.
///
/// A thread started from a message takes that message's id, so its history is written
/// before the thread exists: a follow-up typed the moment it appears is already recognised.
async fn open_thread(
    ctx: Context<'_>,
    desk: &Desk,
    message_id: serenity::MessageId,
    question: &str,
    answer: &str,
    audience: Audience,
    lang: Lang,
) {
    let turns = vec![
        Turn { role: TurnRole::User, content: question.to_string() },
        Turn { role: TurnRole::Assistant, content: answer.to_string() },
    ];
    desk.history.append(Place::Thread(message_id.get()), audience, turns.clone()).await;
    let builder = serenity::CreateThread::new(layout::thread_name(question, lang))
        .auto_archive_duration(serenity::AutoArchiveDuration::OneDay);
    match ctx.channel_id().create_thread_from_message(ctx.http(), message_id, builder).await {
        Ok(thread) if thread.id.get() != message_id.get() => {
            desk.history.append(Place::Thread(thread.id.get()), audience, turns).await;
        }
        Ok(_) => {}
        Err(err) => log_discord_error(&err, "opening a thread on an answer"),
    }
}

// --- /fuente -------------------------------------------------------------------------------

/// Muestra entera una nota citada (solo tú la ves).
#[poise::command(
    slash_command,
    ephemeral,
    name_localized("es-ES", "fuente"),
    name_localized("es-419", "fuente"),
    name_localized("en-US", "source"),
    name_localized("en-GB", "source"),
    description_localized("en-US", "Show a cited note in full (only you see it)."),
    description_localized("en-GB", "Show a cited note in full (only you see it)."),
    description_localized("es-ES", "Muestra entera una nota citada (solo tú la ves)."),
    description_localized("es-419", "Muestra entera una nota citada (solo tú la ves).")
)]
pub async fn fuente(
    ctx: Context<'_>,
    #[description = "La etiqueta citada, p. ej. «Sesión 12»"]
    #[name_localized("en-US", "label")]
    #[name_localized("en-GB", "label")]
    #[description_localized("en-US", "The cited label, e.g. “Session 12”")]
    #[description_localized("en-GB", "The cited label, e.g. “Session 12”")]
    #[autocomplete = "autocomplete_label"]
    #[max_length = 200]
    etiqueta: String,
) -> Result<(), Error> {
    let data = ctx.data();
    let lang = lang_of(ctx);
    let place = command_place(ctx);
    if let Err(wait) = data.queue.check_source_rate(ctx.author().id.get()) {
        tell(ctx, &lang.sources_rate_limited(wait.as_secs().max(1))).await;
        return Ok(());
    }
    let desk = data.desk(ctx.author().id.get(), place.location)?;
    defer(ctx, true).await?;
    let audience = desk.access.audience(ctx.author().id.get(), place.location);
    for message in source_messages_for(data, &desk, etiqueta.trim(), audience, lang).await {
        ctx.send(message.to_reply(true)).await?;
    }
    Ok(())
}

/// Labels the asker may read that contain what was typed (accents and case ignored).
async fn autocomplete_label(ctx: Context<'_>, partial: &str) -> Vec<String> {
    let typed = fold(partial.trim());
    let listed =
        on_the_askers_oracle(ctx, move |oracle, audience| async move { oracle.notes().sources(audience).await.ok() });
    let labels = listed.await.into_iter().flatten().map(|source| String::from(source.label));
    labels.filter(|label| layout::discord_len(label) <= 100 && fold(label).contains(&typed)).take(25).collect()
}

/// What an autocompletion reads from the asker's campaign, as the asker's audience sees it, on
/// the worker; `None` where the asker is barred (logged) or the worker is gone.
async fn on_the_askers_oracle<T, F, Fut>(ctx: Context<'_>, read: F) -> Option<T>
where
    T: Send + 'static,
    F: FnOnce(Arc<Oracle>, Audience) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Option<T>> + 'static,
{
    let location = command_place(ctx).location;
    let user = ctx.author().id.get();
    let desk = ctx.data().desk(user, location).map_err(|barred| refuse_barred(barred, user)).ok()?;
    let audience = desk.access.audience(user, location);
    let oracle = Arc::clone(&desk.oracle);
    ctx.data().worker.run("answers", move || read(oracle, audience)).await.ok().flatten()
}

// --- /reingest -----------------------------------------------------------------------------

/// The check on `/reingest`: only the campaign's DM (a configured user, or role).
async fn is_campaign_dm(ctx: Context<'_>) -> Result<bool, Error> {
    let roles: Vec<u64> = match ctx {
        poise::Context::Application(app) => {
            app.interaction.member.as_ref().map(|member| member.roles.iter().map(|role| role.get()).collect())
        }
        poise::Context::Prefix(_) => None,
    }
    .unwrap_or_default();
    // The DM of the campaign of the place it is used in (place_check has routed it already).
    let Ok(desk) = ctx.data().desk(ctx.author().id.get(), command_place(ctx).location) else {
        return Ok(false);
    };
    Ok(desk.access.is_campaign_dm(ctx.author().id.get(), &roles))
}

/// Vuelve a leer las notas de la campaña (solo el DM).
#[poise::command(
    slash_command,
    ephemeral,
    check = "is_campaign_dm",
    name_localized("es-ES", "reindexar"),
    name_localized("es-419", "reindexar"),
    name_localized("en-US", "reingest"),
    name_localized("en-GB", "reingest"),
    description_localized("en-US", "Read the campaign's notes again (DM only)."),
    description_localized("en-GB", "Read the campaign's notes again (DM only)."),
    description_localized("es-ES", "Vuelve a leer las notas de la campaña (solo el DM)."),
    description_localized("es-419", "Vuelve a leer las notas de la campaña (solo el DM).")
)]
pub async fn reingest(
    ctx: Context<'_>,
    #[description = "Confirma un borrado real: más de la mitad de las notas (al menos 5), o todas"]
    #[name_localized("es-ES", "permitir_borrado")]
    #[name_localized("es-419", "permitir_borrado")]
    #[name_localized("en-US", "allow_removal")]
    #[name_localized("en-GB", "allow_removal")]
    #[description_localized("en-US", "Confirm a real deletion: more than half the notes (at least 5), or all")]
    #[description_localized("en-GB", "Confirm a real deletion: more than half the notes (at least 5), or all")]
    allow_removal: Option<bool>,
) -> Result<(), Error> {
    let removal = if allow_removal.unwrap_or(false) { Removal::Allowed } else { Removal::Guarded };
    let data = ctx.data();
    let lang = lang_of(ctx);
    let desk = data.desk(ctx.author().id.get(), command_place(ctx).location)?;
    defer(ctx, true).await?;
    let poise::Context::Application(app) = ctx else {
        return Ok(());
    };
    let edit = |text: String| {
        let interaction = app.interaction.clone();
        async move {
            if let Err(err) = interaction.edit_response(ctx.http(), Message::notice(&text).to_edit_response()).await {
                log_discord_error(&err, "reporting on a reingest");
            }
        }
    };
    let Some(job) = data.lifecycle.begin() else {
        edit(lang.shutting_down()).await;
        return Ok(());
    };
    let Ok(running) = Arc::clone(&desk.reingest.running).try_lock_owned() else {
        edit(lang.reingest_already_running()).await;
        return Ok(());
    };
    edit(lang.reingest_running()).await;
    tracing::info!(user = ctx.author().id.get(), campaign = %desk.name, ?removal, "reingest started from Discord");

    // The ingest outlives this command: it reports by editing the deferred reply while its
    // token lives (15 minutes), by direct message after.
    let http = Arc::clone(&ctx.serenity_context().http);
    let interaction = app.interaction.clone();
    let oracle = Arc::clone(&desk.oracle);
    let setup = Arc::clone(&desk.reingest);
    let lifecycle = Arc::clone(&data.lifecycle);
    let worker = data.ingest_worker.clone();
    tokio::spawn(
        async move {
            let _job: Job = job;
            let _running = running;
            let ingest = worker.run("ingest", move || async move { run_reingest(&oracle, &setup, removal).await });
            let outcome = tokio::select! {
                outcome = ingest => Some(outcome),
                () = lifecycle.interrupted() => None,
            };
            let text = match outcome {
                Some(Ok(Ok(summary))) => lang.reingest_summary(&summary),
                Some(Ok(Err(err))) if err.is_busy() => lang.reingest_already_running(),
                Some(Ok(Err(IngestError::MassRemoval(refused)))) => {
                    tracing::warn!(error = %refused, "reingest refused: a mass removal the DM did not confirm");
                    lang.removal_refused(&refused)
                }
                Some(Ok(Err(err))) => {
                    tracing::error!(error = %err, "reingest failed; the previous index stays in use");
                    lang.reingest_failed()
                }
                Some(Err(gone)) => {
                    tracing::error!(error = %gone, "reingest could not run");
                    lang.reingest_failed()
                }
                None => lang.interrupted(),
            };
            // The annotation pass can outlast the interaction's token: then the report goes to
            // the DM by direct message.
            if interaction_token_usable(interaction.id.get(), SystemTime::now()) {
                if let Err(err) = interaction.edit_response(&http, Message::notice(&text).to_edit_response()).await {
                    log_discord_error(&err, "reporting a finished reingest");
                }
            } else {
                let sent = match interaction.user.id.create_dm_channel(&http).await {
                    Ok(direct) => direct.id.send_message(&http, Message::notice(&text).to_create_message(None)).await,
                    Err(err) => Err(err),
                };
                if let Err(err) = sent {
                    log_discord_error(&err, "reporting a finished reingest by direct message");
                }
            }
        }
        .instrument(tracing::info_span!("discord.reingest")),
    );
    Ok(())
}

// --- /oraculo_informe ------------------------------------------------------------------

/// Lo que preguntaron los jugadores y las notas no respondieron (solo el DM).
#[poise::command(
    slash_command,
    ephemeral,
    check = "is_campaign_dm",
    name_localized("es-ES", "oraculo_informe"),
    name_localized("es-419", "oraculo_informe"),
    name_localized("en-US", "oracle_report"),
    name_localized("en-GB", "oracle_report"),
    description_localized("en-US", "What the players asked that the notes did not answer (DM only)."),
    description_localized("en-GB", "What the players asked that the notes did not answer (DM only)."),
    description_localized("es-ES", "Lo que preguntaron los jugadores y las notas no respondieron (solo el DM)."),
    description_localized("es-419", "Lo que preguntaron los jugadores y las notas no respondieron (solo el DM).")
)]
pub async fn oraculo_informe(
    ctx: Context<'_>,
    #[description = "Solo los últimos N días (por defecto, todo lo guardado)"]
    #[name_localized("en-US", "days")]
    #[name_localized("en-GB", "days")]
    #[description_localized("en-US", "Only the last N days (default: everything kept)")]
    #[description_localized("en-GB", "Only the last N days (default: everything kept)")]
    #[min = 1]
    #[max = 3650]
    dias: Option<u32>,
) -> Result<(), Error> {
    let data = ctx.data();
    let lang = lang_of(ctx);
    let location = command_place(ctx).location;
    let user = ctx.author().id.get();
    let desk = data.desk(user, location)?;
    defer(ctx, true).await?;
    // Where it is asked decides what it shows: a players' channel never lists a GM channel's.
    let audience = desk.access.audience(user, location);
    let since = dias.map(|days| crate::feedback::now_unix() - i64::from(days) * 24 * 60 * 60);
    let report = desk.asked.report(audience, since).instrument(tracing::info_span!("discord.report", ?audience)).await;
    let messages = match report {
        Ok(report) => super::feedback::report_messages(&report, lang),
        Err(err) => {
            tracing::error!(error = format!("{err:#}"), "the kept questions could not be read");
            vec![Message::notice(&lang.unexpected())]
        }
    };
    for message in messages {
        ctx.send(message.to_reply(true)).await?;
    }
    Ok(())
}

/// The ingest `oraculo ingest` runs: incremental, committed at once at the end (questions keep
/// reading the previous index until then), then the annotation pass.
pub async fn run_reingest(
    oracle: &Oracle,
    setup: &ReingestSetup,
    removal: Removal,
) -> Result<IngestSummary, IngestError> {
    crate::app::ingest_and_annotate(
        oracle.notes().index_dir(),
        &setup.campaign_dir,
        &setup.campaign,
        oracle.notes().embedder().as_ref(),
        crate::app::Annotator::Model(oracle.chat().as_ref()),
        IngestOptions { batch_size: setup.batch_size, removal },
        &Quiet,
    )
    .await
}

// --- /cronologia and /resumen --------------------------------------------------

/// What a timeline or a recap failure tells the asker.
fn time_error_text(error: &crate::timeline::TimeError, lang: Lang) -> String {
    use crate::timeline::TimeError;
    match error {
        TimeError::Ask(err) => ask_error_text(err, lang),
        TimeError::Index(_) => lang.search_failed(),
        TimeError::UnknownEntity { name, suggestions } => lang.unknown_entity(name, suggestions),
        TimeError::NoSessions => lang.no_sessions(),
        TimeError::MissingSession { asked, highest } => lang.missing_session(*asked, highest.0),
    }
}

/// Las sesiones en las que aparece alguien o algo, en orden, cada una con su línea citada.
#[poise::command(
    slash_command,
    name_localized("es-ES", "cronologia"),
    name_localized("es-419", "cronologia"),
    name_localized("en-US", "timeline"),
    name_localized("en-GB", "timeline"),
    description_localized(
        "en-US",
        "Every session where someone or something appears, in order, each with a cited line."
    ),
    description_localized(
        "en-GB",
        "Every session where someone or something appears, in order, each with a cited line."
    ),
    description_localized(
        "es-ES",
        "Las sesiones en las que aparece alguien o algo, en orden, cada una con su línea citada."
    ),
    description_localized(
        "es-419",
        "Las sesiones en las que aparece alguien o algo, en orden, cada una con su línea citada."
    )
)]
pub async fn cronologia(
    ctx: Context<'_>,
    #[description = "Un personaje, lugar, facción u objeto del compendio"]
    #[name_localized("en-US", "name")]
    #[name_localized("en-GB", "name")]
    #[description_localized("en-US", "A character, place, faction or item of the compendium")]
    #[description_localized("en-GB", "A character, place, faction or item of the compendium")]
    #[autocomplete = "autocomplete_entity"]
    #[max_length = 100]
    nombre: String,
) -> Result<(), Error> {
    let data = ctx.data();
    let lang = lang_of(ctx);
    let location = command_place(ctx).location;
    let desk = data.desk(ctx.author().id.get(), location)?;
    defer(ctx, false).await?;
    let audience = desk.access.audience(ctx.author().id.get(), location);
    let oracle = Arc::clone(&desk.oracle);
    let name = nombre.trim().to_string();
    let made = data
        .worker
        .run("answers", move || async move { crate::timeline::timeline(&oracle, &name, audience).await })
        .instrument(tracing::info_span!("discord.timeline", ?audience))
        .await;
    let messages = match made {
        Ok(Ok(timeline)) => layout::timeline_messages(&timeline, lang),
        Ok(Err(err)) => {
            tracing::info!(error = %err, "timeline refused");
            vec![Message::notice(&time_error_text(&err, lang))]
        }
        Err(gone) => {
            tracing::error!(error = %gone, "no worker for a timeline");
            vec![Message::notice(&lang.unexpected())]
        }
    };
    for message in messages {
        ctx.send(message.to_reply(false)).await?;
    }
    Ok(())
}

/// Compendium names and aliases containing what was typed (accents and case ignored), as
/// the asker's audience may read them: a player is offered no GM-only entity or alias.
async fn autocomplete_entity(ctx: Context<'_>, partial: &str) -> Vec<String> {
    let typed = partial.to_string();
    let listed = on_the_askers_oracle(ctx, move |oracle, audience| async move {
        oracle.notes().entity_names_matching(&typed, 25, audience).await.ok()
    });
    listed.await.into_iter().flatten().filter(|name| layout::discord_len(name) <= 100).collect()
}

/// Resume una sesión (por defecto, la última) para empezar la partida, citando las notas.
#[poise::command(
    slash_command,
    name_localized("es-ES", "resumen"),
    name_localized("es-419", "resumen"),
    name_localized("en-US", "recap"),
    name_localized("en-GB", "recap"),
    description_localized("en-US", "Recap a session (by default the last one) to open the night, citing the notes."),
    description_localized("en-GB", "Recap a session (by default the last one) to open the night, citing the notes."),
    description_localized(
        "es-ES",
        "Resume una sesión (por defecto, la última) para empezar la partida, citando las notas."
    ),
    description_localized(
        "es-419",
        "Resume una sesión (por defecto, la última) para empezar la partida, citando las notas."
    )
)]
pub async fn resumen(
    ctx: Context<'_>,
    #[description = "El número de la sesión (por defecto, la última)"]
    #[name_localized("en-US", "session")]
    #[name_localized("en-GB", "session")]
    #[description_localized("en-US", "The session's number (by default, the last one)")]
    #[description_localized("en-GB", "The session's number (by default, the last one)")]
    #[min = 1]
    #[max = 9999]
    sesion: Option<u32>,
) -> Result<(), Error> {
    let data = ctx.data();
    let lang = lang_of(ctx);
    if let Some(refusal) = refuse_question(data, ctx.author().id.get(), "/resumen", lang) {
        tell(ctx, &refusal).await;
        return Ok(());
    }
    let where_asked = command_place(ctx);
    let location = where_asked.location;
    let desk = data.desk(ctx.author().id.get(), location)?;
    defer(ctx, false).await?;
    let audience = desk.access.audience(ctx.author().id.get(), location);
    let Some(_job) = data.lifecycle.begin() else {
        ctx.send(Message::notice(&lang.shutting_down()).to_reply(false)).await?;
        return Ok(());
    };
    // One model at a time: a recap waits its turn like a question.
    let _slot = match data.queue.enter(where_asked.place.id()) {
        super::queue::Admission::Now(slot) => slot,
        super::queue::Admission::Busy(busy) => {
            ctx.send(Message::notice(&lang.busy(&busy)).to_reply(false)).await?;
            return Ok(());
        }
        super::queue::Admission::Queued(waiting) => {
            tokio::select! {
                slot = waiting.start() => match slot {
                    Ok(slot) => slot,
                    Err(_) => {
                        ctx.send(Message::notice(&lang.interrupted()).to_reply(false)).await?;
                        return Ok(());
                    }
                },
                () = data.lifecycle.interrupted() => {
                    ctx.send(Message::notice(&lang.interrupted()).to_reply(false)).await?;
                    return Ok(());
                }
            }
        }
    };
    let oracle = Arc::clone(&desk.oracle);
    let language = match lang {
        Lang::Es => crate::corpus::LabelLanguage::Es,
        Lang::En => crate::corpus::LabelLanguage::En,
    };
    let made = data
        .worker
        .run("answers", move || async move { crate::timeline::recap(&oracle, sesion, audience, language, None).await })
        .instrument(tracing::info_span!("discord.recap", ?audience, session = sesion));
    let made = tokio::select! {
        made = made => made,
        () = data.lifecycle.interrupted() => {
            ctx.send(Message::notice(&lang.interrupted()).to_reply(false)).await?;
            return Ok(());
        }
    };
    let messages = match made {
        Ok(Ok(recap)) => {
            let text =
                format!("**{}**\n\n{}", lang.recap_heading(recap.session.0, recap.is_last), recap.answer.text.trim());
            layout::answer_messages(&text, &recap.answer.citations, recap.answer.invented_citations.len(), lang)
        }
        Ok(Err(err)) => {
            tracing::info!(error = %err, "recap refused");
            vec![Message::notice(&time_error_text(&err, lang))]
        }
        Err(gone) => {
            tracing::error!(error = %gone, "no worker for a recap");
            vec![Message::notice(&lang.unexpected())]
        }
    };
    for message in messages {
        ctx.send(message.to_reply(false)).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_localised_in_spanish_and_english() {
        for command in commands() {
            assert!(command.name_localizations.contains_key("en-US"), "{}", command.name);
            assert!(command.name_localizations.contains_key("es-ES"), "{}", command.name);
            assert!(command.description_localizations.contains_key("es-ES"), "{}", command.name);
            assert!(command.description_localizations.contains_key("en-US"), "{}", command.name);
            for parameter in &command.parameters {
                assert!(parameter.name_localizations.contains_key("en-US"), "{}", parameter.name);
                assert!(parameter.description_localizations.contains_key("en-US"), "{}", parameter.name);
            }
        }
        let names: Vec<String> = commands().into_iter().map(|c| c.name).collect();
        assert_eq!(names, ["oraculo", "fuente", "reingest", "cronologia", "resumen", "oraculo_informe"]);
    }
}
