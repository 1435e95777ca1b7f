//! A [`Message`] as serenity's builders, and what the bot reads back from Discord's messages.
//! Every builder carries [`no_mentions`]: a note or a question with `@everyone` or `<@&id>`
//! pings nobody.

use poise::serenity_prelude as serenity;

use super::layout::{
    ANSWER_COLOUR, BUTTON_LABEL_LIMIT, BUTTONS_PER_ROW, Message, ROWS_PER_MESSAGE, clip, source_button_id,
};

/// Allowed mentions with nothing allowed: no users, roles or @everyone, no reply ping.
pub fn no_mentions() -> serenity::CreateAllowedMentions {
    serenity::CreateAllowedMentions::new().replied_user(false)
}

impl Message {
    fn serenity_embeds(&self) -> Vec<serenity::CreateEmbed> {
        self.embeds
            .iter()
            .map(|embed| {
                let mut builder = serenity::CreateEmbed::new().colour(embed.colour);
                if let Some(title) = &embed.title {
                    builder = builder.title(title);
                }
                if let Some(description) = &embed.description {
                    builder = builder.description(description);
                }
                for field in &embed.fields {
                    builder = builder.field(&field.name, &field.value, false);
                }
                if let Some(footer) = &embed.footer {
                    builder = builder.footer(serenity::CreateEmbedFooter::new(footer));
                }
                builder
            })
            .collect()
    }

    fn components(&self) -> Vec<serenity::CreateActionRow> {
        // The 👍/👎 row takes one of the message's rows from the sources' buttons.
        let source_rows = ROWS_PER_MESSAGE - usize::from(self.verdict.is_some());
        let buttons: Vec<serenity::CreateButton> = self
            .source_buttons
            .iter()
            .filter_map(|label| {
                let id = source_button_id(label)?;
                let text = clip(&format!("📖 {label}"), BUTTON_LABEL_LIMIT);
                Some(serenity::CreateButton::new(id).label(text).style(serenity::ButtonStyle::Secondary))
            })
            .take(BUTTONS_PER_ROW * source_rows)
            .collect();
        let mut rows: Vec<serenity::CreateActionRow> =
            buttons.chunks(BUTTONS_PER_ROW).map(|row| serenity::CreateActionRow::Buttons(row.to_vec())).collect();
        if let Some(id) = self.verdict {
            rows.push(super::verdict::verdict_row(id));
        }
        rows
    }

    /// For poise's `send` and `ReplyHandle::edit` (an edit replaces content, embeds and buttons).
    pub fn to_reply(&self, ephemeral: bool) -> poise::CreateReply {
        let mut reply = poise::CreateReply::default()
            .content(self.content.clone())
            .ephemeral(ephemeral)
            .allowed_mentions(no_mentions())
            .components(self.components());
        reply.embeds = self.serenity_embeds();
        reply
    }

    /// An interaction follow-up outside a poise command (a button's answer).
    pub fn to_followup(&self, ephemeral: bool) -> serenity::CreateInteractionResponseFollowup {
        let mut builder = serenity::CreateInteractionResponseFollowup::new()
            .embeds(self.serenity_embeds())
            .components(self.components())
            .ephemeral(ephemeral)
            .allowed_mentions(no_mentions());
        if !self.content.is_empty() {
            builder = builder.content(self.content.clone());
        }
        builder
    }

    /// Replaces a deferred interaction response (the background reingest's report).
    pub fn to_edit_response(&self) -> serenity::EditInteractionResponse {
        serenity::EditInteractionResponse::new()
            .content(self.content.clone())
            .embeds(self.serenity_embeds())
            .components(self.components())
            .allowed_mentions(no_mentions())
    }

    /// A channel message (a thread follow-up), replying to `reply_to` without pinging.
    pub fn to_create_message(&self, reply_to: Option<serenity::MessageReference>) -> serenity::CreateMessage {
        let mut builder = serenity::CreateMessage::new()
            .embeds(self.serenity_embeds())
            .components(self.components())
            .allowed_mentions(no_mentions());
        if !self.content.is_empty() {
            builder = builder.content(self.content.clone());
        }
        if let Some(reference) = reply_to {
            builder = builder.reference_message(reference);
        }
        builder
    }

