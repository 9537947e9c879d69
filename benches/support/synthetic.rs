//! Synthetic release payloads for benchmarks: `count` object manifests spread over
//! `components` components and `run_levels` run-levels, written as multi-document YAML files
//! under `release-manifests/`, with `release-metadata`.
//!
//! The mix is what an operator ships: per component a Namespace (in its first file), then
//! ConfigMaps (40 %), Deployments (20 %), ServiceAccounts, Roles, RoleBindings (10 % each),
//! ClusterRoles and ClusterRoleBindings (5 % each). Every object carries the default profile's
//! include annotation, so the whole payload is included. Deployments mount a ConfigMap with
//! `defaultMode: 0644` (YAML 1.1 octal). Generation is deterministic: the same spec gives the
//! same bytes.
//!
//! Shared by `benches/load_plan.rs` and `examples/loadbench.rs` via `#[path]`.

#![allow(dead_code)]

use std::fmt::Write as _;
use std::io;
use std::path::Path;

/// What to generate.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Number of objects, Namespaces included.
    pub count: usize,
    /// Number of components (each gets its own namespace).
    pub components: usize,
    /// Number of run-levels; run-levels are 10, 20, 30, ...
    pub run_levels: usize,
    /// Documents per file.
    pub docs_per_file: usize,
    /// `spec.replicas` of the Deployments.
    pub replicas: u32,
    /// Prefix of every namespace and object name (`synth`), so that several payloads can be
    /// applied to one cluster side by side.
    pub prefix: String,
}

impl Spec {
    /// `count` objects over 20 components and 5 run-levels, 8 documents per file.
    #[must_use]
    pub fn new(count: usize) -> Self {
        Spec {
            count,
            components: 20,
            run_levels: 5,
            docs_per_file: 8,
            replicas: 1,
            prefix: "synth".to_string(),
        }
    }
}

/// The version written to `release-metadata`.
pub const VERSION: &str = "4.99.0-synthetic";

const KINDS: [&str; 20] = [
    "ConfigMap",
    "Deployment",
    "ServiceAccount",
    "ConfigMap",
    "Role",
    "RoleBinding",
    "ConfigMap",
    "Deployment",
    "ClusterRole",
    "ConfigMap",
    "ServiceAccount",
    "Deployment",
    "ConfigMap",
    "Role",
    "RoleBinding",
    "ConfigMap",
    "Deployment",
    "ClusterRoleBinding",
    "ConfigMap",
    "ConfigMap",
];

const ANNOTATIONS: &str = "  annotations:\n    include.release.openshift.io/self-managed-high-availability: \"true\"\n    include.release.openshift.io/single-node-developer: \"true\"\n";

