//! A workload's simulated pods: its generations, their state, and which pod acts for it.

use std::collections::HashSet;

use serde_json::Value;
use tokio::time::Instant;

use super::elector::Elector;
use super::identity::{Identity, Rights};
use super::workload::{Dependency, Rollout, Use};
use super::{Acting, DangerWindow, HarmKind, PodHarm, Timing};
use crate::manifest::ObjectId;
use crate::rbac::Right;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    Starting,
    Running,
    Available,
    /// Told to stop: it releases its lease next.
    Stopping,
    /// Its lease released, it still runs until `due` (a terminating pod's grace period, the
    /// `stop` timing): it acts for nobody and sends no request, but its containers and volumes
    /// are still there.
    Terminating,
}

pub(super) struct Generation {
    pub(super) pod: String,
    pub(super) hash: u64,
    pub(super) identity: Identity,
    pub(super) deps: Vec<Dependency>,
    pub(super) state: State,
    /// When it starts running (Starting) or becomes available (Running).
    pub(super) due: Instant,
    pub(super) rights: Option<Rights>,
    /// Dependencies seen present while it ran.
    pub(super) seen: HashSet<ObjectId>,
    /// Harms already reported (one event per refused request or lost right set).
    pub(super) reported: HashSet<String>,
    pub(super) elects: bool,
    pub(super) elector: Elector,
    /// Due to start, but an object it needs was deleted: it waits for it (no timer).
    pub(super) blocked: bool,
    /// It started running (a pod that never ran does not stop or terminate).
    pub(super) ran: bool,
}

impl Generation {
    pub(super) fn live(&self) -> bool {
        matches!(self.state, State::Running | State::Available)
    }

    /// Whether its containers still run: live, or terminating.
    pub(super) fn running(&self) -> bool {
        self.live() || self.state == State::Terminating
    }

    /// Tells it to stop, unless it is terminating already.
    pub(super) fn stop(&mut self) {
        if self.state != State::Terminating {
            self.state = State::Stopping;
        }
    }
}

/// An open danger window: a pod of the workload's current template runs, and an object that
/// template needs is deleted, so no pod of it could start.
pub(super) struct OpenDanger {
    /// A running pod of the template.
    pub(super) pod: String,
    /// What is gone.
    pub(super) dependency: Dependency,
    /// Since when.
    pub(super) from: Instant,
}

pub(super) struct Pods {
    pub(super) id: ObjectId,
    pub(super) rollout: Rollout,
    pub(super) timing: Timing,
    pub(super) hash: Option<u64>,
    pub(super) generations: Vec<Generation>,
    pub(super) count: u32,
    /// The rules the newest started generation had at start.
    pub(super) last_rules: Option<(String, Rights)>,
    /// An open leaderless time: the leader that failed to renew and since when.
    pub(super) gap: Option<(String, Instant)>,
    /// The workload as last seen.
    pub(super) live: Value,
    /// Open danger windows of the current template, one per deleted object.
    pub(super) dangers: Vec<OpenDanger>,
}

impl Generation {
    /// A harm this pod suffered.
    pub(super) fn harm(
        &self,
        workload: &ObjectId,
        kind: HarmKind,
        what: String,
        object: Option<ObjectId>,
    ) -> PodHarm {
        PodHarm {
            workload: workload.clone(),
            pod: self.pod.clone(),
            identity: self.identity.clone(),
            kind,
            what,
            object,
        }
    }
}

/// `Kind namespace/name` of a dependency.
pub(super) fn describe_dependency(dep: &Dependency) -> String {
    format!("{} {}/{}", dep.kind, dep.namespace, dep.name)
}

/// What is missing in a danger window, and what it would stop.
fn danger_what(dep: &Dependency) -> String {
    let stops = match dep.used {
        Use::PullSecret => "a new pod may fail to pull its image",
        Use::Volume => "a new pod of its template could not start",
        Use::Env | Use::Account => {
            "a new pod of its template, or a restart of its container, could not start"
        }
    };
    format!("{} ({}): {stops}", describe_dependency(dep), dep.via)
}

/// Why a pod that has to start cannot while `dep` is deleted.
pub(super) fn cannot_start(dep: &Dependency) -> String {
    let why = match dep.used {
        Use::Volume => "the kubelet cannot set up the volume, so the pod does not start",
        Use::Env | Use::PullSecret => {
            "the kubelet cannot create the container (CreateContainerConfigError)"
        }
        Use::Account => "the API server refuses to create the pod",
    };
    format!(
        "{} ({}) was deleted: {why}",
        describe_dependency(dep),
        dep.via
    )
}

