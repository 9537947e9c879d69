//! The CVO's task graph: nodes holding serial lists of tasks, with `ins`/`outs` edges, built by
//! splitting on Jobs and parallelizing with a break function. Node numbering, spacer nodes and
//! edge order follow the CVO's construction step for step, because the executor's priority is
//! the node index.

use serde::Serialize;

/// One graph node: tasks (indices into the plan's task list) run one after another.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Node {
    /// Nodes that must finish first.
    pub ins: Vec<usize>,
    /// Task indices, in execution order.
    pub tasks: Vec<usize>,
    /// Nodes that wait for this one.
    pub outs: Vec<usize>,
}

/// A step of a break function: nodes that may run in parallel.
pub type Step = Vec<Node>;

/// The task graph.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TaskGraph {
    /// Nodes, in the CVO's creation order.
    pub nodes: Vec<Node>,
}

impl TaskGraph {
    /// A graph of one node holding every task.
    #[must_use]
    pub fn new(tasks: Vec<usize>) -> Self {
        TaskGraph {
            nodes: vec![Node {
                tasks,
                ..Node::default()
            }],
        }
    }

    fn replace_in_of(&mut self, index: usize, with: usize) {
        let ins = self.nodes[index].ins.clone();
        for pos in ins {
            for o in &mut self.nodes[pos].outs {
                if *o == index {
                    *o = with;
                }
            }
        }
    }

    fn replace_out_of(&mut self, index: usize, with: usize) {
        let outs = self.nodes[index].outs.clone();
        for pos in outs {
            for i in &mut self.nodes[pos].ins {
                if *i == index {
                    *i = with;
                }
            }
        }
    }

    /// Splits every node at the first task for which `on` is true into before → task → after;
    /// nodes appended by the split are visited too, so later matches split again.
    pub fn split(&mut self, on: impl Fn(usize) -> bool) {
        let mut i = 0;
        while i < self.nodes.len() {
            let tasks = self.nodes[i].tasks.clone();
            if tasks.len() > 1
                && let Some(j) = tasks.iter().position(|&t| on(t))
            {
                if j > 0 {
                    let next = self.nodes.len();
                    self.nodes.push(Node {
                        ins: self.nodes[i].ins.clone(),
                        tasks: tasks[..j].to_vec(),
                        outs: vec![i],
                    });
                    self.replace_in_of(i, next);
                    self.nodes[i].ins = vec![next];
                }
                if j < tasks.len() - 1 {
                    let next = self.nodes.len();
                    self.nodes.push(Node {
                        ins: vec![i],
                        tasks: tasks[j + 1..].to_vec(),
                        outs: self.nodes[i].outs.clone(),
                    });
                    self.replace_out_of(i, next);
                    self.nodes[i].outs = vec![next];
                }
                self.nodes[i].tasks = vec![tasks[j]];
            }
            i += 1;
        }
    }

    fn bulk_add(&mut self, nodes: Vec<Node>, ins: &[usize]) -> Vec<usize> {
        let from = self.nodes.len();
        self.nodes.extend(nodes);
        let to = self.nodes.len();
        let next: Vec<usize> = (from..to).collect();
        if ins.is_empty() {
            return next;
        }
        for k in from..to {
            self.nodes[k].ins = ins.to_vec();
        }
        for &k in ins {
            for &n in &next {
                if !self.nodes[k].outs.contains(&n) {
                    self.nodes[k].outs.push(n);
                }
            }
        }
        next
    }

    /// Replaces every node whose tasks `breaker` splits into several steps or parallel nodes by
    /// a chain of steps, with an empty spacer node between two multi-node steps and an empty
    /// right anchor carrying the original out-edges. Nodes appended here are visited too.
    pub fn parallelize(&mut self, mut breaker: impl FnMut(&[usize]) -> Vec<Step>) {
        let mut i = 0;
        while i < self.nodes.len() {
            let results = breaker(&self.nodes[i].tasks);
            if results.is_empty() || (results.len() == 1 && results[0].len() == 1) {
                i += 1;
                continue;
            }
            self.nodes[i].tasks.clear();
            let out = std::mem::take(&mut self.nodes[i].outs);
            let mut ins = vec![i];
            for step in results {
                if step.is_empty() {
                    continue;
                }
                if ins.len() > 1 && step.len() > 1 {
                    ins = self.bulk_add(vec![Node::default()], &ins);
                }
                ins = self.bulk_add(step, &ins);
            }
            if !out.is_empty() {
                let next = self.nodes.len();
                self.nodes.push(Node {
                    ins: Vec::new(),
                    tasks: Vec::new(),
                    outs: out.clone(),
                });
                for &j in &out {
                    for x in &mut self.nodes[j].ins {
                        if *x == i {
                            *x = next;
                        }
                    }
                }
                for &j in &ins {
                    self.nodes[j].outs = vec![next];
                    self.nodes[next].ins.push(j);
                }
            }
            i += 1;
        }
    }

    /// Edges `[a, b]` (b starts only after a finished), in node order then out-edge order.
    #[must_use]
    pub fn edges(&self) -> Vec<[usize; 2]> {
        self.nodes
            .iter()
            .enumerate()
            .flat_map(|(i, n)| n.outs.iter().map(move |&o| [i, o]))
            .collect()
    }

    /// Whether the graph has no cycle.
    #[must_use]
    pub fn is_acyclic(&self) -> bool {
        self.topological_order().is_some()
    }

    /// Nodes in a topological order (Kahn, lowest index first), or `None` on a cycle.
    #[must_use]
    pub fn topological_order(&self) -> Option<Vec<usize>> {
        let n = self.nodes.len();
        let mut indegree: Vec<usize> = self.nodes.iter().map(|x| x.ins.len()).collect();
        let mut ready: std::collections::BTreeSet<usize> =
            (0..n).filter(|&i| indegree[i] == 0).collect();
        let mut order = Vec::with_capacity(n);
        while let Some(i) = ready.pop_first() {
            order.push(i);
            for &o in &self.nodes[i].outs {
                indegree[o] -= 1;
                if indegree[o] == 0 {
                    ready.insert(o);
                }
            }
        }
        (order.len() == n).then_some(order)
    }

    /// For every node, the set of nodes that must finish before it starts (transitively), as a
    /// bitset per node.
    #[must_use]
    pub fn ancestors(&self) -> Vec<Vec<u64>> {
        let n = self.nodes.len();
        let words = n.div_ceil(64).max(1);
        let mut anc = vec![vec![0u64; words]; n];
        if let Some(order) = self.topological_order() {
            for i in order {
                for &p in &self.nodes[i].ins {
                    let (src, dst) = if p < i {
                        let (a, b) = anc.split_at_mut(i);
                        (&a[p], &mut b[0])
                    } else {
                        let (a, b) = anc.split_at_mut(p);
                        (&b[0], &mut a[i])
                    };
                    for (d, s) in dst.iter_mut().zip(src.iter()) {
                        *d |= *s;
                    }
                    anc[i][p / 64] |= 1 << (p % 64);
                }
            }
        }
        anc
    }

    /// Depth of every node: the length of the longest chain of non-empty nodes before it.
    #[must_use]
    pub fn depths(&self) -> Vec<usize> {
        let mut depth = vec![0usize; self.nodes.len()];
        if let Some(order) = self.topological_order() {
            for i in order {
                let d = depth[i] + usize::from(!self.nodes[i].tasks.is_empty());
                for &o in &self.nodes[i].outs {
                    depth[o] = depth[o].max(d);
                }
            }
        }
        depth
    }
}
