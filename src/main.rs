//! The `minicvo` command: parses arguments, resolves them into library configuration, runs one
//! command, and maps the outcome to an exit code (0 ok, 1 failure or invalid payload, 2 usage).

mod cli;

use std::process::ExitCode;

use clap::Parser;

/// mimalloc (version 2, without transparent huge pages): a whole payload is hundreds of
/// thousands of small allocations, which it serves faster than glibc's malloc for about the
/// same peak memory (BENCHMARKS.md §1).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    cli::init_logging(args.verbose, args.quiet, args.log_format);
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", error_text(&e));
            ExitCode::from(cli::exit_code_for(&e))
        }
    }
}

/// `e` and its causes, each said once: `{e:#}` would repeat a cause that the message already
/// shows (a `LoadError::Io` prints its `io::Error`, which is also its source).
fn error_text(e: &anyhow::Error) -> String {
    let mut text = e.to_string();
    for cause in e.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}
