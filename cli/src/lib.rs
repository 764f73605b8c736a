//! The jobs behind Tessera's command-line programs, kept out of the libraries so that a user of
//! `tessera-nn` compiles no CLI parser, progress bars or GPU loaders:
//!
//! * [`mnist_job`]: `train --model mlp|cnn` on Fashion-MNIST;
//! * [`gpt_job`]: `train --model gpt`, a character-level GPT on a text corpus (the `generate`
//!   binary samples from its checkpoints);
//! * [`finetune_job`]: `train --init-from DIR`, fine-tuning a Hugging Face GPT-2 or Llama;
//! * [`text_training`]: the training loop both text jobs share;
//! * [`distributed`]: `train --distributed`, one rank of an `mpirun` data-parallel run.

pub mod distributed;
pub mod finetune_job;
pub mod gpt_job;
mod gpt_optimizers;
pub mod memory;
pub mod mnist_job;
pub mod text_training;
