//! `[campaign]` and `[[campaigns]]`: each campaign's notes, how its folder is watched, and
//! where the bot answers for it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;

use super::{CliOverrides, DiscordConfig};
use crate::corpus::{
    CorpusConfig, DEFAULT_SECRET_WORDS, LabelLanguage, NoteKind, SessionPattern, default_kind_folders,
};
use crate::text::fold;

/// Folders never read: Obsidian's settings and trash, and template folders whose notes are
/// placeholders, not campaign facts.
pub const DEFAULT_IGNORED: &[&str] =
    &[".obsidian", ".trash", ".git", "Plantillas", "Templates", "_templates", "templates"];
/// Folders whose notes are GM-only as a whole: a DM who names a folder "Secretos" means it.
/// `campaign.secret_paths` adds to them; `"!Secrets"` drops one.
pub const DEFAULT_SECRET_PATHS: &[&str] = &["Secretos", "Secrets"];
/// A note bigger than this is skipped with a warning: a 100-session chronicle is ~1 MB, so a
/// bigger "note" is an export or a dump, and reading it would stall the ingest.
pub const DEFAULT_MAX_NOTE_BYTES: u64 = 8 * 1024 * 1024;
/// Quiet time after a save before the watched folder is ingested: an editor's save (a temp
/// file written, then renamed over the note) and Obsidian's autosave while the DM types come
/// within a few hundred milliseconds of each other, and a second is short next to the
/// question that follows.
pub const DEFAULT_WATCH_DEBOUNCE_MS: u64 = 1000;
/// A polled folder (network or sync mount) is scanned this often: a save is answerable
/// within a scan and the debounce, and a scan of a few hundred notes' metadata is cheap.
pub const DEFAULT_WATCH_POLL_MS: u64 = 2000;
/// Below this a poll rescans the folder continuously.
pub const MIN_WATCH_POLL_MS: u64 = 200;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCampaign {
    pub dir: Option<PathBuf>,
    pub label_language: Option<LabelLanguage>,
    pub ignore: Option<Vec<String>>,
    pub secret_paths: Option<Vec<String>>,
    pub secret_words: Option<Vec<String>>,
    /// The allow-list: only notes under these folders reach players.
    pub player_paths: Option<Vec<String>>,
    pub kind_folders: Option<BTreeMap<String, String>>,
    pub max_note_bytes: Option<u64>,
    pub session_patterns: Option<Vec<RawSessionPattern>>,
    pub watch: Option<bool>,
    pub watch_debounce_ms: Option<u64>,
    pub watch_mode: Option<String>,
    pub watch_poll_ms: Option<u64>,
    pub watch_dm_warnings: Option<bool>,
}

/// `[[campaigns]]`: one campaign of several served by one bot: its notes (the keys of
/// `[campaign]`) and where it answers (as `[discord]`'s ids; a list left out is `[discord]`'s).
/// Read as a table and split by key, because serde's `flatten` drops `deny_unknown_fields`:
/// a mistyped key is still refused, by whichever half it is not.
#[derive(Debug, Default, Deserialize)]
#[serde(try_from = "toml::Table")]
pub struct RawNamedCampaign {
    pub placement: RawPlacement,
    pub notes: RawCampaign,
}

/// The keys of a `[[campaigns]]` entry that `[campaign]` has not: its name and its places.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPlacement {
    pub name: String,
    pub dm_user_ids: Option<Vec<u64>>,
    pub dm_role_ids: Option<Vec<u64>>,
    pub gm_channel_ids: Option<Vec<u64>>,
    pub guild_ids: Option<Vec<u64>>,
    /// Only these channels (and their threads) of its guilds; left out: every channel of them.
    pub channel_ids: Option<Vec<u64>>,
}

impl RawPlacement {
    const KEYS: [&'static str; 6] =
        ["name", "dm_user_ids", "dm_role_ids", "gm_channel_ids", "guild_ids", "channel_ids"];
}

impl TryFrom<toml::Table> for RawNamedCampaign {
    type Error = toml::de::Error;

