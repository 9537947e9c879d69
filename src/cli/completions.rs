//! `minicvo completions SHELL` and `minicvo man`: shell completions and a man page, both
//! generated from the CLI definition, printed on stdout (nothing installs them).

use std::io::Write as _;
use std::process::ExitCode;

use clap::CommandFactory as _;

use super::Cli;

/// Arguments of `minicvo completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Shells with completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    /// Bash (source the output, or put it in `~/.local/share/bash-completion/completions/minicvo`).
    Bash,
    /// Zsh (put the output in a directory of `$fpath` as `_minicvo`).
    Zsh,
    /// Fish (put the output in `~/.config/fish/completions/minicvo.fish`).
    Fish,
}

/// Arguments of `minicvo man`.
#[derive(Debug, clap::Args)]
pub struct ManArgs {}

/// Prints the completion script for the shell.
///
/// # Errors
/// Writing stdout failed.
pub fn completions(a: &CompletionsArgs) -> anyhow::Result<ExitCode> {
    let shell = match a.shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "minicvo", &mut buf);
    print(&buf)
}

/// Prints the man page (roff; view with `man -l -`).
///
/// # Errors
/// Rendering or writing stdout failed.
pub fn man(_: &ManArgs) -> anyhow::Result<ExitCode> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut buf)?;
    print(&buf)
}

fn print(bytes: &[u8]) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        r => r?,
    }
    Ok(ExitCode::SUCCESS)
}
