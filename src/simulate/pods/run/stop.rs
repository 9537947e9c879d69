//! Pods that stop: a leader releases its lease, and a pod that ran terminates for its `stop`
//! time (still running, acting for nobody) before it is gone.

use tokio::time::Instant;

use super::super::HarmKind;
use super::super::generation::{Generation, State};
use super::{Loop, forbidden};
use crate::manifest::ObjectId;

impl Loop {
    /// Stops the generations marked `Stopping`: leaders release their lease (a refusal there
    /// was already counted when renewing failed); a pod that ran then terminates for its `stop`
    /// timing when `linger`, and is gone after. Ends the terminations that are due.
    pub(super) async fn stop_marked(&mut self, id: &ObjectId, linger: bool) {
        let Some(p) = self.pods.get_mut(id) else {
            return;
        };
        let now = Instant::now();
        let (stopping, kept): (Vec<Generation>, Vec<Generation>) =
            std::mem::take(&mut p.generations)
                .into_iter()
                .partition(|g| {
                    g.state == State::Stopping || (g.state == State::Terminating && g.due <= now)
                });
        p.generations = kept;
        if stopping.is_empty() {
            return;
        }
        // A released lease is free at once: the candidates try now.
        for g in &mut p.generations {
            if g.elects {
                g.elector.next = g.elector.next.min(now);
            }
        }
        let workload = p.id.clone();
        let grace = p.timing.stop;
        let mut terminating = Vec::new();
        for mut g in stopping {
            if g.state == State::Terminating {
                self.pod_event(&workload, &g.pod, format!("pod {} stopped", g.pod));
                continue;
            }
            if let Err(e) = g
                .elector
                .release(&self.client, &g.identity, &workload)
                .await
            {
                // The lease stays with a pod that is gone until it expires.
                if let Some(p) = self.pods.get_mut(&workload)
                    && p.gap.is_none()
                {
                    p.gap = Some((g.pod.clone(), Instant::now()));
                }
                if forbidden(&e) {
                    let what = format!(
                        "update leases.coordination.k8s.io {}/{} (releasing it on stop)",
                        workload.namespace.as_deref().unwrap_or_default(),
                        workload.name
                    );
                    self.harm(g.harm(&workload, HarmKind::Refused, what, None));
                }
            }
            if !g.ran {
                continue;
            }
            if linger && !grace.is_zero() {
                g.elector.leader = false;
                g.state = State::Terminating;
                g.due = now + grace;
                let change = format!("pod {} terminating (its lease released)", g.pod);
                self.pod_event(&workload, &g.pod, change);
                terminating.push(g);
            } else {
                self.pod_event(&workload, &g.pod, format!("pod {} stopped", g.pod));
            }
        }
        // The oldest first: the generations' order is their age.
        if let Some(p) = self.pods.get_mut(id) {
            terminating.append(&mut p.generations);
            p.generations = terminating;
        }
    }
}