    fn try_from(mut entry: toml::Table) -> Result<RawNamedCampaign, toml::de::Error> {
        let placement: toml::Table =
            RawPlacement::KEYS.iter().filter_map(|key| Some((key.to_string(), entry.remove(*key)?))).collect();
        Ok(RawNamedCampaign {
            placement: toml::Value::Table(placement).try_into()?,
            notes: toml::Value::Table(entry).try_into()?,
        })
    }
}

/// `[[campaign.session_patterns]]`: a regex with a `number` group over a session-like note's
/// file name and first heading, and an offset added to the number.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSessionPattern {
    pub pattern: String,
    pub offset: Option<u32>,
}

/// One campaign the bot serves, and where.
#[derive(Debug, Clone)]
pub struct NamedCampaign {
    pub name: String,
    pub campaign: CampaignConfig,
    pub places: CampaignPlaces,
}

/// Who runs a campaign and where it is asked about (Discord ids).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CampaignPlaces {
    pub dm_user_ids: Vec<u64>,
    pub dm_role_ids: Vec<u64>,
    pub gm_channel_ids: Vec<u64>,
    pub guild_ids: Vec<u64>,
    /// Empty: every channel of its guilds.
    pub channel_ids: Vec<u64>,
}

#[derive(Debug, Clone)]
pub struct CampaignConfig {
    /// `None`: the embedded sample campaign.
    pub dir: Option<PathBuf>,
    pub corpus: CorpusConfig,
    /// Folder or file names (any depth, case-insensitive) the ingest never reads.
    pub ignore: Vec<String>,
    pub max_note_bytes: u64,
    /// How the bot (and `oraculo ingest --watch`) follows the folder as the DM saves.
    pub watch: WatchConfig,
}

/// `campaign.watch*`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchConfig {
    /// Whether the bot watches the folder (`oraculo ingest --watch` watches either way).
    pub enabled: bool,
    /// Quiet time after the last change before the ingest runs: a burst of saves is one ingest.
    pub debounce: Duration,
    pub mode: WatchMode,
    /// How often a polled folder is scanned.
    pub poll_interval: Duration,
    /// Tell the campaign's DM by direct message when a saved note produced new warnings.
    pub dm_warnings: bool,
}

/// Where the changes come from (`campaign.watch_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchMode {
    /// The system's file events, or polling where they do not arrive (a network or sync
    /// mount, detected by its filesystem; events that cannot be set up).
    Auto,
    /// The system's file events only.
    Events,
    /// Scan the folder every `poll_interval`.
    Poll,
}

impl Default for WatchConfig {
    fn default() -> WatchConfig {
        WatchConfig {
            enabled: true,
            debounce: Duration::from_millis(DEFAULT_WATCH_DEBOUNCE_MS),
            mode: WatchMode::Auto,
            poll_interval: Duration::from_millis(DEFAULT_WATCH_POLL_MS),
            dm_warnings: false,
        }
    }
}

