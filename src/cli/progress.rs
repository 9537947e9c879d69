//! Progress on stderr: a bar (tasks done of total, the run-levels and components running, who
//! a wait is blocked on) when stderr is a terminal, plain timestamped lines otherwise.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use minicvo::apply::events::{ApplyEvent, ApplyObserver, EventKind, Outcome, TaskEnd};

/// How much to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbosity {
    /// Nothing.
    Quiet,
    /// Nodes, waits, deletes, retries, failures (and every task in a dry run).
    Normal,
    /// Also every task.
    Verbose,
}

struct State {
    running: BTreeMap<usize, (Option<String>, Vec<String>)>,
    waits: BTreeMap<usize, String>,
    dry_run: bool,
}

/// The progress display.
pub struct Progress {
    bar: Option<ProgressBar>,
    verbosity: Verbosity,
    state: Mutex<State>,
}

impl Progress {
    /// A bar when `terminal` (and not quiet), lines otherwise.
    #[must_use]
    pub fn new(terminal: bool, verbosity: Verbosity) -> Self {
        let bar = (terminal && verbosity != Verbosity::Quiet).then(|| {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{elapsed:>4} [{bar:25}] {pos}/{len} {wide_msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Progress {
            bar,
            verbosity,
            state: Mutex::new(State {
                running: BTreeMap::new(),
                waits: BTreeMap::new(),
                dry_run: false,
            }),
        }
    }

    /// Removes the bar (before the summary is printed).
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    fn line(&self, elapsed: Duration, text: &str) {
        if self.verbosity == Verbosity::Quiet {
            return;
        }
        let text = format!("[{:>7.2}s] {text}", elapsed.as_secs_f64());
        match &self.bar {
            Some(bar) => bar.println(text),
            None => {
                let _ = writeln!(std::io::stderr().lock(), "{text}");
            }
        }
    }

    fn refresh(&self, s: &State) {
        let Some(bar) = &self.bar else { return };
        // "level 50: a, b; level 60: c"
        let mut levels: Vec<(String, Vec<String>)> = Vec::new();
        for (level, comps) in s.running.values() {
            let l = level.clone().unwrap_or_else(|| "-".into());
            let i = match levels.iter().position(|(x, _)| *x == l) {
                Some(i) => i,
                None => {
                    levels.push((l, Vec::new()));
                    levels.len() - 1
                }
            };
            for c in comps {
                if !levels[i].1.contains(c) {
                    levels[i].1.push(c.clone());
                }
            }
        }
        let levels: Vec<String> = levels
            .into_iter()
            .map(|(l, comps)| format!("level {l}: {}", comps.join(", ")))
            .collect();
        let mut msg = levels.join("; ");
        if !s.waits.is_empty() {
            let waits: Vec<&str> = s.waits.values().map(String::as_str).collect();
            msg.push_str(" | waiting on ");
            msg.push_str(&waits.join("; "));
        }
        bar.set_message(msg);
    }
}

impl ApplyObserver for Progress {
    #[allow(clippy::too_many_lines)]
    fn on_event(&self, e: &ApplyEvent) {
        let mut s = self.state.lock().expect("progress lock");
        match &e.kind {
            EventKind::RunStarted {
                version,
                mode,
                tasks,
                nodes,
                parallelism,
                dry_run,
            } => {
                s.dry_run = *dry_run;
                if let Some(bar) = &self.bar {
                    bar.set_length(*tasks as u64);
                }
                self.line(
                    e.elapsed,
                    &format!(
                        "{} {} in {mode} mode: {tasks} tasks in {nodes} nodes, parallelism {parallelism}",
                        if *dry_run { "dry-run applying" } else { "applying" },
                        version.as_deref().unwrap_or("an unversioned payload"),
                    ),
                );
            }
            EventKind::NodeStarted {
                node,
                run_level,
                components,
                tasks,
            } if *tasks > 0 => {
                s.running
                    .insert(*node, (run_level.clone(), components.clone()));
                self.refresh(&s);
                if self.bar.is_none() {
                    self.line(
                        e.elapsed,
                        &format!(
                            "node {node} started: run-level {} {} ({tasks} tasks)",
                            run_level.as_deref().unwrap_or("-"),
                            components.join(",")
                        ),
                    );
                }
            }
            EventKind::NodeFinished {
                node, ok, duration, ..
            } => {
                if s.running.remove(node).is_none() {
                    return;
                }
                self.refresh(&s);
                if self.bar.is_none() || !ok {
                    self.line(
                        e.elapsed,
                        &format!(
                            "node {node} {} after {:.2}s",
                            if *ok { "finished" } else { "failed" },
                            duration.as_secs_f64()
                        ),
                    );
                }
            }
            EventKind::TaskFinished { .. } => {
                let Some(TaskEnd {
                    task,
                    outcome,
                    message,
                }) = e.kind.task_end()
                else {
                    return;
                };
                if let Some(bar) = &self.bar {
                    bar.inc(1);
                }
                let show = match outcome {
                    Outcome::Failed | Outcome::Interrupted => true,
                    Outcome::Deleted | Outcome::WouldWait | Outcome::NotServed => true,
                    _ => self.verbosity == Verbosity::Verbose || (s.dry_run && outcome.changed()),
                };
                if show {
                    let mut text = format!("{outcome} {}", task.label());
                    if let Some(d) = message {
                        text.push_str(": ");
                        text.push_str(d);
                    }
                    self.line(e.elapsed, &text);
                }
            }
            EventKind::Retrying {
                task,
                retry,
                delay,
                error,
            } => self.line(
                e.elapsed,
                &format!(
                    "retry {retry} of {} in {:.1}s: {error}",
                    task.label(),
                    delay.as_secs_f64()
                ),
            ),
            EventKind::WaitStarted {
                task,
                operator,
                blocking,
                ..
            }
            | EventKind::WaitProgress {
                task,
                operator,
                blocking,
                ..
            } => {
                let text = format!("{operator}: {}", blocking.join("; "));
                s.waits.insert(task.id, text.clone());
                self.refresh(&s);
                self.line(e.elapsed, &format!("waiting on clusteroperator {text}"));
            }
            EventKind::WaitDone {
                task,
                operator,
                waited,
            } => {
                s.waits.remove(&task.id);
                self.refresh(&s);
                self.line(
                    e.elapsed,
                    &format!(
                        "clusteroperator {operator} is done after {:.2}s",
                        waited.as_secs_f64()
                    ),
                );
            }
            EventKind::CrdEstablished { name, waited, .. }
                if self.verbosity == Verbosity::Verbose =>
            {
                self.line(
                    e.elapsed,
                    &format!("{name} established ({:.2}s)", waited.as_secs_f64()),
                );
            }
            EventKind::Warning { task, message } => self.line(
                e.elapsed,
                &format!(
                    "warning{}: {message}",
                    task.as_ref()
                        .map(|t| format!(" for {}", t.label()))
                        .unwrap_or_default()
                ),
            ),
            EventKind::Stopping { reason } => self.line(
                e.elapsed,
                &format!(
                    "{}: no new work starts; waiting for requests in flight",
                    match reason {
                        minicvo::apply::events::StopReason::Interrupted => "interrupted",
                        minicvo::apply::events::StopReason::TimedOut => "timed out",
                    }
                ),
            ),
            _ => {}
        }
    }
}
