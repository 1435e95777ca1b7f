//! How much the model reads and writes for one answer: planned by the window a server serves,
//! or, for a model that runs on this CPU, by the time (`chat.answer_seconds`) at the speed
//! it measured here.
//!
//! On a CPU the speed decides what the answer can be. At 20 prompt tokens a second and 6
//! generated, a 90-second answer reads about a thousand tokens and writes about two hundred;
//! the full system prompt alone is 850 of the thousand. So the plan, in this order:
//! - gives the writing its expected time, at most [`WRITING_SHARE`] of the budget (fewer
//!   sentences on a slow machine, never a cut JSON);
//! - reads the brief system prompt when the full one would take more than [`FRAME_SHARE`]
//!   of the budget (a prompt the backend holds cached costs nothing and stays full);
//! - gives the material what is left, never less than [`MIN_MATERIAL_TOKENS`];
//! - stops the model at [`DEADLINE_SLACK`] times the budget, keeping what it wrote.
//!
//! [`plan_answer`] is pure and unit-tested; the `impl Oracle` below feeds it what the
//! backend reports and builds the context the plan allows.

use serde::Serialize;

use crate::answer::arc::{ARC_MAX_SESSIONS, ArcBlock, choose_arc_lines};
use crate::answer::structured::{MAX_SENTENCE_CHARS, MAX_SENTENCES};
use crate::answer::terms::QueryTerms;
use crate::answer::{AnswerMode, Context, ContextBudget, ContextFragment, build_context, narrow_to_windows};
use crate::llm::LlmError;
use crate::llm::chat::{ChatMessage, ChatModel, ContextWindow, ModelSpeed, WindowSource};
use crate::prompt::{StructuredPrompt, answer_messages, structured_answer_messages};

use super::{AnswerSettings, Oracle, Prepared};
use crate::notes::ArcStory;

/// Tokens kept free in the context window for the chat template's own markup.
const TEMPLATE_MARGIN_TOKENS: usize = 256;
/// Tokens an answer is expected to take when its time is planned: four or five cited
/// sentences. The budget (`max_tokens`) stays the hard limit.
const EXPECTED_ANSWER_TOKENS: usize = 256;
/// The most of `answer_seconds` the writing is planned to take: at 6 generated tokens a
/// second, 256 tokens are 41 s, and the reading needs the rest of a 90-second budget.
pub const WRITING_SHARE: f64 = 0.4;
/// Tokens one structured sentence takes (its JSON keys, one label and about 25 words): how
/// many sentences a planned answer may hold.
const TOKENS_PER_SENTENCE: usize = 48;
/// The fewest sentences a plan allows: an answer and its qualification.
const MIN_SENTENCES: usize = 2;
/// Characters a sentence may take under a time plan: a sentence of the notes, not a copied
/// passage (400 let a slow model copy one passage twice and fill its whole answer).
const TIMED_SENTENCE_CHARS: usize = 280;
/// The share of `answer_seconds` the unread part of the full system prompt may take before
/// the brief one is read instead (850 tokens: 21 s at 40 prompt tokens a second, 42 s at 20).
pub const FRAME_SHARE: f64 = 0.25;
/// Under a time plan, the least material an answer gets however slow the machine measured:
/// an entity's story of eight lines and the passages of two or three fragments. An answer
/// a little over its time is better than one with nothing to read; the deadline holds the rest.
pub const MIN_MATERIAL_TOKENS: usize = 480;
/// An answer planned for `answer_seconds` is stopped at this many times it (keeping the
/// sentences already written and checked): the plan's estimate may be off by a fifth.
pub const DEADLINE_SLACK: f64 = 1.2;
/// The share of the material an entity's story may take: a line for each of up to twelve
/// sessions, and the rest for the passages that tell the detail.
const ARC_SHARE: f64 = 0.5;
/// Under a time plan, the story shows this many sessions more than the answer may have
/// sentences: its first and last appearances beside the sessions the answer will tell (a
/// slow model copies the story's first lines, so the story must hold only what matters).
const ARC_SESSIONS_BEYOND_SENTENCES: usize = 2;
/// After a refusal for length, the material planned again is at most this share of what was
/// refused: the refusal proves the estimate was low, so the same material must not go again.
const REPLAN_SHRINK: f64 = 0.75;

