//! `oraculo sources` and `oraculo compendium`: what the index holds, as the last ingest left it;
//! `oraculo secrets`: what the notes hide from players, read from the folder as it is now.

use super::ingest::render_diagnostic;
use super::{CampaignArgs, CompendiumArgs, open_campaign_index};
use crate::corpus::audit::describe;
use crate::retrieve::Audience;

pub(super) async fn sources(args: &CampaignArgs) -> anyhow::Result<()> {
    let config = args.load_config()?;
    let (campaign_dir, index) = open_campaign_index(&config).await?;
    let sources = index.store.sources()?;
    let warnings = index.store.diagnostics()?;
    if args.json {
        let json = serde_json::json!({ "campaign": campaign_dir.display().to_string(), "sources": sources, "warnings": warnings });
        println!("{json}");
        return Ok(());
    }
    let width = sources.iter().map(|s| s.label.chars().count()).max().unwrap_or(5).max(5);
    println!("{:width$}  {:7}  {:>7}  {:>9}  source", "label", "kind", "session", "fragments");
    for source in &sources {
        let session = source.session.map(|s| s.to_string()).unwrap_or_else(|| "-".into());
        let dm = if source.n_dm_only > 0 { format!(" ({} GM-only)", source.n_dm_only) } else { String::new() };
        println!(
            "{:width$}  {:7}  {:>7}  {:>9}  {}{}",
            source.label,
            source.kind.as_str(),
            session,
            source.n_fragments,
            source.source_path,
            dm
        );
    }
    print_warnings(&warnings);
    Ok(())
}

pub(super) async fn compendium(args: &CompendiumArgs) -> anyhow::Result<()> {
    let config = args.campaign.load_config()?;
    let (campaign_dir, index) = open_campaign_index(&config).await?;
    let audience = if args.gm { Audience::Gm } else { Audience::Player };
    let listing = index.store.compendium_listing(audience.visibility_filter())?;
    if args.campaign.json {
        let json = serde_json::json!({ "campaign": campaign_dir.display().to_string(), "entities": listing });
        println!("{json}");
        return Ok(());
    }
    for entity in &listing {
        let aliases =
            if entity.aliases.is_empty() { String::new() } else { format!(" ({})", entity.aliases.join(", ")) };
        println!("{} [{}]{}", entity.name, entity.kind.as_str(), aliases);
        if !entity.description.is_empty() {
            println!("    {}", entity.description);
        }
        let sessions: Vec<String> = entity.sessions.iter().map(|s| s.to_string()).collect();
        println!("    sessions: {}", if sessions.is_empty() { "-".to_string() } else { sessions.join(", ") });
        if !entity.other_labels.is_empty() {
            println!("    also in: {}", entity.other_labels.join("; "));
        }
    }
    println!("\n{} entities", listing.len());
    Ok(())
}

pub(super) fn secrets(args: &CampaignArgs) -> anyhow::Result<()> {
    let config = args.load_config()?;
    let (campaign_dir, audit) = crate::app::audit_secrets(&config, &config.campaign)?;
    if args.json {
        let json = serde_json::json!({
            "campaign": campaign_dir.display().to_string(),
            "player_share": audit.player_share(),
            "audit": audit,
        });
        println!("{json}");
        return Ok(());
    }
    println!(
        "Hidden from players in {}: {} note(s) whole, {} passage(s); {:.2} % of the words stay visible.",
        campaign_dir.display(),
        audit.hidden_notes.len(),
        audit.hidden_passages.len(),
        audit.player_share() * 100.0
    );
    for note in &audit.hidden_notes {
        println!("  {}  whole note — {}", note.path, describe(&note.because));
    }
    for passage in &audit.hidden_passages {
        let lines = if passage.line_start == passage.line_end {
            passage.line_start.to_string()
        } else {
            format!("{}-{}", passage.line_start, passage.line_end)
        };
        println!("  {}:{lines}  {}", passage.path, describe(&passage.because));
    }
    if audit.check.is_empty() {
        println!(
            "
No line players may read holds a GM word."
        );
    } else {
        println!(
            "
Check these: {} line(s) players may read hold a GM word, with no heading, label, block or mark around it:",
            audit.check.len()
        );
        for line in &audit.check {
            println!("  {}:{}  «{}»  {}", line.path, line.line, line.word, line.text);
        }
    }
    println!(
        "
The rule and its words: docs/secrets.md (campaign.secret_words, campaign.player_paths)."
    );
    Ok(())
}

fn print_warnings(warnings: &[crate::corpus::Diagnostic]) {
    if !warnings.is_empty() {
        println!("\nWarnings from the last ingest ({}):", warnings.len());
        for warning in warnings {
            println!("  {}", render_diagnostic(warning));
        }
    }
}
