//! The integration tests of `tessera-cli`, one module per topic, in one test binary (one link
//! instead of one per file). Most run the built `train` and `generate` binaries.

mod backend_arg;
mod common;
mod distributed_train;
mod gpt_job;
mod opencl_precision;
mod pretrained_models;
mod train_chaos;
mod train_job;
mod train_metrics;
mod train_resume;