/// How much material the model was given, what limited it (the window of a server, or the
/// time a CPU may spend reading and writing), and what the answer may take.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextPlan {
    /// `"window"` or `"time"`.
    pub limited_by: &'static str,
    /// Tokens the material could take.
    pub material_tokens: usize,
    /// The time budget and the measured speeds, when the time was the limit.
    pub answer_seconds: Option<f64>,
    pub prompt_tokens_per_s: Option<f64>,
    pub generated_tokens_per_s: Option<f64>,
    /// The wording of the structured prompt the plan reads (`full` or `brief`).
    pub prompt: StructuredPrompt,
    /// Tokens the answer may take (`max_tokens` of the request).
    pub answer_tokens: usize,
    /// Sentences and characters per sentence the structured answer's schema allows.
    pub max_sentences: usize,
    pub max_sentence_chars: usize,
    /// What the plan expects the answer to take, reading and writing, under a time plan.
    pub expected_seconds: Option<f64>,
    /// When the model is stopped, under a time plan (the configured deadline still holds).
    pub deadline_seconds: Option<f64>,
    /// Lines of the entity's story shown (an arc question), and its sessions left out.
    pub arc_lines: usize,
    /// Chosen fragments shown as their passages rather than whole.
    pub fragments_as_passages: usize,
    /// The context window the prompt was planned for, in tokens, and where that number came
    /// from (`config`, `server_props`, `server_models`, `ollama_show`, `refusal`, `default`,
    /// `loaded`).
    pub window_tokens: usize,
    pub window_source: WindowSource,
    /// Times the context was planned again because the server refused the prompt as longer
    /// than its window (0 or 1).
    pub window_retries: usize,
}

impl ContextPlan {
    /// Seconds the planned answer is expected to take to write, under a time plan.
    pub fn writing_seconds(&self) -> Option<f64> {
        let speed = self.generated_tokens_per_s?;
        Some((self.max_sentences * TOKENS_PER_SENTENCE).min(EXPECTED_ANSWER_TOKENS) as f64 / speed)
    }
}

/// The answer prompt without its material: its tokens, and those the backend holds cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameCost {
    pub tokens: usize,
    pub cached: usize,
}

impl FrameCost {
    fn to_read(self) -> usize {
        self.tokens.saturating_sub(self.cached)
    }
}

/// What a plan is made from.
#[derive(Debug, Clone, Copy)]
pub struct PlanInputs {
    pub window: ContextWindow,
    /// The full prompt's frame, and the brief one's when the answer is structured.
    pub full_frame: FrameCost,
    pub brief_frame: Option<FrameCost>,
    /// The backend's speeds on this machine; `None` for a server (the window is the limit).
    pub speed: Option<ModelSpeed>,
    pub answer_seconds: f64,
    pub max_tokens: usize,
}

