//! The few raw MPI calls the communicator makes, each checked (rsmpi's safe API discards
//! MPI's return codes, which matter once the error handler is `MPI_ERRORS_RETURN`): error
//! strings, and waiting for a non-blocking request with a deadline.

use mpi::ffi;
use std::ffi::{c_char, c_int};
use std::time::{Duration, Instant};

/// `MPI_SUCCESS`.
pub(crate) const SUCCESS: c_int = 0;

/// MPI's description of the error code `code` (`MPI_Error_string`).
pub(crate) fn error_string(code: c_int) -> String {
    let mut buffer = vec![0 as c_char; 1024];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds more than MPI_MAX_ERROR_STRING (256 in Open MPI and MPICH)
    // characters, as the call requires; `len` is a valid out-pointer.
    let rc = unsafe { ffi::MPI_Error_string(code, buffer.as_mut_ptr(), &mut len) };
    if rc != SUCCESS {
        return format!("MPI error code {code}");
    }
    let bytes: Vec<u8> = buffer[..len.clamp(0, 1024) as usize]
        .iter()
        .map(|&c| c as u8)
        .collect();
    format!("{} (code {code})", String::from_utf8_lossy(&bytes))
}

/// How waiting for a request ended, when it did not complete.
pub(crate) enum WaitFailure {
    /// `MPI_Test` returned this error code.
    Error(c_int),
    /// The deadline passed first.
    Timeout(Duration),
}

/// What [`wait`] does between tests of a request once the first few found it incomplete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Idle {
    /// Yields the core: for a caller that waits for the result now.
    Yield,
    /// Sleeps 50 µs: for a thread that moves a collective forward in the background while the
    /// rank computes, which should take as little of the cores as it can.
    Sleep,
}

/// Polls `request` with `MPI_Test` until it completes, MPI reports an error, or `timeout`
/// passes. `MPI_Test` never blocks and drives MPI's progress engine, so this returns within
/// the timeout (plus one `MPI_Test`) whatever the peers do. The loop keeps polling because Open
/// MPI progresses non-blocking collectives only inside MPI calls (sleeping would slow every
/// exchange), and yields the core between tries after the first few: free on an idle core, and
/// on a loaded machine (measured with `cargo xtask bench ddp` at load 9 on 2 cores) it made
/// gradient exchanges about 2x faster than spinning, by not burning the time slices the other
/// processes, the peer included, need.
///
/// # Safety
/// `request` must be an active request started by this process; the buffers it uses must stay
/// valid until it completes (or forever, if this returns an error).
pub(crate) unsafe fn wait(
    request: &mut ffi::MPI_Request,
    timeout: Duration,
    idle: Idle,
) -> Result<(), WaitFailure> {
    let started = Instant::now();
    let mut tries: u32 = 0;
    loop {
        let mut done: c_int = 0;
        // SAFETY: the caller guarantees the request; MPI_STATUS_IGNORE is accepted.
        let rc = unsafe { ffi::MPI_Test(request, &mut done, ffi::RSMPI_STATUS_IGNORE) };
        if rc != SUCCESS {
            return Err(WaitFailure::Error(rc));
        }
        if done != 0 {
            return Ok(());
        }
        let waited = started.elapsed();
        if waited >= timeout {
            return Err(WaitFailure::Timeout(waited));
        }
        tries = tries.saturating_add(1);
        if tries <= 64 {
            std::hint::spin_loop();
        } else if idle == Idle::Sleep {
            std::thread::sleep(Duration::from_micros(50));
        } else {
            std::thread::yield_now();
        }
    }
}
