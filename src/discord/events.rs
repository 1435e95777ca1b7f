//! Gateway events that are not slash commands.
//!
//! - MESSAGE_CREATE in a thread the bot opened on one of its answers: a follow-up question,
//!   answered with that thread's history (the exchange it was opened on comes first).
//! - MESSAGE_CREATE elsewhere in a configured server that mentions the bot, or replies to one
//!   of its answers: a question in that channel's conversation, answered as a reply.
//! - A "📖 label" button under an answer: the source in full, only to whoever clicked.
//! - A 👍/👎 button under an answer, or a reason after a 👎: the verdict kept, ephemerally
//!   acknowledged (`feedback`).
//! - MESSAGE_DELETE of a message whose question waits in the queue: the question leaves it.
//! - READY, the first time: the questions a previous run left in flight are answered.

use poise::serenity_prelude as serenity;
use tracing::Instrument;

use super::access::{Barred, Location, Surface, interaction_place, refuse_barred};
use super::builders;
use super::errors::log_discord_error;
use super::feedback::feedback_button;
use super::layout::{self, Message};
use super::locale::Lang;
use super::place::Place;
use super::reply::{Outlet, Question, answer_question, refuse_question, source_messages_for};
use super::resume::{Delivery, remember, resume_questions};
use super::{Data, Error};

/// poise's event handler.
pub async fn handle(
    ctx: &serenity::Context,
    event: &serenity::FullEvent,
    _framework: poise::FrameworkContext<'_, Data, Error>,
    data: &Data,
) -> Result<(), Error> {
    match event {
        // Connected: the questions a previous run left unanswered are answered now.
        serenity::FullEvent::Ready { .. } => resume_questions(ctx, data).await,
        serenity::FullEvent::Message { new_message } => {
            if !thread_followup(ctx, data, new_message).await {
                mention_or_reply(ctx, data, new_message).await;
            }
        }
        // A question still waiting in the queue leaves it when its message is deleted.
        serenity::FullEvent::MessageDelete { deleted_message_id, .. } => {
            if data.withdrawals.withdraw(deleted_message_id.get()) {
                tracing::info!(message = deleted_message_id.get(), "a queued question was withdrawn by its author");
            }
        }
        serenity::FullEvent::MessageDeleteBulk { multiple_deleted_messages_ids, .. } => {
            for message in multiple_deleted_messages_ids {
                data.withdrawals.withdraw(message.get());
            }
        }
        serenity::FullEvent::InteractionCreate { interaction: serenity::Interaction::Component(component) } => {
            if !feedback_button(ctx, data, component).await {
                source_button(ctx, data, component).await
            }
        }
        _ => {}
    }
    Ok(())
}

/// A message in one of the bot's threads is a follow-up question. `false` when the message is
/// not in one of them (it may still be a mention or a reply).
async fn thread_followup(ctx: &serenity::Context, data: &Data, message: &serenity::Message) -> bool {
    if message.author.bot || message.webhook_id.is_some() || message.guild_id.is_none() {
        return true;
    }
    let place = Place::Thread(message.channel_id.get());
    // Cheap first: only threads with a history can be the bot's (it seeds each one it opens).
    let mut known = false;
    for desk in &data.desks {
        known = known || desk.history.knows(place).await;
    }
    if !known {
        return false;
    }
    let thread = match message.channel_id.to_channel(ctx).await {
        Ok(serenity::Channel::Guild(thread)) => thread,
        Ok(_) => return false,
        Err(err) => {
            log_discord_error(&err, "reading a thread's parent channel");
            return true;
        }
    };
    if thread.owner_id != Some(ctx.cache.current_user().id) {
        return false;
    }
    let user = message.author.id.get();
    let location = Location {
        surface: Surface::Guild,
        guild: message.guild_id.map(serenity::GuildId::get),
        channel: place.id(),
        parent: thread.parent_id.map(serenity::ChannelId::get),
    };
    let desk = match data.desk(user, location) {
        Ok(desk) => desk,
        Err(barred) => {
            refuse_barred(barred, user);
            return true;
        }
    };
    let question = message.content.trim();
    if question.is_empty() {
        // An image or a sticker; or, for every message, the MESSAGE_CONTENT intent is off.
        tracing::debug!(thread = place.key(), "empty follow-up ignored (is the MESSAGE_CONTENT intent on?)");
        return true;
    }
    let lang = data.lang;
    let outlet = Outlet::Thread { http: &ctx.http, channel: message.channel_id, reply_to: message.id };
    if let Some(refusal) = refuse_question(data, user, question, lang) {
        let reference = builders::reply_reference(message.channel_id, message.id);
        if let Err(err) = message
            .channel_id
            .send_message(&ctx.http, Message::notice(&refusal).to_create_message(Some(reference)))
            .await
        {
            log_discord_error(&err, "refusing a follow-up");
        }
        return true;
    }
    let audience = desk.access.audience(user, location);
    let delivery = Delivery { user, location, place, lang, interaction: None, asking_message: Some(message.id.get()) };
    let in_flight = remember(&desk, question, &delivery).await;
    let span = tracing::info_span!("discord.reply", campaign = %desk.name, place = %place.key(), ?audience, user);
    async {
        // Shown while the answer is made; stops when dropped.
        let _typing = message.channel_id.start_typing(&ctx.http);
        answer_question(
            data,
            &desk,
            &outlet,
            Question { text: question, asker: user, place, audience, lang, in_flight },
        )
        .await;
    }
    .instrument(span)
    .await;
    true
}

