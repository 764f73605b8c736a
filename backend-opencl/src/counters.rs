//! [`RuntimeStats`]: what an OpenCL device did (host synchronisations, buffer creations and
//! reuses and kernel launches, counted by the engine, and program builds). Tests read them to
//! prove that a chain of ops never waits for the device and that steady-state work allocates
//! nothing.

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

impl RuntimeStats {
    /// The engine's counters of an OpenCL device and its program builds.
    pub(crate) fn from_engine(stats: tessera_gpu::RuntimeStats, program_builds: u64) -> Self {
        RuntimeStats {
            host_syncs: stats.host_syncs,
            buffers_created: stats.buffers_created,
            buffers_reused: stats.buffers_reused,
            kernel_launches: stats.kernel_launches,
            program_builds,
        }
    }
}
