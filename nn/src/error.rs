//! `nn` uses Tessera's one error type: [`tensor_core::Error`] covers tensor operations, files
//! ([`Error::Io`], [`Error::Format`]), checkpoints ([`Error::Checkpoint`]), data sets
//! ([`Error::MissingData`]) and background workers ([`Error::Worker`]).

pub use tensor_core::{Error, Result};