/// Validates one campaign's notes settings (`key`: where they are, for messages).
pub(super) fn campaign_config(campaign: RawCampaign, key: &str) -> anyhow::Result<CampaignConfig> {
    let watch = watch_config(&campaign, key)?;
    let mut kind_folders = default_kind_folders();
    for (folder, kind) in campaign.kind_folders.unwrap_or_default() {
        let kind = NoteKind::parse(&kind).with_context(|| {
            format!("{key}.kind_folders.{folder} = {kind:?}: expected \"session\", \"sheet\" or \"world\"")
        })?;
        kind_folders.insert(folder, kind);
    }
    // A user's patterns extend the built-in ones (episode codes), tried after them.
    let mut session_patterns = SessionPattern::defaults();
    for (pattern_idx, raw_pattern) in campaign.session_patterns.unwrap_or_default().iter().enumerate() {
        let pattern = SessionPattern::new(&raw_pattern.pattern, raw_pattern.offset.unwrap_or(0)).map_err(|reason| {
            anyhow::anyhow!("{key}.session_patterns[{pattern_idx}] = {:?} {reason}", raw_pattern.pattern)
        })?;
        session_patterns.push(pattern);
    }
    let secret_words = with_defaults(&format!("{key}.secret_words"), DEFAULT_SECRET_WORDS, campaign.secret_words)?;
    if let Some(phrase) = secret_words.iter().find(|word| crate::corpus::phrase_words(word).count() != 1) {
        bail!(
            "{key}.secret_words holds {phrase:?}, which is not one word: a callout type or comment opener is read word by word (split at every character that is not a letter or digit, and at camelCase), so list each word alone"
        );
    }
    let corpus = CorpusConfig {
        label_language: campaign.label_language.unwrap_or_default(),
        kind_folders,
        secret_paths: with_defaults(&format!("{key}.secret_paths"), DEFAULT_SECRET_PATHS, campaign.secret_paths)?,
        secret_words: secret_words.iter().map(|word| fold(word)).collect(),
        session_patterns,
        player_paths: campaign.player_paths.unwrap_or_default(),
    };
    let max_note_bytes = campaign.max_note_bytes.unwrap_or(DEFAULT_MAX_NOTE_BYTES);
    if max_note_bytes == 0 {
        bail!("{key}.max_note_bytes must be above 0");
    }
    Ok(CampaignConfig {
        watch,
        dir: campaign.dir,
        corpus,
        // A user's list extends the defaults: `.trash` stays unread whatever the config says.
        ignore: DEFAULT_IGNORED.iter().map(|s| s.to_string()).chain(campaign.ignore.unwrap_or_default()).collect(),
        max_note_bytes,
    })
}

/// Validates `campaign.watch*` (`key`: where they are, for messages).
fn watch_config(campaign: &RawCampaign, key: &str) -> anyhow::Result<WatchConfig> {
    let mode = match campaign.watch_mode.as_deref() {
        None | Some("auto") => WatchMode::Auto,
        Some("events") => WatchMode::Events,
        Some("poll") => WatchMode::Poll,
        Some(other) => bail!("{key}.watch_mode = {other:?}: expected \"auto\", \"events\" or \"poll\""),
    };
    let poll_ms = campaign.watch_poll_ms.unwrap_or(DEFAULT_WATCH_POLL_MS);
    if poll_ms < MIN_WATCH_POLL_MS {
        bail!("{key}.watch_poll_ms = {poll_ms}: at least {MIN_WATCH_POLL_MS}");
    }
    Ok(WatchConfig {
        enabled: campaign.watch.unwrap_or(true),
        debounce: Duration::from_millis(campaign.watch_debounce_ms.unwrap_or(DEFAULT_WATCH_DEBOUNCE_MS)),
        mode,
        poll_interval: Duration::from_millis(poll_ms),
        dm_warnings: campaign.watch_dm_warnings.unwrap_or(false),
    })
}

/// A list that extends built-in `defaults` (`campaign.secret_paths`, `campaign.secret_words`):
/// each entry is added, and an entry `"!name"` drops the default it names (compared without
/// case or accents) instead, the one way to give up a default; `key` names the list in errors.
fn with_defaults(key: &str, defaults: &[&str], entries: Option<Vec<String>>) -> anyhow::Result<Vec<String>> {
    let mut list: Vec<String> = defaults.iter().map(|default| default.to_string()).collect();
    let entries = entries.unwrap_or_default();
    for entry in &entries {
        let entry = entry.trim();
        let dropped = entry.strip_prefix('!').map(str::trim);
        if entry.is_empty() || dropped.is_some_and(str::is_empty) {
            bail!("{key} holds an empty entry");
        }
        if dropped.is_none() && !list.iter().any(|kept| fold(kept) == fold(entry)) {
            list.push(entry.to_string());
        }
    }
    for dropped in entries.iter().filter_map(|entry| entry.trim().strip_prefix('!').map(str::trim)) {
        if !defaults.iter().any(|default| fold(default) == fold(dropped)) {
            bail!(
                "{key} holds \"!{dropped}\", but {dropped:?} is no default to drop (the defaults: {}); list it without `!` to add it",
                defaults.join(", ")
            );
        }
        list.retain(|kept| fold(kept) != fold(dropped));
    }
    Ok(list)
}

