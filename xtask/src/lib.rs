//! # xtask
//!
//! Tessera's project tasks, run as `cargo xtask <task>` (an alias in `.cargo/config.toml`):
//!
//! - `cargo xtask ci`: the CI checks in order (format, clippy, tests), see [`ci`].
//! - `cargo xtask conflict-markers`: fails on unresolved merge-conflict markers in tracked
//!   files, see [`conflicts`].
//! - `cargo xtask conformance-long`: the fused family at 2,000 cases on seeds 1-10, see
//!   [`conformance_long`].
//! - `cargo xtask gpu-check`: builds the CUDA checks for a GPU machine, see [`gpu_check`].
//! - `cargo xtask fuzz --minutes 10`: the long fuzz run, see [`mod@fuzz`].
//! - `cargo xtask chaos --kills 100`: a training run killed and resumed again and again, see
//!   [`chaos`].
//! - `cargo xtask bench gemm`: measures CPU sgemm and compares it with numpy, see [`mod@bench`].
//!
//! The crate has two binaries. `xtask` (built in dev by the alias) only orchestrates; the
//! measurements run in `tessera-bench`, which `xtask` always builds and runs in release so that
//! the numbers mean something.

pub mod bench;
pub mod chaos;
pub mod ci;
pub mod conflicts;
pub mod conformance_long;
pub mod fuzz;
pub mod gpu_check;
pub mod process;

/// The error type of every task: tasks only report failures, they never match on them.
pub type TaskError = Box<dyn std::error::Error + Send + Sync>;

/// Result of a task.
pub type TaskResult<T> = Result<T, TaskError>;