/// Whether `rights` allow every verb of `verbs` on the Lease `name` of their namespace.
pub(super) fn may_lease(rights: &Rights, name: &str, verbs: &[&str]) -> bool {
    verbs.iter().all(|verb| {
        let right = Right::Resource {
            verb: (*verb).into(),
            group: "coordination.k8s.io".into(),
            resource: "leases".into(),
            name: Some(name.into()),
        };
        rights.rules.iter().any(|r| r.grants(&right))
    })
}

impl Pods {
    /// `id` exists (again): live pods that need it have now seen it.
    pub(super) fn dependency_present(&mut self, id: &ObjectId) {
        for g in self.generations.iter_mut().filter(|g| g.live()) {
            if g.deps.iter().any(|d| &d.id() == id) {
                g.seen.insert(id.clone());
            }
        }
    }

    /// `id` is gone: what it does to the pods that still run and saw it. A pod that runs as it
    /// (a ServiceAccount) and still sends requests (not terminating) is harmed: its token is
    /// rejected. A running or terminating pod keeps the ConfigMaps and Secrets it mounts or
    /// took its environment from (see [`Use`]): no harm, a danger window at most
    /// ([`Pods::open_danger`]).
    pub(super) fn dependency_gone(&mut self, id: &ObjectId) -> Vec<PodHarm> {
        let mut harms = Vec::new();
        for g in self.generations.iter_mut().filter(|g| g.running()) {
            if !g.seen.remove(id) {
                continue;
            }
            let sends_requests = g.live();
            if let Some(dep) = g
                .deps
                .iter()
                .find(|d| &d.id() == id && d.used == Use::Account && sends_requests)
            {
                let what = format!(
                    "{} ({}): its token is rejected",
                    describe_dependency(dep),
                    dep.via
                );
                harms.push(g.harm(
                    &self.id,
                    HarmKind::DependencyMissing,
                    what,
                    Some(id.clone()),
                ));
            }
        }
        harms
    }

    /// The running pod of the current template, when one runs.
    fn current_running(&self) -> Option<&Generation> {
        let hash = self.hash?;
        self.generations
            .iter()
            .rev()
            .find(|g| g.hash == hash && g.live())
    }

    /// `id` is deleted (or found deleted by a pod that just started): opens a danger window when
    /// a pod of the current template runs and that template needs `id` in a way a running pod
    /// survives (not its ServiceAccount, which is harm). Returns the pod and what it needs.
    pub(super) fn open_danger(&mut self, id: &ObjectId, now: Instant) -> Option<(String, String)> {
        if self.dangers.iter().any(|d| &d.dependency.id() == id) {
            return None;
        }
        let g = self.current_running()?;
        let dep = g
            .deps
            .iter()
            .find(|d| &d.id() == id && d.used != Use::Account)?
            .clone();
        let opened = (g.pod.clone(), danger_what(&dep));
        self.dangers.push(OpenDanger {
            pod: g.pod.clone(),
            dependency: dep,
            from: now,
        });
        Some(opened)
    }

    /// Closes the open danger windows on `id` (every one when `None`) because of `why`.
    pub(super) fn close_dangers(
        &mut self,
        id: Option<&ObjectId>,
        now: Instant,
        why: &str,
    ) -> Vec<DangerWindow> {
        let (closed, open): (Vec<OpenDanger>, Vec<OpenDanger>) = std::mem::take(&mut self.dangers)
            .into_iter()
            .partition(|d| id.is_none_or(|id| &d.dependency.id() == id));
        self.dangers = open;
        closed
            .into_iter()
            .map(|d| self.window(d, Some((now, why.to_string()))))
            .collect()
    }

    /// A danger window of this workload, closed at `closed` (time and why) or still open.
    pub(super) fn window(&self, d: OpenDanger, closed: Option<(Instant, String)>) -> DangerWindow {
        let (to, closed_by) = closed.map_or((None, None), |(t, why)| (Some(t), Some(why)));
        DangerWindow {
            workload: self.id.clone(),
            pod: d.pod,
            what: danger_what(&d.dependency),
            object: d.dependency.id(),
            from: d.from,
            to,
            closed_by,
        }
    }

