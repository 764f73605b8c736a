//! # nn
//!
//! Neural-network building blocks for Tessera, generic over the backend `B`:
//!
//! * [`module::Module`] and the [`layers`] (Linear, Conv2d, pools, BatchNorm, LayerNorm,
//!   Dropout, Embedding, Flatten, Sequential, activations);
//! * [`loss`] functions, [`init`]ialisers, [`optim`]izers, LR [`schedule`]s and gradient
//!   [`clip`]ping;
//! * [`data`]: IDX/MNIST reading, the `Dataset` trait and a prefetching `DataLoader`;
//! * [`checkpoint`]: safetensors files, and [`training`]: steps, evaluation, training state and
//!   the job behind the `train` command, with the reference [`models`].

#![forbid(unsafe_code)]

pub mod checkpoint;
pub mod clip;
pub mod data;
pub mod error;
pub mod init;
pub mod layers;
pub mod loss;
pub mod models;
pub mod module;
pub mod optim;
pub mod schedule;
pub mod training;

pub use error::{Error, Result};
pub use module::Module;

/// The README's Rust examples, compiled and run as doc tests so they cannot go stale.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
