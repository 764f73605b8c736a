//! Makes the program's own thread one of the CPU backend's compute threads.
//!
//! The CPU kernels split large ops over rayon's global pool. A training loop runs on a thread
//! of its own (usually `main`), outside that pool, so with rayon's defaults a program that asks
//! for `N` threads runs `N + 1`: the loop's thread, which computes every op too small to split
//! and its own blocks of a split product, and `N` workers. On `N` cores the extra thread
//! competes with the workers: a worker that spins in rayon's idle loop, or is woken onto the
//! core the loop's thread is using, shares that core with it, and the helper of a split product
//! can start milliseconds late (measured on a 2-core Zen 4: one product in six of a GPT step ran
//! on the calling thread alone, a quarter of the step's product time). OpenMP, which PyTorch
//! uses, avoids this by making the calling thread the team's first thread.
//!
//! [`join_thread_pool`] does the same with rayon: it builds the global pool with the calling
//! thread as worker 0 (`rayon::ThreadPoolBuilder::use_current_thread`), so `N` threads compute
//! in all and the ops the loop's thread starts run on it as part of the pool. Like
//! [`crate::tune_allocator`] it is process-wide, so it is an explicit opt-in that a training
//! program calls once at start (the `train` command and the training benchmarks do); a
//! library never should. Other threads may still use the backend: their ops run on the pool's
//! other workers. With one thread nothing changes (every op then runs on its caller anyway).
//!
//! It is for training steps, whose ops are large. At batch 1, where a whole forward pass takes
//! 150 us and a split product's blocks a few microseconds each, it measured worse on the same
//! two cores (the CNN's batch-1 latency 174-240 us against 160-195 us; one thread: 172 us):
//! with a single other worker, that worker is asleep more often, and waking it is a system
//! call on the calling thread's path, where rayon's two spinning workers often had one awake.
//! The `generate` command and the inference benchmarks therefore keep rayon's default pool.

use std::fmt;

/// Environment variable: `0` makes [`join_thread_pool`] do nothing.
pub const CALLING_THREAD_ENV_VAR: &str = "TESSERA_CPU_CALLING_THREAD";

/// What [`join_thread_pool`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoolJoin {
    /// The calling thread is worker 0 of rayon's global pool of `threads` threads.
    Joined {
        /// Threads in the pool, the calling one included.
        threads: usize,
    },
    /// One thread was asked for (`RAYON_NUM_THREADS=1` or a one-core machine): nothing to join,
    /// every op runs on the thread that calls it.
    SingleThread,
    /// [`CALLING_THREAD_ENV_VAR`] is `0`.
    Disabled,
    /// Rayon's global pool already existed (something used rayon or built it first), or this
    /// thread already belongs to a pool: left as it was.
    AlreadyInitialized(String),
}

impl fmt::Display for PoolJoin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolJoin::Joined { threads } => {
                write!(f, "calling thread joined the pool ({threads} threads)")
            }
            PoolJoin::SingleThread => write!(f, "one thread"),
            PoolJoin::Disabled => {
                write!(f, "calling thread not joined ({CALLING_THREAD_ENV_VAR}=0)")
            }
            PoolJoin::AlreadyInitialized(why) => write!(f, "calling thread not joined: {why}"),
        }
    }
}

/// The thread count rayon's global pool gets by default: `RAYON_NUM_THREADS` when it is a
/// positive number (read as rayon reads it), else the available parallelism.
pub fn default_pool_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Builds rayon's global pool (its default size: `RAYON_NUM_THREADS`, else the core count)
/// with the calling thread as one of its threads, so that a training loop on this thread
/// computes inside the pool instead of beside it (see the module's documentation). Call it
/// once, at the start of `main`, before anything uses rayon.
///
/// ```
/// let joined = tessera_cpu::join_thread_pool();
/// println!("{joined}");
/// ```
pub fn join_thread_pool() -> PoolJoin {
    if std::env::var(CALLING_THREAD_ENV_VAR).is_ok_and(|v| v.trim() == "0") {
        return PoolJoin::Disabled;
    }
    let threads = default_pool_threads();
    if threads < 2 {
        return PoolJoin::SingleThread;
    }
    match rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .use_current_thread()
        .build_global()
    {
        Ok(()) => PoolJoin::Joined { threads },
        Err(e) => PoolJoin::AlreadyInitialized(e.to_string()),
    }
}