/// Validates `[[campaigns]]`: names unique and non-empty, every one with a folder of its own;
/// the CLI's campaign is the one `--campaign` names (its name or folder), else the first.
pub(super) fn named_campaigns(
    entries: Vec<RawNamedCampaign>,
    discord: Option<&DiscordConfig>,
    overrides: &CliOverrides,
) -> anyhow::Result<(CampaignConfig, Vec<NamedCampaign>)> {
    if entries.is_empty() {
        bail!("[[campaigns]] is empty: write one entry per campaign, or use [campaign] for one");
    }
    let inherited = discord.map(DiscordConfig::places).unwrap_or_default();
    let mut campaigns: Vec<NamedCampaign> = Vec::new();
    // Every channel a campaign names so far: (channel, (campaign, the key that names it)).
    let mut claimed: Vec<(u64, (String, &str))> = Vec::new();
    for (idx, entry) in entries.into_iter().enumerate() {
        let key = format!("campaigns[{idx}]");
        let RawNamedCampaign { placement, notes } = entry;
        let name = placement.name.trim().to_string();
        if name.is_empty() {
            bail!("{key}.name is empty: each campaign needs a name (it appears in logs and messages)");
        }
        if campaigns.iter().any(|other| other.name == name) {
            bail!("{key}.name = {name:?} is used twice");
        }
        let Some(dir) = notes.dir.clone() else { bail!("{key} ({name}) has no dir: the folder of its notes") };
        if campaigns.iter().any(|other| other.campaign.dir.as_deref() == Some(dir.as_path())) {
            bail!("{key}.dir = {} is another campaign's folder too", dir.display());
        }
        let ids = |field: &str, ids: Option<Vec<u64>>, default: &[u64]| -> anyhow::Result<Vec<u64>> {
            let ids = ids.unwrap_or_else(|| default.to_vec());
            if ids.contains(&0) {
                bail!("{key}.{field} holds 0, which is no Discord id (copy ids with Developer Mode on)");
            }
            Ok(ids)
        };
        let gm_channels_inherited = placement.gm_channel_ids.is_none() && !inherited.gm_channel_ids.is_empty();
        let places = CampaignPlaces {
            dm_user_ids: ids("dm_user_ids", placement.dm_user_ids, &inherited.dm_user_ids)?,
            dm_role_ids: ids("dm_role_ids", placement.dm_role_ids, &inherited.dm_role_ids)?,
            gm_channel_ids: ids("gm_channel_ids", placement.gm_channel_ids, &inherited.gm_channel_ids)?,
            guild_ids: ids("guild_ids", placement.guild_ids, &inherited.guild_ids)?,
            channel_ids: ids("channel_ids", placement.channel_ids, &[])?,
        };
        let gm_channels = if gm_channels_inherited { "gm_channel_ids, from [discord]" } else { "gm_channel_ids" };
        for (channel, field) in places
            .gm_channel_ids
            .iter()
            .map(|channel| (*channel, gm_channels))
            .chain(places.channel_ids.iter().map(|channel| (*channel, "channel_ids")))
        {
            if let Some((other, other_field)) = claimed
                .iter()
                .find_map(|(claimed_channel, claim)| (*claimed_channel == channel && claim.0 != name).then_some(claim))
            {
                bail!(
                    "channel {channel} is claimed by two campaigns: {other:?} ({other_field}) and {name:?} ({field}). A channel belongs to one campaign, or one campaign's GM channel could answer another's players (or the reverse); give each [[campaigns]] entry its own gm_channel_ids and channel_ids"
                );
            }
            claimed.push((channel, (name.clone(), field)));
        }
        campaigns.push(NamedCampaign { name, campaign: campaign_config(notes, &key)?, places });
    }
    let chosen = match &overrides.campaign_dir {
        None => campaigns[0].campaign.clone(),
        Some(wanted) => match campaigns
            .iter()
            .find(|c| c.campaign.dir.as_deref() == Some(wanted.as_path()) || Path::new(&c.name) == wanted.as_path())
        {
            Some(named) => named.campaign.clone(),
            // Another folder: the first entry's settings over it.
            None => CampaignConfig { dir: Some(wanted.clone()), ..campaigns[0].campaign.clone() },
        },
    };
    Ok((chosen, campaigns))
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    use super::{WatchConfig, WatchMode};
    use crate::config::tests::check;
    use crate::config::{CliOverrides, Config, RawConfig};
    use crate::corpus::LabelLanguage;

    #[test]
    fn several_campaigns_each_with_its_places() {
        let two = "[discord]\ndm_user_ids = [7]\nguild_ids = [1]\n\n\
            [[campaigns]]\nname = \"Galerna\"\ndir = \"/n/galerna\"\nchannel_ids = [10]\n\n\
            [[campaigns]]\nname = \"Vorn\"\ndir = \"/n/vorn\"\ndm_user_ids = [8]\nlabel_language = \"en\"\n";
        let config = check(two, &[("HOME", "/h")]).unwrap();
        let names: Vec<&str> = config.campaigns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["Galerna", "Vorn"]);
        // A list left out is [discord]'s; one written is the campaign's own.
        assert_eq!(config.campaigns[0].places.dm_user_ids, [7]);
        assert_eq!(config.campaigns[1].places.dm_user_ids, [8]);
        assert_eq!(config.campaigns[1].places.guild_ids, [1]);
        assert_eq!(
            (config.campaigns[0].places.channel_ids.as_slice(), config.campaigns[1].places.channel_ids.len()),
            (&[10][..], 0)
        );
        assert_eq!(config.campaigns[1].campaign.corpus.label_language, LabelLanguage::En);
        // The CLI's campaign: the first, or the one --campaign names (by name or folder).
        assert_eq!(config.campaign.dir.as_deref(), Some(Path::new("/n/galerna")));
        let by_name = |wanted: &str| {
            let raw = RawConfig::parse(two, Path::new("config.toml")).unwrap();
            let overrides = CliOverrides { campaign_dir: Some(PathBuf::from(wanted)), ..CliOverrides::default() };
            Config::from_layers(raw, &|key| (key == "HOME").then(|| "/h".to_string()), &overrides).unwrap()
        };
        assert_eq!(by_name("Vorn").campaign.dir.as_deref(), Some(Path::new("/n/vorn")));
        assert_eq!(by_name("Vorn").campaign.corpus.label_language, LabelLanguage::En);
        assert_eq!(by_name("/n/otra").campaign.dir.as_deref(), Some(Path::new("/n/otra")));
        // One campaign without [[campaigns]]: [discord]'s ids, named after its folder.
        let one = check("[campaign]\ndir = \"/n/galerna\"\n[discord]\nguild_ids = [1]\n", &[("HOME", "/h")]).unwrap();
        assert_eq!((one.campaigns.len(), one.campaigns[0].name.as_str()), (1, "galerna"));
        assert_eq!(one.campaigns[0].places.guild_ids, [1]);
        // Mistakes, each named.
        for (text, needle) in [
            (
                "[campaign]\ndir = \"/a\"\n[[campaigns]]\nname = \"A\"\ndir = \"/a\"\n",
                "both [campaign] and [[campaigns]]",
            ),
            ("[[campaigns]]\nname = \"A\"\ndir = \"/a\"\n[[campaigns]]\nname = \"A\"\ndir = \"/b\"\n", "used twice"),
            (
                "[[campaigns]]\nname = \"A\"\ndir = \"/a\"\n[[campaigns]]\nname = \"B\"\ndir = \"/a\"\n",
                "another campaign's folder",
            ),
            ("[[campaigns]]\nname = \"A\"\n", "has no dir"),
            ("[[campaigns]]\nname = \" \"\ndir = \"/a\"\n", "name is empty"),
            ("[[campaigns]]\nname = \"A\"\ndir = \"/a\"\nchannel_ids = [0]\n", "campaigns[0].channel_ids holds 0"),
            ("[[campaigns]]\nname = \"A\"\ndir = \"/a\"\nmax_note_bytes = 0\n", "campaigns[0].max_note_bytes"),
            ("[campaign]\nwatch_mode = \"inotify\"\n", "campaign.watch_mode = \"inotify\""),
            ("[[campaigns]]\nname = \"A\"\ndir = \"/a\"\nwatch_poll_ms = 10\n", "campaigns[0].watch_poll_ms = 10"),
            // A mistyped key is refused, in either half of the entry.
            ("[[campaigns]]\nname = \"A\"\ndir = \"/a\"\nchanel_ids = [5]\n", "unknown field `chanel_ids`"),
            ("[[campaigns]]\nname = \"A\"\ndir = \"/a\"\nsecret_word = [\"x\"]\n", "unknown field `secret_word`"),
            ("[[campaigns]]\ndir = \"/a\"\n", "missing field `name`"),
        ] {
            let err = format!("{:#}", check(text, &[("HOME", "/h")]).unwrap_err());
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn the_watched_vault_is_on_by_default_and_read_per_campaign() {
        let config = check("", &[("HOME", "/h")]).unwrap();
        assert_eq!(config.campaign.watch, WatchConfig::default());
        assert!(config.campaign.watch.enabled && !config.campaign.watch.dm_warnings);
        let text = "[[campaigns]]\nname = \"A\"\ndir = \"/a\"\nwatch = false\n\n[[campaigns]]\nname = \"B\"\ndir = \"/b\"\n\
                    watch_debounce_ms = 250\nwatch_mode = \"poll\"\nwatch_poll_ms = 500\nwatch_dm_warnings = true\n";
        let config = check(text, &[("HOME", "/h")]).unwrap();
        assert!(!config.campaigns[0].campaign.watch.enabled);
        let b = &config.campaigns[1].campaign.watch;
        assert_eq!(
            (b.debounce, b.mode, b.poll_interval),
            (Duration::from_millis(250), WatchMode::Poll, Duration::from_millis(500))
        );
        assert!(b.enabled && b.dm_warnings);
    }

    #[test]
    fn secret_paths_and_words_extend_their_defaults_and_drop_one_only_by_name() {
        let config =
            check("[campaign]\nsecret_paths = [\"Planes\"]\nsecret_words = [\"árbitro\"]\n", &[("HOME", "/h")])
                .unwrap();
        assert_eq!(config.campaign.corpus.secret_paths, ["Secretos", "Secrets", "Planes"]);
        let words = &config.campaign.corpus.secret_words;
        assert!(words.iter().any(|word| word == "arbitro") && words.iter().any(|word| word == "master"), "{words:?}");
        assert!(config.campaign.corpus.is_secret_path("Secretos/x.md"), "a default stays secret");
        // `[]` adds nothing and drops nothing.
        let config = check("[campaign]\nsecret_paths = []\n", &[("HOME", "/h")]).unwrap();
        assert_eq!(config.campaign.corpus.secret_paths, ["Secretos", "Secrets"]);
        // `!name` drops a default, compared without case or accents.
        let config = check(
            "[campaign]\nsecret_paths = [\"!secrets\"]\nsecret_words = [\"!Máster\", \"!spoiler\"]\n",
            &[("HOME", "/h")],
        )
        .unwrap();
        assert_eq!(config.campaign.corpus.secret_paths, ["Secretos"]);
        assert!(!config.campaign.corpus.names_gm("master") && !config.campaign.corpus.names_gm("spoilers"));
        assert!(config.campaign.corpus.names_gm("gm-only"));
        // The same in [[campaigns]].
        let config = check(
            "[[campaigns]]\nname = \"A\"\ndir = \"/a\"\nsecret_paths = [\"Planes\", \"!Secretos\"]\n",
            &[("HOME", "/h")],
        )
        .unwrap();
        assert_eq!(config.campaigns[0].campaign.corpus.secret_paths, ["Secrets", "Planes"]);
        for (text, needle) in [
            ("[campaign]\nsecret_paths = [\"!Planes\"]\n", "campaign.secret_paths holds \"!Planes\""),
            ("[campaign]\nsecret_words = [\"!árbitro\"]\n", "campaign.secret_words holds \"!árbitro\""),
            ("[campaign]\nsecret_words = [\"game master\"]\n", "not one word"),
            ("[campaign]\nsecret_paths = [\" \"]\n", "empty entry"),
            ("[[campaigns]]\nname = \"A\"\ndir = \"/a\"\nsecret_words = [\"gm-only\"]\n", "campaigns[0].secret_words"),
        ] {
            let err = format!("{:#}", check(text, &[("HOME", "/h")]).unwrap_err());
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn a_channel_claimed_by_two_campaigns_is_refused_naming_both() {
        let campaigns = |a: &str, b: &str| {
            format!(
                "[discord]\nguild_ids = [1]\n{a}\n[[campaigns]]\nname = \"Galerna\"\ndir = \"/g\"\nchannel_ids = [10]\n\n[[campaigns]]\nname = \"Vorn\"\ndir = \"/v\"\nchannel_ids = [20]\n{b}\n"
            )
        };
        // B's GM channel is A's player channel.
        let err = format!("{:#}", check(&campaigns("", "gm_channel_ids = [10]"), &[("HOME", "/h")]).unwrap_err());
        for needle in ["channel 10", "\"Galerna\" (channel_ids)", "\"Vorn\" (gm_channel_ids)"] {
            assert!(err.contains(needle), "{needle}: {err}");
        }
        // A GM channel of [discord] is inherited by both campaigns.
        let err = format!("{:#}", check(&campaigns("gm_channel_ids = [30]", ""), &[("HOME", "/h")]).unwrap_err());
        for needle in
            ["channel 30", "\"Galerna\" (gm_channel_ids, from [discord])", "\"Vorn\" (gm_channel_ids, from [discord])"]
        {
            assert!(err.contains(needle), "{needle}: {err}");
        }
        // Each with its own GM channel, or one campaign naming a channel twice: fine.
        let config = check(&campaigns("gm_channel_ids = [30]", "gm_channel_ids = [40]"), &[("HOME", "/h")]).unwrap();
        assert_eq!(config.campaigns[0].places.gm_channel_ids, [30]);
        let own = "[discord]\nguild_ids = [1]\n[[campaigns]]\nname = \"Galerna\"\ndir = \"/g\"\nchannel_ids = [10]\ngm_channel_ids = [10, 30]\n\n[[campaigns]]\nname = \"Vorn\"\ndir = \"/v\"\nchannel_ids = [20]\ngm_channel_ids = [40]\n";
        let config = check(own, &[("HOME", "/h")]).unwrap();
        assert_eq!(config.campaigns[1].places.gm_channel_ids, [40]);
    }

    #[test]
    fn a_user_ignore_list_extends_the_defaults() {
        let config = check("[campaign]\nignore = [\"Borradores\"]\n", &[("HOME", "/home/dm")]).unwrap();
        for ignored in [".trash", ".obsidian", "Plantillas", "Borradores"] {
            assert!(config.campaign.ignore.iter().any(|i| i == ignored), "{ignored}: {:?}", config.campaign.ignore);
        }
    }

    #[test]
    fn session_patterns_extend_the_episode_codes() {
        let config = check(
            "[[campaign.session_patterns]]\npattern = \"(?i)^recap s(?P<number>\\\\d+)\"\n\n[[campaign.session_patterns]]\npattern = \"^Libro 2 - (?P<number>\\\\d+)\"\noffset = 40\n",
            &[("HOME", "/h")],
        )
        .unwrap();
        let patterns = &config.campaign.corpus.session_patterns;
        assert_eq!(patterns.len(), 3, "{patterns:?}");
        let session = |path: &str| crate::corpus::session_from_patterns(patterns, path, None).map(|s| s.0);
        assert_eq!(session("C2E004.md"), Some(1004));
        assert_eq!(session("Recap S12.md"), Some(12));
        assert_eq!(session("Libro 2 - 3.md"), Some(43));
        for (text, needle) in [
            ("[[campaign.session_patterns]]\npattern = \"^S(\\\\d+)\"\n", "session_patterns[0]"),
            ("[[campaign.session_patterns]]\npattern = \"^S(?P<number>\"\n", "regex"),
            ("[[campaign.session_patterns]]\npatern = \"x\"\n", "patern"),
        ] {
            let err = check(text, &[("HOME", "/h")]).unwrap_err();
            assert!(format!("{err:#}").contains(needle), "{text}: {err:#}");
        }
    }
}
