//! Locks that serialize the tests which cannot share a plane with each other, and the second
//! plane that lets two of them run at once.
//!
//! A payload with fixed object names (the bundled samples of `payload/`, the corpora of
//! `../shared/payloads`: cluster-scoped CRDs, namespaces, ClusterOperators, ClusterVersion
//! `version`) is installed by one test at a time per plane. Each such test holds the plane's
//! lock, an exclusive lock on a file in the temp dir named after the plane's kubeconfig, so it
//! holds across test binaries and processes (e.g. nextest) and does not serialize tests on
//! other planes.
//!
//! - [`fixed_names_lock`]: the shared plane's lock, for tests that reach the shared plane
//!   through `support::admin_client` and the other helpers of `$MINICVO_TEST_KUBECONFIG`.
//! - [`fixed_names_plane`]: the first free plane of the pool — the second plane of
//!   `$MINICVO_TEST_SECOND_KUBECONFIG` when `hack/test.sh` started it, then the shared plane — with
//!   its kubeconfig and clients ([`FixedPlane`]); the test must use those and nothing of
//!   `$MINICVO_TEST_KUBECONFIG`.
//!
//! A test that waited [`LOCK_WAIT_REPORTED`] or more says so on the run's stderr (uncaptured),
//! with the holder's name. With `$MINICVO_TEST_LOCK_LOG` set, every release appends a line
//! `PREFIX PLANE TEST WAITED_S HELD_S` (tab-separated) to that file, from which `hack/test.sh`
//! sums each lock's busy time.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::Client;

/// The environment variable naming the second plane of the fixed-names pool (optional).
pub const SECOND_KUBECONFIG_ENV: &str = "MINICVO_TEST_SECOND_KUBECONFIG";
/// The environment variable naming the file the lock releases are logged to (optional).
pub const LOCK_LOG_ENV: &str = "MINICVO_TEST_LOCK_LOG";
/// A wait for a lock this long is reported on the test run's own stderr (not captured).
pub const LOCK_WAIT_REPORTED: Duration = Duration::from_secs(20);

const FIXED_NAMES: &str = "minicvo-fixed-names";

/// A held lock: released when dropped (and then logged, see the module docs).
#[derive(Debug)]
pub struct LockGuard {
    _file: File,
    prefix: String,
    plane: String,
    holder: String,
    waited: Duration,
    since: Instant,
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        use std::io::Write;
        let Some(log) = std::env::var_os(LOCK_LOG_ENV) else {
            return;
        };
        let line = format!(
            "{}\t{}\t{}\t{:.1}\t{:.1}\n",
            self.prefix,
            self.plane,
            self.holder,
            self.waited.as_secs_f64(),
            self.since.elapsed().as_secs_f64()
        );
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

fn lock_path(prefix: &str, key: &OsStr) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    // hack/test.sh gives the run a directory of its own, removed with the planes.
    let dir =
        std::env::var_os("MINICVO_TEST_LOCK_DIR").map_or_else(std::env::temp_dir, PathBuf::from);
    dir.join(format!("{prefix}-{:016x}.lock", h.finish()))
}

fn open(path: &Path) -> File {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("cannot open lock file {}: {e}", path.display()))
}

fn holder_of(file: &mut File) -> String {
    use std::io::{Read, Seek};
    let mut holder = String::new();
    let _ = file.rewind();
    let _ = file.read_to_string(&mut holder);
    match holder.trim() {
        "" => "?".into(),
        h => h.to_string(),
    }
}

/// Locks the first of `keys`' lock files to be free (blocking); returns its index and file.
fn lock_first(prefix: &str, keys: &[OsString]) -> (usize, File) {
    let paths: Vec<PathBuf> = keys.iter().map(|k| lock_path(prefix, k)).collect();
    let mut files: Vec<File> = paths.iter().map(|p| open(p)).collect();
    if let Some(i) = files.iter().position(|f| f.try_lock().is_ok()) {
        return (i, files.swap_remove(i));
    }
    // All held: wait on every one at once, the first released wins; a thread that gets its
    // lock after that drops it at once (its send fails).
    let (tx, rx) = std::sync::mpsc::channel();
    for (i, (file, path)) in files.into_iter().zip(paths).enumerate() {
        let tx = tx.clone();
        std::thread::spawn(move || match file.lock() {
            Ok(()) => {
                let _ = tx.send((i, file));
            }
            Err(e) => panic!("cannot lock {}: {e}", path.display()),
        });
    }
    drop(tx);
    rx.recv().expect("a lock of the pool")
}

