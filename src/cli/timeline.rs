//! `oraculo timeline` and `oraculo recap`: an entity's sessions in story order, and a cited recap
//! of one session.

use super::ask::{print_sources, render_footer};
use super::{RecapArgs, TimelineArgs, open_oracle};
use crate::retrieve::Audience;

pub(super) async fn timeline(args: &TimelineArgs) -> anyhow::Result<()> {
    let config = args.campaign.load_config()?;
    let oracle = open_oracle(&config).await?;
    let audience = if args.gm { Audience::Gm } else { Audience::Player };
    let timeline = crate::timeline::timeline(&oracle, &args.name, audience).await?;
    if args.campaign.json {
        println!("{}", serde_json::to_string(&timeline)?);
        return Ok(());
    }
    print!("{}", render_timeline(&timeline));
    Ok(())
}

/// The timeline as text: one line per session, first and last appearance marked.
fn render_timeline(timeline: &crate::timeline::Timeline) -> String {
    let aliases =
        if timeline.aliases.is_empty() { String::new() } else { format!(" ({})", timeline.aliases.join(", ")) };
    let mut out = format!("{} [{}]{}\n", timeline.entity, timeline.kind, aliases);
    if timeline.entries.is_empty() {
        out.push_str("  appears in no session\n");
    }
    for entry in &timeline.entries {
        let mark = match (entry.first, entry.last) {
            (true, true) => "  (first and last appearance)",
            (true, false) => "  (first appearance)",
            (false, true) => "  (last appearance)",
            _ => "",
        };
        out.push_str(&format!("  {:>4}  {} [{}]{mark}\n", entry.session.to_string(), entry.line, entry.label));
    }
    if !timeline.other_labels.is_empty() {
        out.push_str(&format!("  also in: {}\n", timeline.other_labels.join("; ")));
    }
    out
}

pub(super) async fn recap(args: &RecapArgs) -> anyhow::Result<()> {
    let config = args.campaign.load_config()?;
    let mut oracle = open_oracle(&config).await?;
    if args.extractive {
        oracle.set_mode(crate::answer::AnswerMode::Extractive);
    }
    let audience = if args.gm { Audience::Gm } else { Audience::Player };
    let language = args.lang.unwrap_or(config.campaign.corpus.label_language);
    if args.campaign.json {
        let recap = crate::timeline::recap(&oracle, args.session, audience, language, None).await?;
        println!("{}", serde_json::to_string(&recap)?);
        return Ok(());
    }
    // The warnings wait under the recap instead of cutting into it.
    let _held_logs = crate::logging::hold_on_terminal();
    let echo = super::Echo::default();
    let sink = |token: &str| echo.print(token);
    let recap = crate::timeline::recap(&oracle, args.session, audience, language, Some(&sink)).await?;
    let streamed = echo.into_printed();
    if streamed.trim() != recap.answer.text.trim() {
        if !streamed.trim().is_empty() {
            println!("\n");
        }
        println!("{}", recap.answer.text);
    } else {
        println!();
    }
    print_sources(&recap.answer);
    println!("\n{}", render_footer(&recap.answer));
    Ok(())
}
