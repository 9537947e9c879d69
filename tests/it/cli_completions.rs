//! `minicvo completions bash|zsh|fish` and `minicvo man`: generated from the CLI definition,
//! so every subcommand and flag is in them.

use crate::support::cli as cli_support;

const SUBCOMMANDS: &[&str] = &[
    "apply",
    "plan",
    "render",
    "upgrade-plan",
    "lint",
    "diff",
    "simulate",
    "e2e",
    "status",
    "completions",
    "man",
];

#[test]
fn completions_cover_every_subcommand_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F _minicvo"),
        ("zsh", "#compdef minicvo"),
        ("fish", "complete -c minicvo"),
    ] {
        let r = cli_support::minicvo(&["completions", shell]);
        assert_eq!(r.code, 0, "{shell}: {}", r.stderr);
        assert!(r.stdout.contains(marker), "{shell}: no {marker:?}");
        for sub in SUBCOMMANDS {
            assert!(r.stdout.contains(sub), "{shell}: no subcommand {sub}");
        }
        assert!(
            r.stdout.contains("create-missing-namespaces"),
            "{shell}: apply's flags are missing"
        );
    }
}

#[test]
fn completions_reject_an_unknown_shell() {
    let r = cli_support::minicvo(&["completions", "tcsh"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("tcsh"), "{}", r.stderr);
}

#[test]
fn man_page_is_roff_listing_every_subcommand() {
    let r = cli_support::minicvo(&["man"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains(".TH minicvo 1"), "no title line");
    // Subcommands are listed as `minicvo-SUB(1)`, hyphens escaped for roff.
    for sub in SUBCOMMANDS {
        let entry = format!("minicvo\\-{}(1)", sub.replace('-', "\\-"));
        assert!(r.stdout.contains(&entry), "no {entry}");
    }
}
