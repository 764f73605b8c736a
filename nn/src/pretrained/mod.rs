//! Pretrained models in the Hugging Face layout: a folder with `config.json` and
//! `model.safetensors` (or shards `model-0000N-of-0000M.safetensors` listed by
//! `model.safetensors.index.json`), as `transformers`' `save_pretrained` writes it.
//!
//! * [`crate::gpt::Gpt::from_pretrained`] / [`crate::gpt::Gpt::save_pretrained`]: GPT-2
//!   (`GPT2LMHeadModel`);
//! * [`crate::llama::Llama::from_pretrained`] / [`crate::llama::Llama::save_pretrained`]:
//!   Llama (`LlamaForCausalLM`), Llama 3's rope scaling included;
//! * [`PretrainedModel`]: either, chosen by the folder's `model_type`, with one cache type
//!   for decoding.
//!
//! Loading is strict: an unknown `model_type`, a configuration field that changes the math and
//! is not supported, and a missing, extra or mis-shaped tensor are typed errors naming it. f32,
//! f16 and bf16 weights load; they are converted to [`PretrainedOptions::dtype`] (f32 by
//! default) and the model computes under [`PretrainedOptions::precision`].
//!
//! ```no_run
//! # fn main() -> tessera_core::Result<()> {
//! use tessera_nn::pretrained::{PretrainedModel, PretrainedOptions};
//! let dev = tessera_cpu::Cpu::new();
//! let model = PretrainedModel::from_pretrained("gpt2", &dev, &PretrainedOptions::default())?;
//! let idx = tessera_core::Tensor::from_vec(vec![464i64, 3290], [1, 2], &dev)?;
//! let logits = model.forward(&idx)?; // [1, 2, vocab_size]
//! # Ok(()) }
//! ```

mod auto;
mod folder_source;
mod gathered_folder;
pub mod gpt2;
pub mod hf_files;
pub mod llama;

pub use auto::{PretrainedCache, PretrainedModel};
pub use folder_source::FolderSource;

use crate::precision::Precision;
use tessera_core::{Backend, DType, Error, Result, Tensor};

/// How a pretrained model is loaded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PretrainedOptions {
    /// The dtype of the parameters after loading (the stored ones are converted).
    pub dtype: DType,
    /// The dtype the model computes in ([`Precision`]).
    pub precision: Precision,
}

impl Default for PretrainedOptions {
    /// f32 parameters computing in f32.
    fn default() -> Self {
        PretrainedOptions {
            dtype: DType::F32,
            precision: Precision::F32,
        }
    }
}

/// `tensor` in `dtype` (itself when it has it).
fn convert_dtype<B: Backend>(tensor: Tensor<B>, dtype: DType) -> Result<Tensor<B>> {
    if tensor.dtype() == dtype {
        Ok(tensor)
    } else if tensor.dtype().is_float() {
        tensor.to_dtype(dtype)
    } else {
        Err(Error::checkpoint(format!(
            "a weight of dtype {} where a float was expected",
            tensor.dtype()
        )))
    }
}

/// Whether `a` and `b` hold the same dims and values (a tied weight stored twice).
fn same_values<B: Backend>(a: &Tensor<B>, b: &Tensor<B>) -> Result<bool> {
    Ok(a.dims() == b.dims() && a.to_vec_f64()? == b.to_vec_f64()?)
}

/// The `torch_dtype` name `transformers` writes for `dtype`.
fn torch_dtype_name(dtype: DType) -> &'static str {
    match dtype {
        DType::F64 => "float64",
        DType::F16 => "float16",
        DType::BF16 => "bfloat16",
        _ => "float32",
    }
}
