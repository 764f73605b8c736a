//! `nn` uses Tessera's one error type: [`tessera_core::Error`] covers tensor operations, files
//! ([`Error::Io`], [`Error::Format`]), checkpoints ([`Error::Checkpoint`]), data sets
//! ([`Error::MissingData`]) and background workers ([`Error::Worker`]).

pub use tessera_core::{Error, Result};