/// The plan for one answer (see the module's introduction).
pub fn plan_answer(inputs: &PlanInputs) -> ContextPlan {
    let window_material = |frame: FrameCost| {
        inputs.window.tokens.saturating_sub(frame.tokens + inputs.max_tokens + TEMPLATE_MARGIN_TOKENS)
    };
    let window_plan = ContextPlan {
        limited_by: "window",
        material_tokens: window_material(inputs.full_frame),
        answer_seconds: None,
        prompt_tokens_per_s: None,
        generated_tokens_per_s: None,
        prompt: StructuredPrompt::Full,
        answer_tokens: inputs.max_tokens,
        max_sentences: MAX_SENTENCES,
        max_sentence_chars: MAX_SENTENCE_CHARS,
        expected_seconds: None,
        deadline_seconds: None,
        arc_lines: 0,
        fragments_as_passages: 0,
        window_tokens: inputs.window.tokens,
        window_source: inputs.window.source,
        window_retries: 0,
    };
    let Some(speed) = inputs.speed.filter(ModelSpeed::is_plausible) else { return window_plan };
    let budget = inputs.answer_seconds;
    let expected_tokens = EXPECTED_ANSWER_TOKENS.min(inputs.max_tokens);
    let writing_seconds = (expected_tokens as f64 / speed.generated_tokens_per_s).min(budget * WRITING_SHARE);
    let writing_tokens = (writing_seconds * speed.generated_tokens_per_s) as usize;
    let max_sentences = (writing_tokens / TOKENS_PER_SENTENCE).clamp(MIN_SENTENCES, MAX_SENTENCES);
    let (prompt, frame) = match inputs.brief_frame {
        Some(brief) if inputs.full_frame.to_read() as f64 / speed.prompt_tokens_per_s > budget * FRAME_SHARE => {
            (StructuredPrompt::Brief, brief)
        }
        _ => (StructuredPrompt::Full, inputs.full_frame),
    };
    let readable = ((budget - writing_seconds) * speed.prompt_tokens_per_s) as usize;
    let time_material = readable.saturating_sub(frame.to_read()).max(MIN_MATERIAL_TOKENS);
    let window_material = window_material(frame);
    let material_tokens = time_material.min(window_material);
    let expected_seconds = (frame.to_read() + material_tokens) as f64 / speed.prompt_tokens_per_s + writing_seconds;
    ContextPlan {
        limited_by: if time_material < window_material { "time" } else { "window" },
        material_tokens,
        answer_seconds: Some(budget),
        prompt_tokens_per_s: Some(speed.prompt_tokens_per_s),
        generated_tokens_per_s: Some(speed.generated_tokens_per_s),
        prompt,
        max_sentences,
        max_sentence_chars: TIMED_SENTENCE_CHARS,
        expected_seconds: Some(expected_seconds),
        deadline_seconds: Some(budget * DEADLINE_SLACK),
        ..window_plan
    }
}

/// What a plan shows of the chosen fragments: them whole, or their windows best first (each
/// a fragment and the words of one of its windows); and the pool's leftovers, for summaries.
#[derive(Clone, Copy)]
pub(super) struct ChosenMaterial<'a> {
    pub fragments: &'a [ContextFragment],
    pub windows: &'a [(crate::corpus::FragmentId, std::ops::Range<usize>)],
    pub leftovers: &'a [ContextFragment],
}

/// What plans an answer's context: the backend's window, speed and tokeniser, the answer's
/// settings and the mode it is written in.
pub(super) struct Planner<'a> {
    chat: &'a dyn ChatModel,
    settings: &'a AnswerSettings,
    mode: AnswerMode,
}

impl Oracle {
    /// The planner of this oracle's answers.
    pub(super) fn planner(&self) -> Planner<'_> {
        Planner { chat: self.chat.as_ref(), settings: &self.settings, mode: self.settings.mode_for(self.chat.as_ref()) }
    }
}