/// `@Oráculo <pregunta>` in a channel of a configured server, or a reply to one of the bot's
/// answers: a question answered in that channel's conversation (its history, like a thread
/// without opening one), replying to the message. A mention with no question gets a short
/// help; a reply to a message that is not an answer is ignored.
async fn mention_or_reply(ctx: &serenity::Context, data: &Data, message: &serenity::Message) {
    let me = ctx.cache.current_user().id;
    let mentioned = message.mentions.iter().any(|user| user.id == me);
    let replies_to_answer = message
        .referenced_message
        .as_deref()
        .is_some_and(|answered| answered.author.id == me && builders::is_answer(answered));
    if !mentioned && !replies_to_answer {
        return;
    }
    let user = message.author.id.get();
    let channel = match message.channel_id.to_channel(ctx).await {
        Ok(serenity::Channel::Guild(channel)) => channel,
        Ok(_) => return,
        Err(err) => {
            log_discord_error(&err, "reading a mention's channel");
            return;
        }
    };
    let in_thread = matches!(
        channel.kind,
        serenity::ChannelType::PublicThread | serenity::ChannelType::PrivateThread | serenity::ChannelType::NewsThread
    );
    let location = Location {
        surface: Surface::Guild,
        guild: message.guild_id.map(serenity::GuildId::get),
        channel: message.channel_id.get(),
        parent: if in_thread { channel.parent_id.map(serenity::ChannelId::get) } else { None },
    };
    let desk = match data.desk(user, location) {
        Ok(desk) => desk,
        Err(barred) => {
            refuse_barred(barred, user);
            return;
        }
    };
    let lang = desk.lang;
    let question = builders::without_mentions(&message.content, me.get());
    let reply = |text: String| async move {
        let reference = builders::reply_reference(message.channel_id, message.id);
        if let Err(err) =
            message.channel_id.send_message(&ctx.http, Message::notice(&text).to_create_message(Some(reference))).await
        {
            log_discord_error(&err, "answering a mention");
        }
    };
    if question.is_empty() {
        reply(lang.mention_help()).await;
        return;
    }
    if let Some(refusal) = refuse_question(data, user, &question, lang) {
        reply(refusal).await;
        return;
    }
    let place = if in_thread { Place::Thread(location.channel) } else { Place::Channel(location.channel) };
    let audience = desk.access.audience(user, location);
    let outlet = Outlet::Thread { http: &ctx.http, channel: message.channel_id, reply_to: message.id };
    let delivery = Delivery { user, location, place, lang, interaction: None, asking_message: Some(message.id.get()) };
    let in_flight = remember(&desk, &question, &delivery).await;
    let span = tracing::info_span!("discord.reply", campaign = %desk.name, place = %place.key(), ?audience, user, via = "mention");
    async {
        let _typing = message.channel_id.start_typing(&ctx.http);
        answer_question(
            data,
            &desk,
            &outlet,
            Question { text: &question, asker: user, place, audience, lang, in_flight },
        )
        .await;
    }
    .instrument(span)
    .await;
}

/// "📖 label": the source in full, ephemerally, for the audience of the channel clicked in.
async fn source_button(ctx: &serenity::Context, data: &Data, component: &serenity::ComponentInteraction) {
    let Some(label) = layout::label_from_button_id(&component.data.custom_id) else {
        return;
    };
    let lang = Lang::from_locale(Some(&component.locale), data.lang);
    let location =
        interaction_place(component.context, component.guild_id, component.channel_id, component.channel.as_ref())
            .location;
    let user = component.user.id.get();
    let desk = match data.desk(user, location) {
        Ok(desk) => desk,
        Err(barred) => {
            refuse_barred(barred, user);
            if !matches!(barred, Barred::UnknownGuild(_)) {
                let refusal = builders::message_response(&Message::notice(&lang.barred(barred)), true);
                if let Err(err) = component.create_response(ctx, refusal).await {
                    log_discord_error(&err, "refusing a source button");
                }
            }
            return;
        }
    };
    if let Err(wait) = data.queue.check_source_rate(user) {
        let refusal =
            builders::message_response(&Message::notice(&lang.sources_rate_limited(wait.as_secs().max(1))), true);
        if let Err(err) = component.create_response(ctx, refusal).await {
            log_discord_error(&err, "refusing a source button");
        }
        return;
    }
    let audience = desk.access.audience(user, location);
    if let Err(err) = component.create_response(ctx, builders::deferred_response(true)).await {
        log_discord_error(&err, "deferring a source button");
        return;
    }
    for message in source_messages_for(data, &desk, label, audience, lang).await {
        if let Err(err) = component.create_followup(ctx, message.to_followup(true)).await {
            log_discord_error(&err, "showing a source");
            return;
        }
    }
}
