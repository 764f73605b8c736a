//! The conditions every measuring process of a run shares: how many threads Tessera and the
//! peers use (`--threads`) and which CPUs they are pinned to (`--pin`), so that a ratio compares
//! like with like.
//!
//! Threads are set through the environment of each child: `RAYON_NUM_THREADS` (Tessera),
//! `OMP_NUM_THREADS`, `OPENBLAS_NUM_THREADS`, `MKL_NUM_THREADS` (numpy's BLAS, PyTorch's
//! OpenMP/MKL/oneDNN) and `TESSERA_BENCH_THREADS`, which the PyTorch peers pass to
//! `torch.set_num_threads`. Pinning runs each child under `taskset -c <cpus>`, the same CPUs for
//! both sides.

use std::process::Command;

use crate::TaskResult;

/// The variable the peer scripts read for their thread count.
pub const PEER_THREADS_VAR: &str = "TESSERA_BENCH_THREADS";

/// The thread-count variables set for every child when `--threads` is given.
pub const THREAD_VARS: [&str; 5] = [
    "RAYON_NUM_THREADS",
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    PEER_THREADS_VAR,
];

/// Threads and CPUs for the measuring processes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunEnv {
    /// Threads per side; `None`: each framework's default (every core).
    pub threads: Option<usize>,
    /// CPUs to pin to, as `taskset -c` takes them (`"0-1"`); `None`: not pinned.
    pub cpus: Option<String>,
}

impl RunEnv {
    /// The conditions for `--threads` and `--pin` on a machine with `available` CPUs: pinned to
    /// CPUs `0..threads` (all of them without `--threads`).
    pub fn new(threads: Option<usize>, pin: bool, available: usize) -> TaskResult<Self> {
        if let Some(t) = threads {
            if t == 0 || t > available {
                return Err(format!("--threads {t}: this machine has {available} CPUs").into());
            }
        }
        let cpus = pin.then(|| {
            let count = threads.unwrap_or(available).max(1);
            if count == 1 {
                "0".to_string()
            } else {
                format!("0-{}", count - 1)
            }
        });
        if cpus.is_some() && !taskset_available() {
            return Err("--pin needs `taskset` (util-linux), which could not be run".into());
        }
        Ok(RunEnv { threads, cpus })
    }

    /// The conditions of this run from the current machine.
    pub fn for_this_machine(threads: Option<usize>, pin: bool) -> TaskResult<Self> {
        let available = std::thread::available_parallelism().map_or(1, |n| n.get());
        RunEnv::new(threads, pin, available)
    }

    /// A command for `program` with `args` under these conditions: wrapped in `taskset` when
    /// pinned, with the thread variables set when a count is given.
    pub fn command(&self, program: &std::ffi::OsStr, args: &[String]) -> Command {
        let mut cmd = match &self.cpus {
            Some(cpus) => {
                let mut c = Command::new("taskset");
                c.args(["-c", cpus]).arg(program);
                c
            }
            None => Command::new(program),
        };
        cmd.args(args);
        if let Some(t) = self.threads {
            for var in THREAD_VARS {
                cmd.env(var, t.to_string());
            }
        }
        cmd
    }

    /// One line for reports: `"2 threads per side, pinned to CPUs 0-1"`.
    pub fn describe(&self) -> String {
        let threads = match self.threads {
            Some(1) => "1 thread per side".to_string(),
            Some(t) => format!("{t} threads per side"),
            None => "each side's default threads".to_string(),
        };
        match &self.cpus {
            Some(cpus) => format!("{threads}, pinned to CPUs {cpus}"),
            None => format!("{threads}, not pinned"),
        }
    }
}

/// Whether `taskset` runs here.
fn taskset_available() -> bool {
    Command::new("taskset")
        .arg("-V")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_set_every_variable_and_pinning_takes_the_first_cpus() {
        let env = RunEnv {
            threads: Some(2),
            cpus: Some("0-1".into()),
        };
        let cmd = env.command("python3".as_ref(), &["x.py".into()]);
        assert_eq!(cmd.get_program(), "taskset");
        let args: Vec<_> = cmd.get_args().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(args, ["-c", "0-1", "python3", "x.py"]);
        for var in THREAD_VARS {
            let value = cmd.get_envs().find(|(k, _)| *k == var).and_then(|(_, v)| v);
            assert_eq!(value, Some("2".as_ref()), "{var}");
        }
        assert_eq!(env.describe(), "2 threads per side, pinned to CPUs 0-1");
    }

    #[test]
    fn without_options_nothing_is_wrapped_or_set() {
        let env = RunEnv::new(None, false, 4).unwrap();
        let cmd = env.command("tessera-bench".as_ref(), &[]);
        assert_eq!(cmd.get_program(), "tessera-bench");
        assert_eq!(cmd.get_envs().count(), 0);
        assert_eq!(env.describe(), "each side's default threads, not pinned");
    }

    #[test]
    fn too_many_threads_is_an_error() {
        assert!(RunEnv::new(Some(3), false, 2).is_err());
        assert!(RunEnv::new(Some(0), false, 2).is_err());
        assert_eq!(RunEnv::new(Some(2), false, 2).unwrap().threads, Some(2));
    }
}