impl Planner<'_> {
    /// The answer prompt without material, in `prompt`'s wording: what every plan is made beside.
    pub(super) fn answer_frame(
        &self,
        question: &str,
        history: &[ChatMessage],
        prompt: StructuredPrompt,
    ) -> Vec<ChatMessage> {
        let empty = build_context(None, &[], &[], ContextBudget { max_tokens: usize::MAX, count_tokens: &|_: &str| 0 });
        match self.mode {
            AnswerMode::Structured => structured_answer_messages(question, history, &empty, prompt),
            _ => answer_messages(question, history, &empty),
        }
    }

    fn frame_cost(&self, frame: &[ChatMessage]) -> FrameCost {
        FrameCost {
            tokens: frame.iter().map(|message| self.chat.count_tokens(&message.content)).sum(),
            cached: self.chat.cached_prefix_tokens(frame),
        }
    }

    /// The plan for an answer to `question` after `history`, in the window the backend
    /// reports (see [`plan_answer`]). An extractive answer reads nothing and is planned by
    /// the window alone.
    pub(super) async fn plan_context(
        &self,
        question: &str,
        history: &[ChatMessage],
        window: ContextWindow,
    ) -> ContextPlan {
        let mode = self.mode;
        let full_frame = self.frame_cost(&self.answer_frame(question, history, StructuredPrompt::Full));
        let brief_frame = (mode == AnswerMode::Structured)
            .then(|| self.frame_cost(&self.answer_frame(question, history, StructuredPrompt::Brief)));
        let speed = if mode == AnswerMode::Extractive { None } else { self.chat.speed().await };
        plan_answer(&PlanInputs {
            window,
            full_frame,
            brief_frame,
            speed,
            answer_seconds: self.settings.answer_seconds,
            max_tokens: self.settings.max_tokens,
        })
    }

    /// The context `plan` allows: the entity's story first (an arc question), then the chosen
    /// fragments (as their best windows under a time plan), then the leftovers' summaries.
    pub(super) fn build_planned_context(
        &self,
        plan: &mut ContextPlan,
        story: Option<&ArcStory>,
        chosen: ChosenMaterial<'_>,
        terms: &QueryTerms,
    ) -> Context {
        let count_tokens = |text: &str| self.chat.count_tokens(text);
        let arc = story.map(|story| {
            // An extractive answer reads no material: the story is its answer, whole.
            let arc_budget = match self.mode {
                AnswerMode::Extractive => usize::MAX,
                _ => (plan.material_tokens as f64 * ARC_SHARE) as usize,
            };
            // A slow machine's answer tells a few sessions: its story shows those that
            // matter most (and where it starts and ends), not every mention.
            let max_sessions = match plan.limited_by {
                "time" => plan.max_sentences + ARC_SESSIONS_BEYOND_SENTENCES,
                _ => ARC_MAX_SESSIONS,
            };
            let (lines, sessions_left_out) =
                choose_arc_lines(&story.sentences, &story.scores, max_sessions, arc_budget, &count_tokens);
            ArcBlock { entity: story.entity.clone(), aliases: story.aliases.clone(), lines, sessions_left_out }
        });
        plan.arc_lines = arc.as_ref().map_or(0, |arc| arc.lines.len());
        let arc_tokens = arc
            .as_ref()
            .filter(|arc| !arc.lines.is_empty())
            .map_or(0, |arc| count_tokens(&crate::answer::context::render_arc_block(arc)));
        let budget = ContextBudget { max_tokens: plan.material_tokens, count_tokens: &count_tokens };
        if plan.limited_by != "time" {
            return build_context(arc.as_ref(), chosen.fragments, chosen.leftovers, budget);
        }
        let narrowed = narrow_to_windows(
            chosen.fragments,
            chosen.windows,
            terms,
            plan.material_tokens.saturating_sub(arc_tokens),
            &count_tokens,
        );
        plan.fragments_as_passages = narrowed.narrowed;
        // A chosen fragment no window of which fits is summarised before the pool's leftovers.
        let leftovers: Vec<ContextFragment> = narrowed.left.iter().chain(chosen.leftovers).cloned().collect();
        let mut context = build_context(arc.as_ref(), &narrowed.shown, &leftovers, budget);
        context.dropped_for_budget += narrowed.left.len();
        context
    }

    /// After the backend refused `prepared`'s prompt as too long: the window learnt again
    /// and a context planned for it, at most [`REPLAN_SHRINK`] of the material refused (less
    /// when the server counted more prompt tokens than estimated). `None` when nothing
    /// smaller can be planned.
    pub(super) async fn replan(&self, prepared: &Prepared, refusal: &LlmError) -> Option<Prepared> {
        let window = self.chat.refresh_window(refusal).await;
        let mut plan = self.plan_context(&prepared.question, &prepared.history, window).await;
        let material_sent = self.chat.count_tokens(&prepared.context.text);
        let frame_tokens: usize = self
            .answer_frame(&prepared.question, &prepared.history, plan.prompt)
            .iter()
            .map(|message| self.chat.count_tokens(&message.content))
            .sum();
        let mut material = plan.material_tokens.min((material_sent as f64 * REPLAN_SHRINK) as usize);
        // The server's own count of the refused prompt, when it gave one, above the estimate:
        // its tokeniser makes more tokens of this text than estimated, so plan that much less.
        if let LlmError::ContextExceeded { prompt_tokens: Some(counted), .. } = refusal {
            let estimated = frame_tokens + material_sent;
            if *counted > estimated && estimated > 0 {
                material = (material as f64 * estimated as f64 / *counted as f64) as usize;
            }
        }
        if material == 0 || prepared.context.text.is_empty() {
            return None;
        }
        plan.material_tokens = material;
        plan.window_retries = prepared.plan.window_retries + 1;
        let chosen = ChosenMaterial {
            fragments: &prepared.chosen_context,
            windows: &prepared.windows,
            leftovers: &prepared.leftovers,
        };
        let context = self.build_planned_context(&mut plan, prepared.story.as_ref(), chosen, &prepared.terms);
        tracing::warn!(
            window_tokens = window.tokens,
            window_source = ?window.source,
            material_before = material_sent,
            material_after = material,
            "the prompt was refused as too long; context planned again"
        );
        Some(Prepared { context, plan, ..prepared.clone() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: ContextWindow = ContextWindow { tokens: 8192, source: WindowSource::Loaded };
    /// The full prompt's frame and the brief one's, as the 1.5B's tokeniser counts them.
    const FULL: FrameCost = FrameCost { tokens: 880, cached: 0 };
    const BRIEF: FrameCost = FrameCost { tokens: 400, cached: 0 };

    fn inputs(prompt_tokens_per_s: f64, generated_tokens_per_s: f64) -> PlanInputs {
        PlanInputs {
            window: WINDOW,
            full_frame: FULL,
            brief_frame: Some(BRIEF),
            speed: Some(ModelSpeed { prompt_tokens_per_s, generated_tokens_per_s }),
            answer_seconds: 90.0,
            max_tokens: 512,
        }
    }

    /// The seconds the plan's prompt and answer take at its speed, from its own fields.
    fn planned_seconds(plan: &ContextPlan, frame: FrameCost) -> f64 {
        let (Some(prompt), Some(writing)) = (plan.prompt_tokens_per_s, plan.writing_seconds()) else {
            panic!("not a time plan: {plan:?}")
        };
        (frame.to_read() + plan.material_tokens) as f64 / prompt + writing
    }

    #[test]
    fn a_slow_machine_reads_the_brief_prompt_writes_less_and_stays_within_its_time() {
        // The slow machine of a fresh install: 20 prompt and 6.2 generated tokens a second.
        let plan = plan_answer(&inputs(20.0, 6.2));
        assert_eq!(plan.limited_by, "time");
        assert_eq!(plan.prompt, StructuredPrompt::Brief, "the full prompt alone would take 44 of 90 s");
        assert!(plan.material_tokens >= MIN_MATERIAL_TOKENS, "{plan:?}");
        assert!(plan.max_sentences >= MIN_SENTENCES && plan.max_sentences <= 4, "{plan:?}");
        assert_eq!(plan.max_sentence_chars, TIMED_SENTENCE_CHARS);
        let expected = plan.expected_seconds.expect("a time plan expects its seconds");
        assert!(expected <= 90.0 + 1e-9, "{expected} s planned for a 90 s budget");
        assert!(planned_seconds(&plan, BRIEF) <= 90.0 * DEADLINE_SLACK, "{plan:?}");
        assert_eq!(plan.deadline_seconds, Some(90.0 * DEADLINE_SLACK));

        // Twice as fast: the full prompt fits its share, the answer may be longer, the
        // material grows.
        let faster = plan_answer(&inputs(40.0, 12.4));
        assert_eq!(faster.prompt, StructuredPrompt::Full);
        assert!(faster.max_sentences > plan.max_sentences, "{faster:?}");
        assert!(faster.material_tokens > plan.material_tokens, "{faster:?}");
        assert!(faster.expected_seconds.is_some_and(|seconds| seconds <= 90.0 + 1e-9), "{faster:?}");

        // Four times as fast: more again; eight times: the window is the limit, not the time.
        let fast = plan_answer(&inputs(80.0, 24.8));
        assert!(fast.material_tokens > faster.material_tokens, "{fast:?}");
        let fastest = plan_answer(&inputs(160.0, 50.0));
        assert_eq!(fastest.material_tokens, 8192 - 880 - 512 - TEMPLATE_MARGIN_TOKENS, "{fastest:?}");
        assert_eq!(fastest.limited_by, "window");
    }

    #[test]
    fn a_cached_full_prompt_costs_nothing_and_stays() {
        let mut cached = inputs(20.0, 6.2);
        cached.full_frame = FrameCost { tokens: 880, cached: 860 };
        let plan = plan_answer(&cached);
        assert_eq!(plan.prompt, StructuredPrompt::Full, "the backend holds it: nothing to read");
        let uncached = plan_answer(&inputs(20.0, 6.2));
        assert!(plan.material_tokens > uncached.material_tokens, "{plan:?}");
    }

    #[test]
    fn the_writing_takes_its_expected_time_up_to_its_share_of_the_budget() {
        for (prompt, generated) in [(10.0, 3.0), (20.0, 6.2), (40.0, 12.4), (80.0, 24.8), (300.0, 90.0)] {
            let plan = plan_answer(&inputs(prompt, generated));
            let writing = (plan.max_sentences * TOKENS_PER_SENTENCE) as f64 / generated;
            assert!(
                plan.max_sentences == MIN_SENTENCES || writing <= 90.0 * WRITING_SHARE + 1e-9,
                "{prompt}/{generated}: {plan:?}"
            );
            assert!(plan.material_tokens >= MIN_MATERIAL_TOKENS.min(plan.window_tokens), "{plan:?}");
        }
        // Even the slowest gets its floor of material, and a deadline.
        let slowest = plan_answer(&inputs(5.0, 1.5));
        assert_eq!(slowest.material_tokens, MIN_MATERIAL_TOKENS);
        assert_eq!(slowest.max_sentences, MIN_SENTENCES);
        assert!(slowest.deadline_seconds.is_some());
    }

    #[test]
    fn a_server_is_planned_by_its_window_with_the_full_prompt() {
        let mut server = inputs(20.0, 6.2);
        server.speed = None;
        let plan = plan_answer(&server);
        assert_eq!(plan.limited_by, "window");
        assert_eq!(plan.prompt, StructuredPrompt::Full);
        assert_eq!(plan.material_tokens, 8192 - 880 - 512 - TEMPLATE_MARGIN_TOKENS);
        assert_eq!((plan.max_sentences, plan.max_sentence_chars), (MAX_SENTENCES, MAX_SENTENCE_CHARS));
        assert_eq!(plan.deadline_seconds, None);
        // An implausible stored speed is no speed.
        server.speed = Some(ModelSpeed { prompt_tokens_per_s: f64::NAN, generated_tokens_per_s: 1.0 });
        assert_eq!(plan_answer(&server).limited_by, "window");
    }
}
