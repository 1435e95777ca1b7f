//! `oraculo`: parse the command line, start logging, run, map the result to an exit code.

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    oraculo::logging::init();
    match oraculo::cli::run(oraculo::cli::Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", oraculo::cli::render_error(&err));
            ExitCode::FAILURE
        }
    }
}
