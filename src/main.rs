//! The `minicvo` command: parses arguments, resolves them into library configuration, runs one
//! command, and maps the outcome to an exit code (0 ok, 1 failure or invalid payload, 2 usage).

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    cli::init_logging(args.verbose, args.quiet);
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(cli::exit_code_for(&e))
        }
    }
}
