//! Questions survive a restart. Each question the bot takes is written to its campaign's
//! store before it is acknowledged (the slash command's deferral, the typing indicator of a
//! mention), with where its answer goes ([`Delivery`]), and removed once its answer (or why
//! there is none) is posted. A kill -9, an OOM or a crash leaves the questions in flight
//! there; the next start, once connected, answers them: through the interaction while its
//! token lives (the deferred response is edited as if nothing happened), else in its channel.
//!
//! Who may read what is decided again under the configuration the bot restarts with (a
//! channel that stopped being a GM channel answers for players); a question taken up by
//! [`RESUME_ATTEMPTS`] starts that all died, or asked more than [`RESUME_WITHIN`] ago, is given
//! up with a message that asks again. A graceful stop does not leave questions behind: it
//! finishes them or tells each asker.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use poise::serenity_prelude as serenity;
use tracing::Instrument;

use super::access::Location;
use super::builders;
use super::errors::log_discord_error;
use super::layout::Message;
use super::locale::Lang;
use super::place::Place;
use super::reply::{Outlet, Question, answer_question};
use super::{Data, Desk};
use crate::conversation::InFlight;

/// Starts that may take up one question: a question whose answer brought the bot down
/// twice (an OOM on its notes, a crash) is given up rather than tried at every start.
pub const RESUME_ATTEMPTS: u32 = 2;
/// Questions older than this are given up: the table has moved on, and an answer a day late
/// in the channel would read as noise.
pub const RESUME_WITHIN: Duration = Duration::from_secs(24 * 60 * 60);

/// Where a question's answer goes, as written beside it. The interaction's token (a slash
/// command's, valid 15 minutes) is kept so the next start can edit the deferred response.
#[derive(Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Delivery {
    pub user: u64,
    pub location: Location,
    pub place: Place,
    pub lang: Lang,
    /// A slash command: its interaction's id and token.
    pub interaction: Option<(u64, String)>,
    /// A mention, a reply or a thread follow-up: the message that asked.
    pub asking_message: Option<u64>,
}

impl std::fmt::Debug for Delivery {
    /// Never the interaction's token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("user", &self.user)
            .field("location", &self.location)
            .field("place", &self.place)
            .field("interaction", &self.interaction.as_ref().map(|(id, _)| id))
            .field("asking_message", &self.asking_message)
            .finish_non_exhaustive()
    }
}

/// Writes `question`, to be answered at `delivery`, to `desk`'s store; its id, to pass to
/// [`answer_question`]. Called before the question is acknowledged.
pub async fn remember(desk: &Desk, question: &str, delivery: &Delivery) -> Option<i64> {
    let record = match serde_json::to_string(delivery) {
        Ok(record) => record,
        Err(err) => {
            tracing::warn!(error = %err, "a question's delivery could not be written: not kept across a restart");
            return None;
        }
    };
    desk.history.remember_question(delivery.place, question, record).await
}

/// Answers the questions a previous run left in flight, every campaign's at once (they wait
/// in the queue like any other, oldest first). Once per process: a reconnection does not
/// take them up again.
pub async fn resume_questions(ctx: &serenity::Context, data: &Data) {
    if data.resumed.swap(true, Ordering::SeqCst) {
        return;
    }
    let mut left = Vec::new();
    for desk in &data.desks {
        for in_flight in desk.history.take_up_questions().await {
            left.push((Arc::clone(desk), in_flight));
        }
    }
    if left.is_empty() {
        return;
    }
    tracing::info!(questions = left.len(), "answering the questions a restart interrupted");
    futures::future::join_all(left.into_iter().map(|(desk, in_flight)| resume_one(ctx, data, desk, in_flight))).await;
}

async fn resume_one(ctx: &serenity::Context, data: &Data, recorded_in: Arc<Desk>, in_flight: InFlight) {
    let delivery = match serde_json::from_str::<Delivery>(&in_flight.delivery) {
        Ok(delivery) => delivery,
        Err(err) => {
            tracing::warn!(error = %err, id = in_flight.id, "a question in flight has an unreadable delivery: dropped");
            recorded_in.history.forget_question(in_flight.id).await;
            return;
        }
    };
    let channel = serenity::ChannelId::new(delivery.channel());
    let asked_at = UNIX_EPOCH + Duration::from_secs(u64::try_from(in_flight.asked_at).unwrap_or(0));
    let age = SystemTime::now().duration_since(asked_at).unwrap_or_default();
    if in_flight.attempts > RESUME_ATTEMPTS || age > RESUME_WITHIN {
        tracing::warn!(
            id = in_flight.id,
            attempts = in_flight.attempts,
            age_s = age.as_secs(),
            "a question in flight is given up; its asker is told to ask again"
        );
        let text = delivery.lang.resume_given_up(delivery.user, &in_flight.question);
        let reference =
            delivery.asking_message.map(|asking| builders::reply_reference(channel, serenity::MessageId::new(asking)));
        if let Err(err) = channel.send_message(&ctx.http, Message::notice(&text).to_create_message(reference)).await {
            log_discord_error(&err, "telling an asker their question was given up");
        }
        recorded_in.history.forget_question(in_flight.id).await;
        return;
    }
    // Who reads what is decided again, under today's configuration.
    let desk = match data.desk(delivery.user, delivery.location) {
        Ok(desk) if desk.name == recorded_in.name => desk,
        routed => {
            tracing::warn!(id = in_flight.id, barred = ?routed.err(), "a question in flight is no longer answered there: dropped");
            recorded_in.history.forget_question(in_flight.id).await;
            return;
        }
    };
    let audience = desk.access.audience(delivery.user, delivery.location);
    let outlet = Outlet::Resumed {
        http: &ctx.http,
        channel,
        interaction: delivery.interaction.as_ref().map(|(id, token)| (*id, token.as_str())),
        reply_to: delivery.asking_message.map(serenity::MessageId::new),
        preface: delivery.lang.resumed_answer(delivery.user, &in_flight.question),
        original_used: AtomicBool::new(false),
    };
    let span = tracing::info_span!("discord.resume", campaign = %desk.name, place = %delivery.place.key(), ?audience, attempts = in_flight.attempts);
    let question = Question {
        text: &in_flight.question,
        asker: delivery.user,
        place: delivery.place,
        audience,
        lang: delivery.lang,
        in_flight: Some(in_flight.id),
    };
    answer_question(data, &desk, &outlet, question).instrument(span).await;
}

impl Delivery {
    /// The channel (or thread, or DM channel) the answer is posted in.
    fn channel(&self) -> u64 {
        self.location.channel
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discord::access::Surface;

    #[test]
    fn a_delivery_round_trips_and_never_prints_its_token() {
        let delivery = Delivery {
            user: 7,
            location: Location { surface: Surface::Guild, guild: Some(1), channel: 2, parent: None },
            place: Place::Channel(2),
            lang: Lang::Es,
            interaction: Some((1_300_000_000_000_000_000, "aW50ZXJhY3Rpb24tdG9rZW4".into())),
            asking_message: None,
        };
        let written = serde_json::to_string(&delivery).unwrap();
        assert_eq!(serde_json::from_str::<Delivery>(&written).unwrap(), delivery);
        assert!(!format!("{delivery:?}").contains("aW50ZXJhY3Rpb24tdG9rZW4"), "{delivery:?}");
    }
}
