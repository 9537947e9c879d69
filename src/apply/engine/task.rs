//! What the engine asks of a task runner ([`TaskRunner`]) and what a task gives back
//! ([`Done`] or [`TaskError`]).

use std::future::Future;
use std::sync::Arc;

use tokio::sync::Notify;

use tokio_util::sync::CancellationToken;

use crate::apply::events::{Outcome, TaskRef};
use crate::cluster::RequestError;

/// A finished task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done {
    /// What it did.
    pub outcome: Outcome,
    /// More about it.
    pub detail: Option<String>,
    /// Requests tried for the main call.
    pub attempts: u32,
}

impl Done {
    /// A result with one attempt and no detail.
    #[must_use]
    pub fn new(outcome: Outcome) -> Self {
        Done {
            outcome,
            detail: None,
            attempts: 1,
        }
    }

    /// Adds a detail.
    #[must_use]
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Sets the attempt count.
    #[must_use]
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts;
        self
    }
}

/// A task that did not succeed. `message` is the cause; the object is named by the
/// [`TaskRef`] that travels with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TaskError {
    /// The cause.
    pub message: String,
    /// Whether the run was stopped (Ctrl-C, timeout) rather than the task failing.
    pub interrupted: bool,
    /// Requests tried.
    pub attempts: u32,
    /// The request error behind the failure, when one is (typed: the server's code, reason
    /// and details).
    pub cause: Option<RequestError>,
}

impl TaskError {
    /// A failure.
    #[must_use]
    pub fn failed(message: impl Into<String>, attempts: u32) -> Self {
        TaskError {
            message: message.into(),
            interrupted: false,
            attempts,
            cause: None,
        }
    }

    /// A failure caused by `cause`.
    #[must_use]
    pub fn from_request(message: impl Into<String>, attempts: u32, cause: RequestError) -> Self {
        TaskError {
            cause: Some(cause),
            ..TaskError::failed(message, attempts)
        }
    }

    /// An interruption.
    #[must_use]
    pub fn interrupted(message: impl Into<String>) -> Self {
        TaskError {
            message: message.into(),
            interrupted: true,
            attempts: 0,
            cause: None,
        }
    }
}

/// The result of one task.
pub type TaskResult = Result<Done, TaskError>;

/// What a task runner gets for each task.
#[derive(Debug, Clone)]
pub struct TaskContext {
    /// The task.
    pub task: TaskRef,
    /// Fires when the run stops; waits must end, requests may finish.
    pub cancel: CancellationToken,
    /// Told when the task's write is done and only a wait remains (see
    /// [`TaskContext::written`]).
    pub(crate) written: Arc<Notify>,
}

impl TaskContext {
    /// A context for `task`, stopped by `cancel`.
    #[must_use]
    pub fn new(task: TaskRef, cancel: CancellationToken) -> Self {
        TaskContext {
            task,
            cancel,
            written: Arc::new(Notify::new()),
        }
    }

    /// Says that the task has written its object and what remains is a wait for the server
    /// (a CustomResourceDefinition's `Established`): the engine may then write the node's
    /// next CRD while this one is being established. A runner that never says so is waited
    /// for to the end, task after task.
    pub fn written(&self) {
        self.written.notify_one();
    }
}

/// Runs tasks for the executor.
pub trait TaskRunner: Send + Sync + 'static {
    /// Called when a node starts, before its first task: the CVO's ClusterOperator
    /// precreation pass. `tasks` are the node's task indices.
    fn start_node(&self, node: usize, tasks: &[usize]) -> impl Future<Output = ()> + Send;

    /// Runs one task (never an [`Action::Skip`](crate::plan::Action::Skip) one).
    fn run_task(&self, ctx: TaskContext) -> impl Future<Output = TaskResult> + Send;
}