/// An exclusive lock on the first free of the temp dir's files `PREFIX-HASH.lock`, HASH of a
/// key of `keys` (a plane's kubeconfig): held until the returned guard is dropped. Returns the
/// index of the key it holds. The holder writes its test's name into the file; a test that
/// waited [`LOCK_WAIT_REPORTED`] or more says on stderr how long, and for which holders.
///
/// # Panics
/// If `keys` is empty, or a lock file cannot be opened or locked.
pub async fn file_lock_any(prefix: &str, keys: Vec<OsString>) -> (LockGuard, usize) {
    assert!(!keys.is_empty(), "no lock to take");
    let me = std::thread::current().name().unwrap_or("?").to_string();
    let prefix = prefix.to_string();
    tokio::task::spawn_blocking(move || {
        use std::io::{Seek, Write};
        let mut holders: Vec<String> = keys
            .iter()
            .map(|k| holder_of(&mut open(&lock_path(&prefix, k))))
            .collect();
        holders.dedup();
        let start = Instant::now();
        let (i, mut file) = lock_first(&prefix, &keys);
        let waited = start.elapsed();
        if waited >= LOCK_WAIT_REPORTED {
            let line = format!(
                "lock {prefix}: {me} waited {:.1} s (held when it asked by {})\n",
                waited.as_secs_f64(),
                holders.join(", ")
            );
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
        let _ = file.set_len(0);
        let _ = file.rewind();
        let _ = file.write_all(me.as_bytes());
        // The plane's dir (its kubeconfig's), which names it in the log.
        let plane = Path::new(&keys[i])
            .parent()
            .and_then(Path::file_name)
            .map_or_else(|| "?".into(), |n| n.to_string_lossy().into_owned());
        let guard = LockGuard {
            _file: file,
            prefix,
            plane,
            holder: me,
            waited,
            since: Instant::now(),
        };
        (guard, i)
    })
    .await
    .expect("lock task")
}

/// [`file_lock_any`] with one key.
///
/// # Panics
/// As [`file_lock_any`].
pub async fn file_lock(prefix: &str, key: &OsStr) -> LockGuard {
    file_lock_any(prefix, vec![key.to_os_string()]).await.0
}

/// Serializes the tests that install payloads with fixed object names on the shared plane:
/// hold the returned guard for the whole test (see the module docs).
///
/// # Panics
/// If the lock file cannot be opened or locked.
pub async fn fixed_names_lock() -> LockGuard {
    file_lock(FIXED_NAMES, super::shared_kubeconfig().as_os_str()).await
}

/// A plane of the fixed-names pool, locked for the holder until dropped.
#[derive(Debug)]
pub struct FixedPlane {
    _lock: LockGuard,
    kubeconfig: PathBuf,
}

impl FixedPlane {
    /// The plane's kubeconfig (its current context is a cluster admin), as a command-line
    /// argument.
    pub fn kubeconfig_arg(&self) -> String {
        self.kubeconfig.display().to_string()
    }

    /// A client for the plane's admin.
    pub async fn admin_client(&self) -> Client {
        super::client_at(&self.kubeconfig, None).await
    }

    /// The real ClusterOperator and `Default` ClusterVersion CRDs installed on the plane
    /// (once per plane and test process); returns an admin client.
    pub async fn real_crds(&self) -> Client {
        super::openshift::plane_crds(&self.kubeconfig).await
    }

    /// The e2e harness's two counted connections to the plane (minicvo's writes, the
    /// simulator's).
    pub async fn e2e_clients(&self) -> minicvo::e2e::Clients {
        super::apply::e2e_clients_at(&self.kubeconfig).await
    }
}

/// The first free plane of the fixed-names pool (the second plane when
/// `$MINICVO_TEST_SECOND_KUBECONFIG` names one, then the shared plane), locked for the whole
/// test.
///
/// # Panics
/// If `$MINICVO_TEST_KUBECONFIG` is unset, or a lock file cannot be opened or locked.
pub async fn fixed_names_plane() -> FixedPlane {
    let shared = super::shared_kubeconfig().into_os_string();
    // The second plane first: the shared plane is also the only one of the tests that hold
    // `fixed_names_lock`.
    let mut keys: Vec<OsString> = std::env::var_os(SECOND_KUBECONFIG_ENV)
        .filter(|s| !s.is_empty())
        .into_iter()
        .collect();
    keys.push(shared);
    let (lock, i) = file_lock_any(FIXED_NAMES, keys.clone()).await;
    FixedPlane {
        _lock: lock,
        kubeconfig: PathBuf::from(&keys[i]),
    }
}
