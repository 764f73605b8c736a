//! The jobs behind Tessera's command-line programs, kept out of the libraries so that a user of
//! `tessera-nn` compiles no CLI parser, progress bars or GPU loaders:
//!
//! * [`mnist_job`]: `train --model mlp|cnn` on Fashion-MNIST;
//! * [`distributed`]: `train --distributed`, one rank of an `mpirun` data-parallel run.

pub mod distributed;
pub mod mnist_job;
