//! `oraculo eval`: a question bank run through the pipeline's variants, the report saved and shown.

use anyhow::Context;

use super::EvalArgs;
use super::ingest::run_ingest;
use super::{campaign_paths, open_oracle};
use crate::app::open_answerer;

pub(super) async fn eval(args: &EvalArgs) -> anyhow::Result<()> {
    if !args.compare.is_empty() {
        let banks: Vec<crate::eval::compare::BankRows> =
            args.compare.iter().map(|path| crate::eval::compare::load_report(path)).collect::<anyhow::Result<_>>()?;
        let comparison = crate::eval::compare::compare(&banks);
        if args.campaign.json {
            println!("{}", serde_json::to_string(&comparison)?);
        } else {
            print!("{}", comparison.render());
        }
        return Ok(());
    }
    let config = args.campaign.load_config()?;
    let (campaign_dir, _) = campaign_paths(&config)?;
    if let Some(judged) = &args.judged {
        return judge_citations(args, &config, judged).await;
    }
    let (bank, questions_file) = match &args.questions {
        Some(path) => (crate::eval::load_bank(path)?, path.display().to_string()),
        None if config.campaign.dir.is_none() => {
            (crate::eval::sample_bank().context("the built-in sample bank")?, "(built-in sample bank)".to_string())
        }
        None => anyhow::bail!("--questions FILE is required for a campaign other than the built-in sample"),
    };
    if !args.no_ingest {
        // Annotations feed the rerank before a model's answer; quotes need none.
        let annotate = !args.retrieval_only && !config.answer.quotes();
        let summary = run_ingest(&config, annotate, !args.campaign.json, crate::ingest::Removal::Guarded).await?;
        eprintln!(
            "eval: ingested {} ({} fragments, {} embedded){}",
            summary.campaign,
            summary.fragments,
            summary.windows_embedded,
            match &summary.annotations {
                Some(report) if report.missing > 0 => format!("; {} fragments without annotation", report.missing),
                _ => String::new(),
            }
        );
    }
    // As `oraculo ask` answers: with `chat.answer_style = "quotes"` no chat model is loaded.
    let mut oracle = open_answerer(&config).await?;
    oracle.set_k(args.k.max(1));
    if let Some(mode) = args.answer_mode {
        oracle.set_mode(mode);
    }
    if let Some(speed) = args.pace {
        oracle.set_pace(speed);
    }
    oracle.set_rerank(args.rerank_reads.unwrap_or_default(), !args.rerank_without_time_limit);
    let answers = match (args.retrieval_only, args.answers_per_kind) {
        (true, _) => crate::eval::AnswerScope::None,
        (false, Some(n)) => crate::eval::AnswerScope::PerKind(n),
        (false, None) => crate::eval::AnswerScope::All,
    };
    let options = crate::eval::EvalOptions {
        answers,
        ablations: !args.no_ablations,
        batch_size: config.embedder.batch_size(),
        baseline_cache: Some(config.data_dir.join("eval").join("baseline-cache")),
    };
    let run =
        crate::eval::RunInfo { campaign: campaign_dir.display().to_string(), questions_file, ..Default::default() };
    let progress = |n: usize, total: usize, question: &crate::eval::EvalQuestion| {
        eprintln!("eval: [{n}/{total}] {} {}", question.id, question.question);
    };
    let report = crate::eval::run_eval(&oracle, &bank, &options, run, &progress).await?;
    let out = match &args.out {
        Some(path) => path.clone(),
        None => config.data_dir.join("eval").join(format!("report-{}.json", report.run.started_at)),
    };
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(&out, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("saving the report to {}", out.display()))?;
    if args.campaign.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.render());
        println!("Saved to {}", out.display());
    }
    Ok(())
}

/// `oraculo eval --judged FILE`: the citation checker against the reader's verdicts.
async fn judge_citations(
    args: &EvalArgs,
    config: &crate::config::Config,
    judged: &std::path::Path,
) -> anyhow::Result<()> {
    let pairs = crate::eval::judged::load_judged(judged)?;
    if !args.no_ingest {
        run_ingest(config, false, !args.campaign.json, crate::ingest::Removal::Guarded).await?;
    }
    let oracle = open_oracle(config).await?;
    let by_split = crate::eval::judged::judge(&oracle, &pairs, &args.judged_bank).await?;
    if by_split.is_empty() {
        anyhow::bail!("{} holds no pair of the bank «{}»", judged.display(), args.judged_bank);
    }
    if args.campaign.json {
        println!("{}", serde_json::to_string(&by_split)?);
    } else {
        print!("{}", crate::eval::judged::render(&args.judged_bank, &by_split));
    }
    Ok(())
}
