//! 👍/👎 under every answer, and the DM's report (`/oraculo_informe`).
//!
//! The answer's final message carries two buttons whose ids name the kept question
//! (`feedback`); a click comes back as an interaction naming the user, so one verdict per
//! player per answer is stored, and a second click replaces it. A 👎 asks, ephemerally and
//! optionally, what was wrong (three buttons). Nothing is posted in the channel: every response
//! is ephemeral, with no mentions.

use poise::serenity_prelude as serenity;
use tracing::Instrument;

use super::access::{Barred, interaction_place, refuse_barred};
use super::builders::no_mentions;
use super::errors::log_discord_error;
use super::layout::{self, Message};
use super::locale::Lang;
use super::verdict::Press;
use super::{Data, Desk};
use crate::feedback::{Judged, Reason, Report, Verdict};

/// Puts the 👍/👎 buttons of kept question `id` under the answer's last message.
pub fn add_verdict_buttons(messages: &mut [Message], id: i64) {
    if let Some(last) = messages.last_mut() {
        last.verdict = Some(id);
    }
}

/// The three reasons of a 👎 on kept question `id`.
fn reason_row(id: i64, lang: Lang) -> serenity::CreateActionRow {
    let buttons = Reason::ALL
        .into_iter()
        .map(|reason| {
            serenity::CreateButton::new(Press::Reason(id, reason).custom_id())
                .label(layout::clip(&lang.reason_label(reason), layout::BUTTON_LABEL_LIMIT))
                .style(serenity::ButtonStyle::Secondary)
        })
        .collect();
    serenity::CreateActionRow::Buttons(buttons)
}

/// A 👍, a 👎 or a reason: stored for the user who clicked, answered to them alone. `false`
/// when the button is not a feedback button (a source button).
pub async fn feedback_button(ctx: &serenity::Context, data: &Data, component: &serenity::ComponentInteraction) -> bool {
    let Some(press) = Press::of(&component.data.custom_id) else {
        return false;
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
                respond(ctx, component, ephemeral(&lang.barred(barred), None)).await;
            }
            return true;
        }
    };
    let (id, verdict, reason) = match press {
        Press::Verdict(id, verdict) => (id, verdict, None),
        Press::Reason(id, reason) => (id, Verdict::Down, Some(reason)),
    };
    let span = tracing::info_span!("discord.verdict", campaign = %desk.name, id);
    let response = match judge(&desk, id, user, verdict, reason).instrument(span).await {
        Some(Judged::Unknown) => ephemeral(&lang.verdict_too_old(), None),
        Some(judged) => {
            tracing::info!(id, ?verdict, ?reason, ?judged, "verdict stored");
            match press {
                Press::Verdict(_, Verdict::Down) => ephemeral(&lang.what_was_wrong(), Some(reason_row(id, lang))),
                Press::Verdict(_, Verdict::Up) => ephemeral(&lang.verdict_noted(), None),
                // The reasons' message is replaced by the thanks: one choice, then done.
                Press::Reason(..) => serenity::CreateInteractionResponse::UpdateMessage(
                    serenity::CreateInteractionResponseMessage::new()
                        .content(lang.verdict_noted())
                        .components(Vec::new())
                        .allowed_mentions(no_mentions()),
                ),
            }
        }
        None => ephemeral(&lang.unexpected(), None),
    };
    respond(ctx, component, response).await;
    true
}

/// Stores the verdict; `None` when it could not be (logged).
async fn judge(desk: &Desk, id: i64, user: u64, verdict: Verdict, reason: Option<Reason>) -> Option<Judged> {
    match desk.asked.judge(id, user, verdict, reason).await {
        Ok(judged) => Some(judged),
        Err(err) => {
            tracing::error!(error = format!("{err:#}"), id, "a verdict could not be stored");
            None
        }
    }
}

/// An ephemeral message (with `row` under it), no mentions.
fn ephemeral(text: &str, row: Option<serenity::CreateActionRow>) -> serenity::CreateInteractionResponse {
    let message = serenity::CreateInteractionResponseMessage::new()
        .content(layout::clip(text, layout::CONTENT_LIMIT))
        .ephemeral(true)
        .components(row.into_iter().collect())
        .allowed_mentions(no_mentions());
    serenity::CreateInteractionResponse::Message(message)
}

async fn respond(
    ctx: &serenity::Context,
    component: &serenity::ComponentInteraction,
    response: serenity::CreateInteractionResponse,
) {
    if let Err(err) = component.create_response(ctx, response).await {
        log_discord_error(&err, "answering a feedback button");
    }
}

/// The report as messages within Discord's limits: the unanswered questions by what they
/// name, the answers marked wrong with their labels, the weeks.
pub fn report_messages(report: &Report, lang: Lang) -> Vec<Message> {
    if report.n_questions == 0 {
        return vec![Message::notice(&lang.report_empty())];
    }
    let mut text = lang.report_heading(report.n_questions, report.n_unanswered, report.audience == "gm");
    text.push('\n');
    if !report.unanswered.is_empty() {
        text.push_str(&format!("\n{}\n", lang.report_unanswered()));
    }
    for group in &report.unanswered {
        let named = match group.kind {
            crate::feedback::NamedKind::Entity => group.named.clone(),
            crate::feedback::NamedKind::Session => lang.report_session(&group.named),
            crate::feedback::NamedKind::Nothing => lang.report_nothing_named(),
        };
        text.push_str(&format!("- **{named}** ({}×)\n", group.asked));
        for question in &group.questions {
            text.push_str(&format!("  - {}× {}\n", question.asked, question.question));
        }
    }
    if !report.marked_wrong.is_empty() {
        text.push_str(&format!("\n{}\n", lang.report_marked_wrong()));
    }
    for marked in &report.marked_wrong {
        let cited: Vec<&str> = marked.cited.iter().map(|label| label.as_str()).collect();
        text.push_str(&format!("- 👎 {} · {} · [{}]\n", marked.down, marked.question, cited.join(", ")));
    }
    if !report.weeks.is_empty() {
        text.push_str(&format!("\n{}\n", lang.report_weeks()));
    }
    for week in &report.weeks {
        text.push_str(&format!(
            "- {}: {} · {} · {} · {}\n",
            week.week, week.asked, week.unanswered, week.up, week.down
        ));
    }
    layout::split_text(&text, layout::CONTENT_LIMIT).iter().map(|piece| Message::notice(piece)).collect()
}
