//! `oraculo doctor` and `oraculo bot`: the install's checks, and the bot they check for.

use super::CampaignArgs;
use crate::config::{CliOverrides, Config};

/// `oraculo bot`: the same oracle as `ask`, behind Discord, until a shutdown signal.
pub(super) async fn bot(location: &CliOverrides) -> anyhow::Result<()> {
    let config = Config::load(location)?;
    crate::discord::run(config, crate::discord::shutdown_signal()).await
}

/// `oraculo doctor`: every check printed (or one JSON object), then an error when one failed,
/// so the exit status says it.
pub(super) async fn doctor(args: &CampaignArgs) -> anyhow::Result<()> {
    let overrides = &args.location;
    let options = crate::doctor::Options { probe_models: true, discord_client: None };
    let report = crate::doctor::run(overrides, &options).await;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.render());
    }
    match report.failures().count() {
        0 => Ok(()),
        failed => anyhow::bail!("{failed} check(s) failed"),
    }
}
