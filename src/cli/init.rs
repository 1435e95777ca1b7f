//! `oraculo init`: prints what `app::init::init_campaign` detected and wrote.

use std::path::PathBuf;

use super::InitArgs;
use crate::app::init::{InitOptions, InitReport, ModelChoice, init_campaign};
use crate::corpus::LabelLanguage;

/// Names listed per line before "and N more": a DM checks that the right kind of thing was
/// found, not every name (`oraculo sources` lists them all after the ingest).
const NAMES_SHOWN: usize = 6;

pub(super) async fn init(args: &InitArgs) -> anyhow::Result<()> {
    let campaign_dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()?,
    };
    let env = |key: &str| std::env::var(key).ok().filter(|value| !value.is_empty());
    let config_path = match &args.config {
        Some(path) => path.clone(),
        None => default_config_path(&campaign_dir, &env)?,
    };
    let models_data_dir = args
        .data
        .clone()
        .or_else(|| env("ORACULO_DATA").map(PathBuf::from))
        .or_else(|| env("XDG_DATA_HOME").map(|dir| PathBuf::from(dir).join("oraculo")))
        .or_else(|| env("HOME").map(|home| PathBuf::from(home).join(".local/share/oraculo")))
        .unwrap_or_default();
    let options = InitOptions {
        campaign_dir,
        config_path,
        data_dir: args.data.clone(),
        models_data_dir,
        ollama_url: env("ORACULO_OLLAMA_URL").unwrap_or_else(|| crate::config::DEFAULT_OLLAMA_URL.to_string()),
        force: args.force,
    };
    let report = init_campaign(&options).await?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(())
}

/// `./config.toml`, unless the current folder is inside the notes folder (never written to):
/// then `$XDG_CONFIG_HOME/oraculo/config.toml`, else `~/.config/oraculo/config.toml`.
fn default_config_path(
    campaign_dir: &std::path::Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<PathBuf> {
    let here = std::env::current_dir()?;
    let notes = std::fs::canonicalize(campaign_dir).unwrap_or_else(|_| campaign_dir.to_path_buf());
    if !std::fs::canonicalize(&here).unwrap_or(here.clone()).starts_with(&notes) {
        return Ok(here.join("config.toml"));
    }
    let config_home = env("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|home| PathBuf::from(home).join(".config")))
        .ok_or_else(|| anyhow::anyhow!("no HOME: give --config a path outside the notes folder"))?;
    Ok(config_home.join("oraculo").join("config.toml"))
}

/// The report as a DM reads it.
fn render(report: &InitReport) -> String {
    let survey = &report.survey;
    let language = match survey.language {
        LabelLanguage::Es => "Spanish",
        LabelLanguage::En => "English",
    };
    let mut out = format!(
        "Read {}: {} notes, in {language} (the labels follow).\n",
        report.campaign_dir.display(),
        survey.n_notes
    );
    out.push_str(&format!("  sessions     {:>3}  {}\n", survey.sessions.len(), session_ranges(&survey.sessions)));
    out.push_str(&format!("  sheets       {:>3}  {}\n", survey.sheets.len(), some_names(&survey.sheets)));
    out.push_str(&format!("  world        {:>3}  {}\n", survey.world.len(), some_names(&survey.world)));
    let gm_only: Vec<String> = survey.gm_only.iter().map(|note| format!("{} ({})", note.path, note.why)).collect();
    out.push_str(&format!("  GM-only      {:>3}  {}\n", gm_only.len(), some_names(&gm_only)));
    let passages: Vec<String> =
        survey.secret_passages.iter().map(|note| format!("{} ({})", note.path, note.why)).collect();
    if !passages.is_empty() {
        out.push_str(&format!("  GM passages  {:>3}  {}\n", passages.len(), some_names(&passages)));
    }
    let unplaced: Vec<String> = survey.unplaced.iter().map(|note| format!("{}: {}", note.path, note.why)).collect();
    out.push_str(&format!("  not placed   {:>3}  {}\n", unplaced.len(), some_names(&unplaced)));
    if !survey.world_by_default.is_empty() {
        let folders: Vec<String> =
            survey.world_by_default.iter().map(|(folder, n)| format!("{folder} ({n})")).collect();
        out.push_str(&format!("  world, as nothing said otherwise: {}\n", some_names(&folders)));
    }
    if !survey.secret_folders.is_empty() {
        out.push_str(&format!("  GM-only by their name: {}\n", survey.secret_folders.join(", ")));
    }
    if !survey.warnings.is_empty() {
        let warnings: Vec<String> = survey
            .warnings
            .iter()
            .map(|warning| match warning.line {
                Some(line) => format!("{}:{line}: {}", warning.path, warning.message),
                None => format!("{}: {}", warning.path, warning.message),
            })
            .collect();
        out.push_str(&format!("  warnings     {:>3}  {}\n", warnings.len(), some_names(&warnings)));
    }
    out.push_str(&format!("Model: {}\n", model_line(&report.model)));
    out.push_str(&format!("Wrote {} (every choice is commented there).\n", report.config_path.display()));
    out.push_str("Next:\n");
    for command in &report.next_commands {
        out.push_str(&format!("  {command}\n"));
    }
    out.push_str("If something does not work: oraculo doctor --config <that file>\n");
    out
}

fn model_line(model: &ModelChoice) -> String {
    match model {
        ModelChoice::Ollama { url, embedder, chat, to_pull, .. } => {
            let pull = if to_pull.is_empty() { String::new() } else { format!(" (to pull: {})", to_pull.join(", ")) };
            format!("Ollama at {url}: {embedder} and {chat}{pull}")
        }
        ModelChoice::Embedded { ollama_url, missing_files, .. } => {
            let missing = if missing_files.is_empty() {
                String::new()
            } else {
                format!(" (not fetched yet: {})", missing_files.join(", "))
            };
            format!(
                "embedded, on this CPU (no Ollama answered at {ollama_url}): e5-small and Qwen2.5-Coder-1.5B{missing}"
            )
        }
    }
}

/// `1–40`, `1–3, 5, 8–9`.
fn session_ranges(numbers: &[u32]) -> String {
    let mut ranges: Vec<String> = Vec::new();
    let mut start_idx = 0;
    for idx in 0..numbers.len() {
        let ends = idx + 1 == numbers.len() || numbers[idx + 1] != numbers[idx] + 1;
        if ends {
            ranges.push(if idx == start_idx {
                numbers[idx].to_string()
            } else {
                format!("{}–{}", numbers[start_idx], numbers[idx])
            });
            start_idx = idx + 1;
        }
    }
    ranges.join(", ")
}

/// The first names, then how many more.
fn some_names(names: &[String]) -> String {
    let shown = names.iter().take(NAMES_SHOWN).cloned().collect::<Vec<_>>().join("; ");
    match names.len().saturating_sub(NAMES_SHOWN) {
        0 => shown,
        more => format!("{shown}; and {more} more"),
    }
}

#[cfg(test)]
mod tests {
    use super::session_ranges;

    #[test]
    fn sessions_print_as_ranges() {
        for (numbers, ranges) in
            [(vec![], ""), (vec![1, 2, 3], "1–3"), (vec![1, 2, 3, 5, 8, 9], "1–3, 5, 8–9"), (vec![7], "7")]
        {
            assert_eq!(session_ranges(&numbers), ranges);
        }
    }
}
