//! Running the blocks of a split GEMM on the calling thread and whichever rayon workers are
//! free to help, so that a product never waits for a worker to wake up.
//!
//! The caller claims blocks from a shared counter and computes them; helper jobs handed to the
//! pool claim from the same counter when they start. A helper that starts late finds no block
//! left and returns at once: the caller waits only for blocks that a helper has claimed, never
//! for a helper to be scheduled. (A rayon `join` or `scope` called from outside the pool, as
//! from a training loop's thread, instead parks the caller until a worker has woken up and
//! finished: tens of microseconds on a virtual machine, as much as a 256 x 256 product.)

use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tessera_core::{Error, Result};

/// One block's work.
type BlockFn<'f> = dyn Fn(usize) -> Result<()> + Sync + 'f;

/// What the caller and its helpers share.
struct Team {
    /// The next block nobody has claimed.
    next: AtomicUsize,
    /// Blocks finished (successfully or not).
    done: AtomicUsize,
    /// Blocks in all.
    blocks: usize,
    /// The caller's block function, its lifetime erased: valid until the caller returns, which
    /// it does only once `done == blocks`; it is called only for a claimed block, and a claim
    /// (`next < blocks`) always precedes that block's `done` increment.
    run: *const BlockFn<'static>,
    /// The first error or panic of any block.
    failure: Mutex<Option<Failure>>,
}

/// How a block failed.
enum Failure {
    Error(Error),
    Panic(Box<dyn Any + Send>),
}

// SAFETY: `run` points to a `Sync` closure and is only called while the caller keeps it alive
// (see its field comment); the counters and the mutex are thread-safe.
unsafe impl Send for Team {}
// SAFETY: as above.
unsafe impl Sync for Team {}

impl Team {
    /// Claims and runs blocks until none is left.
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.blocks {
                return;
            }
            // SAFETY: block `i` is claimed and not yet counted done, so the caller is still
            // waiting and `run` is alive.
            let outcome = catch_unwind(AssertUnwindSafe(|| unsafe { (*self.run)(i) }));
            let failure = match outcome {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(Failure::Error(e)),
                Err(panic) => Some(Failure::Panic(panic)),
            };
            if let Some(f) = failure {
                let mut slot = self.failure.lock().unwrap_or_else(|p| p.into_inner());
                slot.get_or_insert(f);
            }
            // Release: the block's writes to C happen before the caller sees it done.
            self.done.fetch_add(1, Ordering::Release);
        }
    }
}

/// Runs `run(i)` for every `i < blocks`, on this thread and on up to `helpers` rayon workers
/// that are free to join in; returns the first error (a panic in a block is resumed here).
/// Blocks must be independent of each other.
pub(super) fn run_blocks(blocks: usize, helpers: usize, run: &BlockFn<'_>) -> Result<()> {
    // SAFETY: only the trait object's lifetime changes; `Team::run` documents why every call
    // through it happens while `run` is alive (this function returns only after `done ==
    // blocks`, and every call precedes its block's `done` increment).
    let run: *const BlockFn<'static> =
        unsafe { std::mem::transmute::<*const BlockFn<'_>, *const BlockFn<'static>>(run) };
    let team = Arc::new(Team {
        next: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
        blocks,
        run,
        failure: Mutex::new(None),
    });
    for _ in 0..helpers.min(blocks.saturating_sub(1)) {
        let team = Arc::clone(&team);
        rayon::spawn(move || team.work());
    }
    team.work();
    // Every block is claimed now; wait for the ones helpers are still computing.
    let mut spins = 0u32;
    while team.done.load(Ordering::Acquire) < blocks {
        if spins < 1 << 12 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
    let failure = team
        .failure
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    match failure {
        None => Ok(()),
        Some(Failure::Error(e)) => Err(e),
        Some(Failure::Panic(p)) => resume_unwind(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn every_block_runs_once_whoever_runs_it() {
        for (blocks, helpers) in [(0, 3), (1, 0), (1, 4), (5, 0), (7, 2), (64, 8)] {
            let runs: Vec<AtomicU64> = (0..blocks).map(|_| AtomicU64::new(0)).collect();
            run_blocks(blocks, helpers, &|i| {
                runs[i].fetch_add(1, Ordering::Relaxed);
                Ok(())
            })
            .unwrap();
            assert!(
                runs.iter().all(|r| r.load(Ordering::Relaxed) == 1),
                "{blocks} {helpers}"
            );
        }
    }

    #[test]
    fn the_first_error_is_returned_after_every_block_ran() {
        let ran = AtomicU64::new(0);
        let err = run_blocks(6, 2, &|i| {
            ran.fetch_add(1, Ordering::Relaxed);
            if i == 3 {
                Err(Error::OutOfMemory {
                    device: "cpu".into(),
                    requested_bytes: 3,
                })
            } else {
                Ok(())
            }
        })
        .unwrap_err();
        assert!(matches!(
            err,
            Error::OutOfMemory {
                requested_bytes: 3,
                ..
            }
        ));
        assert_eq!(ran.load(Ordering::Relaxed), 6);
    }

    #[test]
    fn a_panic_in_a_block_reaches_the_caller() {
        let r = catch_unwind(|| {
            let _ = run_blocks(4, 1, &|i| {
                assert_ne!(i, 2, "block two");
                Ok(())
            });
        });
        assert!(r.is_err());
    }
}
