//! What the pods need: the ConfigMaps, Secrets and ServiceAccounts followed for them, and what
//! a deletion does by the kubelet's rules ([`super::super::workload::Use`]): harm to a pod that
//! runs as a deleted ServiceAccount, a danger window for a running pod of the current template
//! whose ConfigMap or Secret is gone, a `started-without` harm for a pod that has to start
//! without one.

use tokio::time::Instant;

use super::super::generation::cannot_start;
use super::super::workload::Dependency;
use super::super::{DangerWindow, HarmKind, PodHarm};
use super::Loop;
use crate::manifest::ObjectId;

impl Loop {
    pub(super) fn windows_closed(&mut self, windows: Vec<DangerWindow>) {
        for w in windows {
            let why = w.closed_by.as_deref().unwrap_or("closed");
            let change = format!("pod {} danger window closed ({why}): {}", w.pod, w.what);
            self.pod_event(&w.workload, &w.pod, change);
            self.summary.danger_windows.push(w);
        }
    }

    /// Opens the danger windows of every workload whose current template needs `id`.
    pub(super) fn open_dangers(&mut self, id: &ObjectId) {
        let now = Instant::now();
        let opened: Vec<(ObjectId, String, String)> = self
            .pods
            .values_mut()
            .filter_map(|p| {
                p.open_danger(id, now)
                    .map(|(pod, what)| (p.id.clone(), pod, what))
            })
            .collect();
        for (workload, pod, what) in opened {
            tracing::warn!("simulated pod {pod}: danger window: {what}");
            let change = format!("pod {pod} danger window opened: {what}");
            self.pod_event(&workload, &pod, change);
        }
    }

    pub(super) fn dependency_present(&mut self, id: ObjectId) {
        let now = Instant::now();
        let mut closed = Vec::new();
        for p in self.pods.values_mut() {
            p.dependency_present(&id);
            closed.extend(p.close_dangers(Some(&id), now, &format!("{id} exists again")));
        }
        self.windows_closed(closed);
        self.deleted.remove(&id);
        self.present.insert(id);
    }

    pub(super) fn dependency_gone(&mut self, id: &ObjectId) {
        if !self.present.remove(id) {
            return;
        }
        self.deleted.insert(id.clone());
        let harms: Vec<PodHarm> = self
            .pods
            .values_mut()
            .flat_map(|p| p.dependency_gone(id))
            .collect();
        for h in harms {
            self.harm(h);
        }
        self.open_dangers(id);
    }

    /// Whether generation `i` of `id`, due to start, cannot because an object it needs was
    /// deleted (the kubelet's rule for volumes and the environment, the API server's for the
    /// ServiceAccount): it stays starting, and each such object is a `started-without` harm,
    /// once. A pull secret does not block (the kubelet pulls without it).
    pub(super) fn blocked(&mut self, id: &ObjectId, i: usize) -> bool {
        let deleted = &self.deleted;
        let g = &mut self.pods.get_mut(id).expect("known workload").generations[i];
        let missing: Vec<Dependency> = g
            .deps
            .iter()
            .filter(|d| d.used.blocks_start() && deleted.contains(&d.id()))
            .cloned()
            .collect();
        g.blocked = !missing.is_empty();
        let first: Vec<Dependency> = missing
            .into_iter()
            .filter(|d| g.reported.insert(format!("started without {:?}", d.id())))
            .collect();
        let harms: Vec<PodHarm> = first
            .iter()
            .map(|d| g.harm(id, HarmKind::StartedWithout, cannot_start(d), Some(d.id())))
            .collect();
        let blocked = g.blocked;
        for h in harms {
            self.harm(h);
        }
        blocked
    }
}
