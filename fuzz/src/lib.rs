//! # fuzz
//!
//! Tessera's random-program fuzzer over the public API. It keeps the promise of issue 11
//! honest: **bad input gets a typed error, never a panic, an abort, a hang or an `Ok` that
//! breaks the documented invariants.**
//!
//! ## How it works
//! * A [`program::Program`] is generated from a seed alone: a backend (the CPU backend or the
//!   example backend) and 4 to 32 steps, each an operation of the [table](ops) applied to
//!   drawn arguments ([`args`]): dims that are mostly small but sometimes 0 or huge
//!   (`1 << 40`, `usize::MAX`), axes out of range, strides and dilations of 0, window
//!   positions outside the window, index values that are negative or huge, floats that are
//!   NaN or infinite, file contents that are mutated safetensors or IDX files. Steps read
//!   earlier results from registers, so programs chain views, ops, autograd, layers,
//!   optimizers and checkpoints.
//! * The [`machine`] runs each step under `catch_unwind` and checks every `Ok` result: the
//!   element count is exact and within the size limits, the layout stays inside its storage,
//!   a small result reads back, and what the operation's entry documents (shape, dtype,
//!   values) holds ([`invariants`]).
//! * Programs run in [`child`] processes limited to a few GiB of address space
//!   (`setrlimit(RLIMIT_AS)`), so an abort ("memory allocation failed", a stack overflow, a
//!   segfault) kills only the child; the [`driver`] sees it, records the program that was
//!   running, and starts a new child after it. A program that does not finish within the
//!   timeout is a hang.
//! * The summary counts panics, aborts, hangs and invariant breaks, and prints each failing
//!   program in full (pseudo-Rust, one line per step) with the seed that reproduces it.
//!
//! ## Running it
//! * `cargo test -p fuzz` runs a bounded, deterministic run (a few thousand programs) and the
//!   regression tests in `fuzz/tests/` (bad input gets a typed error, counter wrap and work
//!   bounds, the fuzzer's findings); all are part of `cargo test --workspace`, so CI runs them.
//! * `cargo xtask fuzz --minutes 10` runs the bad-input regression tests in release, then
//!   fuzzes (release, two children) for ten minutes from a fresh seed.
//! * `cargo run -p fuzz -- show --seed 1234` prints a program; `cargo run -p fuzz -- replay
//!   --seed 1234` runs it in this process, printing each step's outcome.
//!
//! ## Adding API
//! New public API joins the fuzzer the day it lands: one entry in the table (see [`ops`]).

pub mod args;
pub mod child;
pub mod driver;
pub mod invariants;
pub mod machine;
pub mod ops;
pub mod panics;
pub mod program;
pub mod rng;
