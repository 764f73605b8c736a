//! The integration tests of `tessera-nn`, one module per topic, in one test binary: a binary
//! per file would link (and instantiate the generic code it shares with the others) once each,
//! which is most of their build time.

mod backward_reduction;
mod checkpoint_corrupt;
mod checkpoint_python;
mod checkpoint_roundtrip;
mod data_batch_tensors;
mod data_fashion_mnist;
mod data_idx;
mod data_loader;
mod data_text;
mod distributed;
mod gpt;
mod gpt_steps;
mod layers_attention;
mod layers_dropout_embedding;
mod layers_init;
mod layers_linear_conv;
mod layers_norm;
mod layers_pooling;
mod layers_sequential_activation;
mod learner;
mod loss_functions;
mod module_derive;
mod optim_end_to_end;
mod optim_schedule_clip;
mod optim_trajectories;
mod precision;
mod precision_cast_cache;
mod precision_layers;
mod pretrained;
mod pretrained_deferred;
mod pytorch_state_dict;
mod run_resume;
mod sharded_checkpoint;
mod sharded_optimizer;
mod soundness;
mod thread_comm;
mod training_state;
mod unit_deferred_build;
mod unit_gathered_save;
mod unit_hold_on;
mod unit_prefetch;
mod user_deferred_units;
