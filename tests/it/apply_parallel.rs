//! A run-level with many components runs them concurrently: the node start/finish events
//! overlap (measured as the largest number of nodes running at once, and the summed node
//! time over the level's wall time).

use crate::support;
use crate::support::apply as apply_util;

use std::time::Duration;

use minicvo::Mode;
use minicvo::apply::EventKind;

#[tokio::test]
async fn components_of_a_run_level_run_concurrently() {
    const COMPONENTS: usize = 12;
    const PER_COMPONENT: usize = 6;
    let conn = apply_util::connection(None).await;
    let admin = support::admin_client().await;
    let ns = support::test_namespace(&admin, "par").await;
    let mut files = Vec::new();
    for c in 0..COMPONENTS {
        for i in 0..PER_COMPONENT {
            files.push((
                format!("0000_40_comp{c:02}_{i:02}_config.yaml"),
                apply_util::config_map(&ns, &format!("c{c}-{i}"), "1", &[]),
            ));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    apply_util::write_payload(dir.path(), "1.0.0", &files);
    let plan = apply_util::plan(dir.path(), Mode::Updating);
    let (report, events) = apply_util::run(&conn, plan, &apply_util::options()).await;
    assert!(report.ok, "{:#?}", report.errors);
    assert_eq!(report.counts.created, COMPONENTS * PER_COMPONENT);

    // Node spans from the events.
    let mut spans = Vec::new();
    let mut open = std::collections::HashMap::new();
    for e in &events {
        match &e.kind {
            EventKind::NodeStarted { node, tasks, .. } if *tasks > 0 => {
                open.insert(*node, e.instant);
            }
            EventKind::NodeFinished { node, .. } => {
                if let Some(s) = open.remove(node) {
                    spans.push((s, e.instant));
                }
            }
            _ => {}
        }
    }
    assert_eq!(spans.len(), COMPONENTS);
    let mut points: Vec<(tokio::time::Instant, i32)> = spans
        .iter()
        .flat_map(|(s, e)| [(*s, 1), (*e, -1)])
        .collect();
    points.sort_by_key(|p| (p.0, p.1));
    let (mut running, mut max_running) = (0, 0);
    for (_, d) in points {
        running += d;
        max_running = max_running.max(running);
    }
    let first = spans.iter().map(|s| s.0).min().unwrap();
    let last = spans.iter().map(|s| s.1).max().unwrap();
    let wall = last - first;
    let busy: Duration = spans.iter().map(|(s, e)| *e - *s).sum();
    let overlap = busy.as_secs_f64() / wall.as_secs_f64();
    eprintln!(
        "run-level 40: {COMPONENTS} components, at most {max_running} nodes at once, \
         node time {:.0} ms over {:.0} ms wall (overlap factor {overlap:.1})",
        busy.as_secs_f64() * 1000.0,
        wall.as_secs_f64() * 1000.0
    );
    assert!(max_running >= 4, "at most {max_running} nodes ran at once");
    assert!(overlap > 2.0, "overlap factor {overlap:.2}");
    support::delete_namespace(&admin, &ns).await;
}
