//! Counters of what the runtime did: host synchronisations, buffer creations and reuses, kernel
//! launches and program builds. Tests read them to prove that a chain of ops never waits for the
//! device and that steady-state work allocates nothing.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of a device's counters (cumulative since the device was first opened in this
/// process; every [`crate::OpenCl`] handle on one device shares them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    /// Times the host waited for the device: blocking reads (downloads) and `clFinish`.
    pub host_syncs: u64,
    /// Device buffers created (`clCreateBuffer`).
    pub buffers_created: u64,
    /// Allocations served from the pool without creating a buffer.
    pub buffers_reused: u64,
    /// Kernels enqueued.
    pub kernel_launches: u64,
    /// Programs compiled (`clBuildProgram`).
    pub program_builds: u64,
}

/// The live counters behind [`RuntimeStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    host_syncs: AtomicU64,
    buffers_created: AtomicU64,
    buffers_reused: AtomicU64,
    kernel_launches: AtomicU64,
    program_builds: AtomicU64,
}

impl Counters {
    pub(crate) fn host_sync(&self) {
        self.host_syncs.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn buffer_created(&self) {
        self.buffers_created.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn buffer_reused(&self) {
        self.buffers_reused.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn kernel_launched(&self) {
        self.kernel_launches.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn program_built(&self) {
        self.program_builds.fetch_add(1, Ordering::Relaxed);
    }

    /// The current values.
    pub(crate) fn snapshot(&self) -> RuntimeStats {
        RuntimeStats {
            host_syncs: self.host_syncs.load(Ordering::Relaxed),
            buffers_created: self.buffers_created.load(Ordering::Relaxed),
            buffers_reused: self.buffers_reused.load(Ordering::Relaxed),
            kernel_launches: self.kernel_launches.load(Ordering::Relaxed),
            program_builds: self.program_builds.load(Ordering::Relaxed),
        }
    }
}