fn document(out: &mut String, kind: &str, ns: &str, name: &str, replicas: u32) {
    match kind {
        "Namespace" => {
            let _ = write!(
                out,
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n{ANNOTATIONS}  labels:\n    openshift.io/cluster-monitoring: \"true\"\n"
            );
        }
        "ConfigMap" => {
            let _ = write!(
                out,
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n{ANNOTATIONS}data:\n  config.yaml: |\n    apiVersion: operator.openshift.io/v1alpha1\n    kind: GenericOperatorConfig\n    leaderElection:\n      namespace: {ns}\n    servingInfo:\n      bindAddress: 0.0.0.0:8443\n      certFile: /var/run/secrets/serving-cert/tls.crt\n  log-level: \"2\"\n  enabled: \"true\"\n"
            );
        }
        "ServiceAccount" => {
            let _ = write!(
                out,
                "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {name}\n  namespace: {ns}\n{ANNOTATIONS}"
            );
        }
        "Role" | "ClusterRole" => {
            let ns_line = if kind == "Role" {
                format!("  namespace: {ns}\n")
            } else {
                String::new()
            };
            let _ = write!(
                out,
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: {kind}\nmetadata:\n  name: {name}\n{ns_line}{ANNOTATIONS}rules:\n- apiGroups: [\"\"]\n  resources: [configmaps, secrets, services]\n  verbs: [get, list, watch, create, update, patch, delete]\n- apiGroups: [apps]\n  resources: [deployments, daemonsets]\n  verbs: [get, list, watch]\n- apiGroups: [coordination.k8s.io]\n  resources: [leases]\n  verbs: [get, create, update]\n"
            );
        }
        "RoleBinding" | "ClusterRoleBinding" => {
            let (ns_line, role) = if kind == "RoleBinding" {
                (format!("  namespace: {ns}\n"), "Role")
            } else {
                (String::new(), "ClusterRole")
            };
            let _ = write!(
                out,
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: {kind}\nmetadata:\n  name: {name}\n{ns_line}{ANNOTATIONS}roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: {role}\n  name: {name}\nsubjects:\n- kind: ServiceAccount\n  name: {name}\n  namespace: {ns}\n"
            );
        }
        "Deployment" => {
            let _ = write!(
                out,
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {ns}\n{ANNOTATIONS}  labels:\n    app: {name}\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels:\n      app: {name}\n  strategy:\n    type: RollingUpdate\n  template:\n    metadata:\n      labels:\n        app: {name}\n      annotations:\n        target.workload.openshift.io/management: '{{\"effect\": \"PreferredDuringScheduling\"}}'\n    spec:\n      priorityClassName: system-cluster-critical\n      nodeSelector:\n        node-role.kubernetes.io/master: \"\"\n      tolerations:\n      - key: node-role.kubernetes.io/master\n        operator: Exists\n        effect: NoSchedule\n      containers:\n      - name: operator\n        image: quay.io/openshift/origin-synthetic:latest\n        imagePullPolicy: IfNotPresent\n        command: [/usr/bin/operator]\n        args: [\"--config=/etc/config/config.yaml\", \"-v=2\"]\n        env:\n        - name: POD_NAME\n          valueFrom:\n            fieldRef:\n              fieldPath: metadata.name\n        - name: RELEASE_VERSION\n          value: \"0.0.1-snapshot\"\n        ports:\n        - containerPort: 8443\n          name: metrics\n        resources:\n          requests:\n            cpu: 10m\n            memory: 50Mi\n        volumeMounts:\n        - name: config\n          mountPath: /etc/config\n        terminationMessagePolicy: FallbackToLogsOnError\n      volumes:\n      - name: config\n        configMap:\n          name: {name}\n          defaultMode: 0644\n"
            );
        }
        other => unreachable!("kind {other}"),
    }
}

/// Writes the payload under `root` (created if missing). Returns the number of files written.
///
/// # Errors
/// Any I/O error.
pub fn write(root: &Path, spec: &Spec) -> io::Result<usize> {
    let dir = root.join("release-manifests");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("release-metadata"),
        format!("{{\"kind\": \"cincinnati-metadata-v0\", \"version\": \"{VERSION}\"}}\n"),
    )?;
    let comps = spec.components.max(1);
    let levels = spec.run_levels.max(1);
    // Objects per (run-level, component) block; the first block of each component starts
    // with its Namespace.
    let blocks = comps * levels;
    let mut files = 0;
    let mut made = 0usize;
    for b in 0..blocks {
        let level = (b / comps + 1) * 10;
        let c = b % comps;
        let comp = format!("c{c:02}");
        let ns = format!("{}-{comp}", spec.prefix);
        let in_block = spec.count / blocks + usize::from(b < spec.count % blocks);
        let mut docs: Vec<String> = Vec::with_capacity(in_block);
        for j in 0..in_block {
            let mut d = String::with_capacity(2048);
            if b < comps && j == 0 {
                document(&mut d, "Namespace", &ns, "", spec.replicas);
            } else {
                let kind = KINDS[(made + j) % KINDS.len()];
                let name = format!("{}-{comp}-{:06}", spec.prefix, made + j);
                document(&mut d, kind, &ns, &name, spec.replicas);
            }
            docs.push(d);
        }
        made += in_block;
        for (f, chunk) in docs.chunks(spec.docs_per_file.max(1)).enumerate() {
            let name = format!("0000_{level}_synth-{comp}_{f:04}_objects.yaml");
            std::fs::write(dir.join(name), chunk.join("---\n"))?;
            files += 1;
        }
    }
    Ok(files)
}