    /// The pod acting for the workload: its leader, or, when no live pod may elect, its
    /// newest live pod; `None` while an election is pending or nothing runs.
    pub(super) fn acting(&self) -> Option<Acting> {
        let live: Vec<&Generation> = self.generations.iter().filter(|g| g.live()).collect();
        let chosen = live
            .iter()
            .find(|g| g.elector.leader)
            .copied()
            .or_else(|| {
                if live.iter().any(|g| g.elects) {
                    None
                } else {
                    live.last().copied()
                }
            })?;
        Some(Acting {
            pod: chosen.pod.clone(),
            identity: chosen.identity.clone(),
            template_hash: chosen.hash,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::simulate::pods::workload;

    fn generation(pod: &str, hash: u64, state: State, template: &Value) -> Generation {
        let now = Instant::now();
        Generation {
            pod: pod.into(),
            hash,
            identity: Identity {
                namespace: "ns".into(),
                name: workload::service_account(template),
            },
            deps: workload::dependencies(template, "ns"),
            state,
            due: now,
            rights: None,
            seen: HashSet::new(),
            reported: HashSet::new(),
            elects: false,
            elector: Elector::new(now),
            blocked: false,
            ran: state != State::Starting,
        }
    }

    fn pods(generations: Vec<Generation>, current: u64) -> Pods {
        Pods {
            id: ObjectId {
                group: "apps".into(),
                kind: "Deployment".into(),
                namespace: Some("ns".into()),
                name: "op".into(),
            },
            rollout: Rollout::Overlap,
            timing: Timing::default(),
            hash: Some(current),
            generations,
            count: 2,
            last_rules: None,
            gap: None,
            live: Value::Null,
            dangers: Vec::new(),
        }
    }

    fn object(kind: &str, name: &str) -> ObjectId {
        ObjectId {
            group: String::new(),
            kind: kind.into(),
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    fn template(config: &str) -> Value {
        json!({"spec": {
            "serviceAccountName": "op",
            "volumes": [{"name": "cfg", "configMap": {"name": config}}],
            "containers": [{"name": "main", "env": [
                {"name": "X", "valueFrom": {"secretKeyRef": {"name": "env", "key": "x"}}}]}]
        }})
    }

    #[test]
    fn a_running_pod_keeps_its_configmaps_and_secrets_but_not_its_account() {
        let mut p = pods(
            vec![generation("op#1", 1, State::Available, &template("cfg"))],
            1,
        );
        let (cfg, env, sa) = (
            object("ConfigMap", "cfg"),
            object("Secret", "env"),
            object("ServiceAccount", "op"),
        );
        for id in [&cfg, &env, &sa] {
            p.dependency_present(id);
        }
        assert!(p.dependency_gone(&cfg).is_empty(), "a mounted ConfigMap");
        assert!(p.dependency_gone(&env).is_empty(), "an env Secret");
        let harms = p.dependency_gone(&sa);
        assert_eq!(harms.len(), 1, "{harms:?}");
        assert_eq!(harms[0].kind, HarmKind::DependencyMissing);
        assert_eq!(harms[0].pod, "op#1");
        assert_eq!(harms[0].object.as_ref(), Some(&sa));
        assert!(
            harms[0].what.contains("token is rejected"),
            "{}",
            harms[0].what
        );
        // Once: the pod no longer has it.
        assert!(p.dependency_gone(&sa).is_empty());
    }

    #[test]
    fn danger_windows_open_for_the_current_template_only_and_close_once() {
        let start = Instant::now();
        let mut p = pods(
            vec![
                generation("op#1", 1, State::Available, &template("cfg-old")),
                generation("op#2", 2, State::Running, &template("cfg-new")),
            ],
            2,
        );
        // What only the old template used: its pods never start again.
        assert_eq!(p.open_danger(&object("ConfigMap", "cfg-old"), start), None);
        // The account's deletion is harm, not a window.
        assert_eq!(p.open_danger(&object("ServiceAccount", "op"), start), None);
        let (pod, what) = p
            .open_danger(&object("ConfigMap", "cfg-new"), start)
            .expect("a window");
        assert_eq!(pod, "op#2");
        assert!(
            what.starts_with("ConfigMap ns/cfg-new (volume cfg): a new pod"),
            "{what}"
        );
        assert_eq!(p.open_danger(&object("ConfigMap", "cfg-new"), start), None);
        let env = p.open_danger(&object("Secret", "env"), start).expect("env");
        assert!(env.1.contains("or a restart of its container"), "{}", env.1);

        let closed = p.close_dangers(Some(&object("Secret", "env")), start, "back");
        assert_eq!(closed.len(), 1);
        assert_eq!(closed[0].closed_by.as_deref(), Some("back"));
        let closed = p.close_dangers(None, start, "moved");
        assert_eq!(closed.len(), 1);
        assert_eq!(closed[0].object, object("ConfigMap", "cfg-new"));
        assert_eq!(closed[0].to, Some(start));
        assert!(p.dangers.is_empty());
    }

    #[test]
    fn a_pod_that_cannot_start_says_why() {
        let deps = workload::dependencies(&template("cfg"), "ns");
        let why: Vec<String> = deps.iter().map(cannot_start).collect();
        assert_eq!(
            why,
            [
                "ConfigMap ns/cfg (volume cfg) was deleted: the kubelet cannot set up the \
                 volume, so the pod does not start",
                "Secret ns/env (env X of container main) was deleted: the kubelet cannot \
                 create the container (CreateContainerConfigError)",
                "ServiceAccount ns/op (serviceAccountName) was deleted: the API server \
                 refuses to create the pod",
            ]
        );
    }
}