    /// Replaces a channel message (a "queued" notice becomes the answer).
    pub fn to_edit_message(&self) -> serenity::EditMessage {
        serenity::EditMessage::new()
            .content(self.content.clone())
            .embeds(self.serenity_embeds())
            .components(self.components())
            .allowed_mentions(no_mentions())
    }
}

/// Whether a message the bot posted is an answer (its text embeds carry the answer colour),
/// not a notice: only answers continue a conversation when replied to.
pub fn is_answer(message: &serenity::Message) -> bool {
    message.embeds.iter().any(|embed| embed.colour.map(|colour| colour.0) == Some(ANSWER_COLOUR))
}

/// A message's text without mentions of the bot (`<@id>`, `<@!id>`), trimmed.
pub fn without_mentions(content: &str, bot_id: u64) -> String {
    content.replace(&format!("<@{bot_id}>"), " ").replace(&format!("<@!{bot_id}>"), " ").trim().to_string()
}

/// A reply to `message` that still goes out, as an ordinary message, when the question was
/// deleted meanwhile (Discord's default fails the whole send, and the answer is lost).
pub fn reply_reference(channel: serenity::ChannelId, message: serenity::MessageId) -> serenity::MessageReference {
    let mut reference = serenity::MessageReference::from((channel, message));
    reference.fail_if_not_exists = Some(false);
    reference
}

/// The deferred "thinking…" response, with mentions off like every other message.
pub fn deferred_response(ephemeral: bool) -> serenity::CreateInteractionResponse {
    serenity::CreateInteractionResponse::Defer(
        serenity::CreateInteractionResponseMessage::new().ephemeral(ephemeral).allowed_mentions(no_mentions()),
    )
}

/// An immediate response (an ephemeral refusal, a button's source).
pub fn message_response(message: &Message, ephemeral: bool) -> serenity::CreateInteractionResponse {
    let mut builder = serenity::CreateInteractionResponseMessage::new()
        .embeds(message.serenity_embeds())
        .components(message.components())
        .ephemeral(ephemeral)
        .allowed_mentions(no_mentions());
    if !message.content.is_empty() {
        builder = builder.content(message.content.clone());
    }
    serenity::CreateInteractionResponse::Message(builder)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discord::layout::Embed;

    #[test]
    fn every_builder_suppresses_mentions() {
        // Pings in the text, in an embed and in a source's label.
        let message = &Message {
            content: "@everyone ¡el dragón! <@&123>".into(),
            embeds: vec![Embed { description: Some("@everyone al puerto <@&123> <@456>".into()), ..Embed::default() }],
            source_buttons: vec!["Sesión 1 @everyone".into()],
            verdict: None,
        };
        let empty = serde_json::json!({ "parse": [], "users": [], "roles": [], "replied_user": false });
        let bodies = [
            serde_json::to_value(message.to_followup(false)).unwrap(),
            serde_json::to_value(message.to_edit_response()).unwrap(),
            serde_json::to_value(message.to_create_message(None)).unwrap(),
            serde_json::to_value(message.to_edit_message()).unwrap(),
            serde_json::to_value(message.to_reply(false).to_slash_followup_response(Default::default())).unwrap(),
            serde_json::to_value(message.to_reply(true).to_slash_initial_response(Default::default())).unwrap(),
            serde_json::to_value(Message::notice("@everyone").to_create_message(None)).unwrap(),
        ];
        for body in &bodies {
            assert_eq!(body["allowed_mentions"], empty, "{body}");
        }
        for response in [deferred_response(false), message_response(message, true)] {
            let body = serde_json::to_value(&response).unwrap();
            assert_eq!(body["data"]["allowed_mentions"], empty, "{body}");
        }
        assert!(bodies[0].to_string().contains("@everyone"), "the text itself is kept, only the ping is off");
    }
}
