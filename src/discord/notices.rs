//! What the campaign's DM hears by direct message from a watched campaign: an ingest the
//! mass-removal guard refused, an ingest that failed (both rate-limited), and, when
//! `campaign.watch_dm_warnings` asks, the new warnings of a saved note.

use std::sync::Arc;
use std::time::{Duration, Instant};

use poise::serenity_prelude as serenity;

use super::errors::log_discord_error;
use super::layout;
use super::locale::Lang;
use crate::watch::WatchReport;

/// Most warnings one direct message lists: the rest are in `oraculo sources`.
const WARNINGS_PER_MESSAGE: usize = 10;
/// At most one notice of each kind (refused, failed) per campaign this often: a folder that
/// stays unmounted fails every retry (the watcher's 30 s), and a sync tool flapping refuses
/// on every change; the DM needs to hear it once, then how many more, not a message a minute.
pub const NOTICE_INTERVAL: Duration = Duration::from_secs(15 * 60);

/// Admits one notice per [`NOTICE_INTERVAL`], counting the ones it held back.
#[derive(Debug, Default)]
pub struct RateLimit {
    last: Option<Instant>,
    held_back: usize,
}

impl RateLimit {
    /// `Some(n)` when a notice may go at `now`, `n` being how many were held back since the
    /// last one; `None` (counted) when it is too soon.
    pub fn admit(&mut self, now: Instant) -> Option<usize> {
        if self.last.is_some_and(|last| now.saturating_duration_since(last) < NOTICE_INTERVAL) {
            self.held_back += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.held_back))
    }
}

/// The direct messages of one watched campaign to its DM users.
pub struct DmNotices {
    http: Arc<serenity::Http>,
    dm_users: Vec<u64>,
    lang: Lang,
    warnings: bool,
    refused: RateLimit,
    failed: RateLimit,
}

impl DmNotices {
    /// Notices to `dm_users` in `lang`; new warnings too when `warnings`.
    pub fn new(http: Arc<serenity::Http>, dm_users: Vec<u64>, lang: Lang, warnings: bool) -> DmNotices {
        DmNotices { http, dm_users, lang, warnings, refused: RateLimit::default(), failed: RateLimit::default() }
    }

    /// Tells the DM what each report calls for, until the watcher stops.
    pub async fn follow(mut self, mut reports: tokio::sync::mpsc::UnboundedReceiver<WatchReport>) {
        while let Some(report) = reports.recv().await {
            if let Some(text) = self.text_for(&report, Instant::now()) {
                self.send(&text).await;
            }
        }
    }

    /// The message `report` calls for at `now`, if any.
    fn text_for(&mut self, report: &WatchReport, now: Instant) -> Option<String> {
        match report {
            WatchReport::Refused(refused) => {
                self.refused.admit(now)?;
                Some(self.lang.removal_refused(refused))
            }
            WatchReport::Failed { error } => {
                let more = self.failed.admit(now)?;
                Some(self.lang.watched_ingest_failed(error, more))
            }
            WatchReport::Ingested(ingested) if self.warnings && !ingested.new_warnings.is_empty() => {
                let mut text = match self.lang {
                    Lang::Es => "Las notas guardadas dejaron avisos (`oraculo sources` los lista todos):".to_string(),
                    Lang::En => "The saved notes left warnings (`oraculo sources` lists them all):".to_string(),
                };
                for warning in ingested.new_warnings.iter().take(WARNINGS_PER_MESSAGE) {
                    let line = warning.line.map(|line| format!(":{line}")).unwrap_or_default();
                    text.push_str(&format!("\n• `{}{line}`: {}", warning.path.replace('`', "'"), warning.message));
                }
                Some(text)
            }
            _ => None,
        }
    }

    async fn send(&self, text: &str) {
        for user in &self.dm_users {
            let sent = match serenity::UserId::new(*user).create_dm_channel(&self.http).await {
                Ok(direct) => {
                    direct.id.send_message(&self.http, layout::Message::notice(text).to_create_message(None)).await
                }
                Err(err) => Err(err),
            };
            if let Err(err) = sent {
                log_discord_error(&err, "telling the DM of a watched ingest");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_notice_per_interval_then_how_many_were_held_back() {
        let mut limit = RateLimit::default();
        let start = Instant::now();
        assert_eq!(limit.admit(start), Some(0));
        assert_eq!(limit.admit(start + Duration::from_secs(30)), None);
        assert_eq!(limit.admit(start + Duration::from_secs(60)), None);
        assert_eq!(limit.admit(start + NOTICE_INTERVAL + Duration::from_secs(1)), Some(2));
        assert_eq!(limit.admit(start + NOTICE_INTERVAL + Duration::from_secs(2)), None);
    }
}
