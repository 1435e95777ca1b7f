//! The conversation rendered as the model reads it: the GGUF's own chat template when
//! llama.cpp recognises it, else ChatML.

use llama_cpp_2::model::LlamaChatMessage;

use super::Engine;
use crate::llm::chat::{ChatMessage, ChatRole};

impl Engine {
    /// The conversation as the model was trained to read it, ending where the assistant speaks.
    pub(super) fn render(&self, messages: &[ChatMessage]) -> Result<String, String> {
        if let Some(template) = &self.template {
            let chat = messages
                .iter()
                .map(|message| LlamaChatMessage::new(role_name(message.role).into(), message.content.clone()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|err| format!("a message holds a NUL byte: {err}"))?;
            return self
                .model
                .apply_chat_template(template, &chat, true)
                .map_err(|err| format!("cannot apply the chat template: {err}"));
        }
        Ok(render_chatml(messages))
    }
}

/// The role's name in a chat template.
fn role_name(role: ChatRole) -> &'static str {
    match role {
        ChatRole::System => "system",
        ChatRole::User => "user",
        ChatRole::Assistant => "assistant",
    }
}

/// ChatML, the template Qwen and SmolLM2 were trained on.
fn render_chatml(messages: &[ChatMessage]) -> String {
    let mut prompt = String::new();
    for message in messages {
        prompt.push_str("<|im_start|>");
        prompt.push_str(role_name(message.role));
        prompt.push('\n');
        prompt.push_str(&message.content);
        prompt.push_str("<|im_end|>\n");
    }
    prompt.push_str("<|im_start|>assistant\n");
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chatml_ends_where_the_assistant_speaks() {
        let prompt = render_chatml(&[ChatMessage::system("S"), ChatMessage::user("U")]);
        assert_eq!(prompt, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
    }
}
