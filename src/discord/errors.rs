//! One place for everything that goes wrong on the Discord side.
//!
//! [`on_error`] matches every [`poise::FrameworkError`] variant: the user sees what went
//! wrong and what to do (ephemerally, with mentions off); the details, with their context,
//! go to the log and never to the channel. [`ask_error_text`] does the same for the
//! oracle's own errors.

use poise::serenity_prelude as serenity;

use super::access::{Barred, refuse_barred};
use super::builders;
use super::layout::Message;
use super::locale::Lang;
use super::{Context, Data, Error};
use crate::oracle::AskError;
use crate::retrieve::RetrieveError;

/// What a player reads when a question fails: never the error's own text (URLs, paths,
/// model names are for the log).
pub fn ask_error_text(error: &AskError, lang: Lang) -> String {
    match error {
        AskError::EmptyQuestion => lang.empty_question(),
        AskError::QuestionTooLong { chars, max } => lang.question_too_long(*chars, *max),
        AskError::NotBuilt => lang.not_built(),
        AskError::Llm(_) | AskError::Retrieve(RetrieveError::Embed(_)) => lang.model_unavailable(),
        AskError::Retrieve(RetrieveError::EmbedderMismatch { .. }) => lang.index_stale(),
        AskError::Index(_)
        | AskError::Retrieve(RetrieveError::Index(_))
        | AskError::Retrieve(RetrieveError::CompendiumForTheGm) => lang.search_failed(),
    }
}

/// Logs a failed question at the level it deserves: the user's own mistakes are not errors.
pub fn log_ask_error(error: &AskError, place: &str) {
    match error {
        AskError::EmptyQuestion | AskError::QuestionTooLong { .. } => {
            tracing::info!(error = %error, place, "question refused")
        }
        AskError::NotBuilt => tracing::warn!(error = %error, place, "question before any ingest"),
        _ => tracing::error!(error = %error, place, "question failed"),
    }
}

/// The language to answer a command in.
pub fn lang_of(ctx: Context<'_>) -> Lang {
    Lang::from_locale(ctx.locale(), ctx.data().lang)
}

/// Tells the user, ephemerally; a failure to tell is logged.
pub async fn tell(ctx: Context<'_>, text: &str) {
    if let Err(err) = ctx.send(Message::notice(text).to_reply(true)).await {
        tracing::warn!(error = %err, command = %ctx.command().qualified_name, "could not tell the user about an error");
    }
}

/// poise's error handler: an exhaustive match, so a new kind of failure is a compile error
/// here rather than a silent drop.
pub async fn on_error(error: poise::FrameworkError<'_, Data, Error>) {
    use poise::FrameworkError as E;
    match error {
        E::Setup { error, .. } => tracing::error!(error = %format!("{error:#}"), "bot setup failed"),
        E::EventHandler { error, event, .. } => {
            tracing::error!(error = %format!("{error:#}"), event = event.snake_case_name(), "event handler failed")
        }
        E::Command { error, ctx, .. } => {
            tracing::error!(
                error = %format!("{error:#}"),
                command = %ctx.command().qualified_name,
                user = ctx.author().id.get(),
                "command failed"
            );
            tell(ctx, &lang_of(ctx).unexpected()).await;
        }
        E::SubcommandRequired { ctx } => {
            tracing::warn!(command = %ctx.command().qualified_name, "subcommand required");
            tell(ctx, &lang_of(ctx).bad_argument()).await;
        }
        E::CommandPanic { payload, ctx, .. } => {
            tracing::error!(payload = ?payload, command = %ctx.command().qualified_name, "command panicked");
            tell(ctx, &lang_of(ctx).unexpected()).await;
        }
        E::ArgumentParse { error, input, ctx, .. } => {
            tracing::warn!(error = %error, input = ?input, command = %ctx.command().qualified_name, "bad command argument");
            tell(ctx, &lang_of(ctx).bad_argument()).await;
        }
        E::CommandStructureMismatch { description, ctx, .. } => {
            tracing::warn!(description, command = %ctx.command.qualified_name, "registered command differs from this build");
            tell(poise::Context::Application(ctx), &lang_of(poise::Context::Application(ctx)).command_outdated()).await;
        }
        E::CooldownHit { remaining_cooldown, ctx, .. } => {
            tell(ctx, &lang_of(ctx).rate_limited(remaining_cooldown.as_secs().max(1))).await;
        }
        E::MissingBotPermissions { missing_permissions, ctx, .. } => {
            tracing::warn!(%missing_permissions, command = %ctx.command().qualified_name, "bot lacks permissions");
            tell(ctx, &lang_of(ctx).missing_bot_permissions(&missing_permissions.to_string())).await;
        }
        E::MissingUserPermissions { ctx, .. }
        | E::NotAnOwner { ctx, .. }
        | E::GuildOnly { ctx, .. }
        | E::DmOnly { ctx, .. }
        | E::NsfwOnly { ctx, .. } => {
            tell(ctx, &lang_of(ctx).not_allowed()).await;
        }
        E::CommandCheckFailed { error, ctx, .. } => {
            let lang = lang_of(ctx);
            if let Some(barred) = error.as_ref().and_then(|error| error.downcast_ref::<Barred>()) {
                refuse_barred(*barred, ctx.author().id.get());
                if !matches!(barred, Barred::UnknownGuild(_)) {
                    tell(ctx, &lang.barred(*barred)).await;
                }
            } else if let Some(error) = error {
                tracing::error!(error = %format!("{error:#}"), command = %ctx.command().qualified_name, "command check failed");
                tell(ctx, &lang.unexpected()).await;
            } else if ctx.command().name == "reingest" {
                tracing::info!(user = ctx.author().id.get(), "reingest refused: not the campaign's DM");
                tell(ctx, &lang.reingest_refused()).await;
            } else if ctx.command().name == "oraculo_informe" {
                tracing::info!(user = ctx.author().id.get(), "report refused: not the campaign's DM");
                tell(ctx, &lang.report_refused()).await;
            } else {
                tell(ctx, &lang.not_allowed()).await;
            }
        }
        E::DynamicPrefix { error, msg, .. } => {
            tracing::error!(error = %format!("{error:#}"), message = msg.id.get(), "dynamic prefix failed")
        }
        E::UnknownCommand { msg_content, .. } => tracing::debug!(msg_content, "unknown prefix command ignored"),
        E::UnknownInteraction { ctx, framework, interaction, .. } => {
            tracing::warn!(command = %interaction.data.name, "interaction for a command this build does not have");
            let lang = Lang::from_locale(Some(&interaction.locale), framework.user_data.lang);
            let response = builders::message_response(&Message::notice(&lang.command_outdated()), true);
            if let Err(err) = interaction.create_response(ctx, response).await {
                tracing::warn!(error = %err, "could not answer an unknown interaction");
            }
        }
        E::NonCommandMessage { error, msg, .. } => {
            tracing::error!(error = %format!("{error:#}"), message = msg.id.get(), "message handler failed")
        }
        E::__NonExhaustive(never) => match never {},
    }
}

/// A serenity error, logged with what was being done (REST failures are never shown raw).
pub fn log_discord_error(error: &serenity::Error, doing: &str) {
    tracing::warn!(error = %error, doing, "Discord request failed");
}
