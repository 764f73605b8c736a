//! [`Gpt`]: a decoder-only transformer (GPT-2 / nanoGPT) with a tied output head.

use super::cache::GptCache;
use super::GptConfig;
use crate::distributed::{cached_step, install_units, ShardedUnits};
use crate::init;
use crate::layers::{
    Dropout, DropoutConfig, Embedding, LayerNorm, LayerNormConfig, Linear, TransformerBlock,
    TransformerBlockConfig,
};
use crate::loss::cross_entropy;
use crate::module::placeholder::check_blocks_runnable;
use crate::module::{child_name, Forward, ModuleVisitor, ToBackend};
use crate::Module;
use std::sync::{Arc, OnceLock};
use tessera_autograd::{no_grad, Var};
use tessera_core::{Backend, DType, Error, Generator, Result, Tensor};

/// Everything of a [`Gpt`] but the output head (nanoGPT's `transformer` `ModuleDict`): token
/// and position embeddings, dropout, the blocks and the final LayerNorm.
#[derive(Module)]
pub struct GptTransformer<B: Backend> {
    /// Token embedding `[vocab_size, n_embd]`, shared with the output head.
    pub wte: Embedding<B>,
    /// Learned position embedding `[block_size, n_embd]`.
    pub wpe: Embedding<B>,
    /// Dropout on the summed embeddings.
    pub drop: Dropout,
    /// The blocks, `h.0` to `h.{n_layer - 1}`.
    pub h: Vec<TransformerBlock<B>>,
    /// The final LayerNorm.
    pub ln_f: LayerNorm<B>,
}

/// A GPT: `logits = lm_head(ln_f(blocks(drop(wte[idx] + wpe[pos]))))` with causal
/// pre-LayerNorm [`TransformerBlock`]s, for token indices `idx: [batch, t]` (`t <= block_size`).
///
/// * **Names** are nanoGPT's `state_dict` keys with PyTorch's `nn.MultiheadAttention` inside
///   each block: `transformer.wte.weight`, `transformer.wpe.weight`,
///   `transformer.h.{i}.ln_1.weight`, `transformer.h.{i}.attn.in_proj_weight`,
///   `transformer.h.{i}.attn.out_proj.weight`, `transformer.h.{i}.mlp.c_fc.weight`, ...,
///   `transformer.ln_f.bias`, `lm_head.weight`.
/// * **Weight tying**: `lm_head.weight` *is* `transformer.wte.weight` (one [`Var`] visited under
///   both names, as PyTorch's `state_dict` lists it); [`Module::parameters`] lists it once, so an
///   optimizer updates it once, and moving the model keeps the two tied.
/// * **Precision**: under a 16-bit [`GptConfig::precision`] the attention, the MLPs and the
///   output head compute in the 16-bit dtype; the parameters, embeddings, LayerNorms, residual
///   stream and logits stay in [`GptConfig::dtype`] (see [`crate::precision`]).
/// * **Initialisation** (nanoGPT's): every linear weight and both embeddings `N(0, 0.02²)`, the
///   residual projections (`attn.out_proj`, `mlp.c_proj`) `N(0, (0.02/√(2·n_layer))²)`, biases
///   zero, LayerNorms one and zero.
pub struct Gpt<B: Backend> {
    transformer: GptTransformer<B>,
    lm_head: Linear<B>,
    config: GptConfig,
    /// Set by [`Gpt::shard_blocks`]: the blocks run as sharded units.
    units: OnceLock<Arc<ShardedUnits<B>>>,
    /// Where each block's draws start in the build's stream (drawing values): what
    /// [`Gpt::init_block`] draws from.
    block_generators: Vec<Generator>,
    /// Built by [`GptConfig::init_deferred`]: the blocks hold placeholders until given values.
    deferred: bool,
}

/// nanoGPT's weight standard deviation.
const INIT_STD: f64 = 0.02;

impl<B: Backend> Gpt<B> {
    /// A model of `config` on `backend`, initialised from `generator`.
    pub fn new(config: GptConfig, backend: &B, generator: &mut Generator) -> Result<Self> {
        Self::build(config, backend, generator, false)
    }

    /// [`GptConfig::init_deferred`]: [`Gpt::new`] whose blocks are placeholders (when
    /// `deferred_blocks`), their draws skipped but counted, so that [`Gpt::init_block`] draws
    /// the values `new` would have.
    pub(crate) fn build(
        config: GptConfig,
        backend: &B,
        generator: &mut Generator,
        deferred_blocks: bool,
    ) -> Result<Self> {
        config.validate()?;
        let (e, dtype) = (config.n_embd, config.dtype);
        let normal = |dims: [usize; 2], std: f64, g: &mut Generator| {
            init::normal(dims, 0.0, std, dtype, g, backend)
        };
        let wte = Embedding::from_tensor(normal([config.vocab_size, e], INIT_STD, generator)?)?;
        let wpe = Embedding::from_tensor(normal([config.block_size, e], INIT_STD, generator)?)?;
        let drop = DropoutConfig::new().p(config.dropout).init(generator)?;
        let mut h = Vec::new();
        let mut block_generators = Vec::new();
        let out_of_memory = |_| Error::OutOfMemory {
            device: "host".into(),
            requested_bytes: config
                .n_layer
                .saturating_mul(std::mem::size_of::<TransformerBlock<B>>()),
        };
        h.try_reserve_exact(config.n_layer).map_err(out_of_memory)?;
        block_generators
            .try_reserve_exact(config.n_layer)
            .map_err(out_of_memory)?;
        for _ in 0..config.n_layer {
            block_generators.push(generator.drawing());
            // A generator that already draws placeholders (or zeros, for loading) builds the
            // block as it is, and stays as it is.
            let deferring =
                deferred_blocks && !generator.draws_placeholders() && !generator.draws_zeros();
            let block = if deferring {
                let mut placeholders = generator.deferring();
                let block = Self::init_block_from(&config, backend, &mut placeholders)?;
                *generator = placeholders.drawing();
                block
            } else {
                Self::init_block_from(&config, backend, generator)?
            };
            h.push(block);
        }
        let ln_f = LayerNormConfig::new(vec![e])
            .eps(config.layer_norm_eps)
            .bias(config.bias)
            .dtype(dtype)
            .init(backend)?;
        let lm_head =
            Linear::from_vars(wte.weight().clone(), None)?.with_precision(config.precision);
        Ok(Gpt {
            transformer: GptTransformer {
                wte,
                wpe,
                drop,
                h,
                ln_f,
            },
            lm_head,
            config,
            units: OnceLock::new(),
            block_generators,
            deferred: deferred_blocks,
        })
    }

    /// One block of `config` with nanoGPT's initialisation, drawn from `generator`.
    fn init_block_from(
        config: &GptConfig,
        backend: &B,
        generator: &mut Generator,
    ) -> Result<TransformerBlock<B>> {
        let dtype = config.dtype;
        let block = TransformerBlockConfig::new(config.n_embd, config.n_head)
            .dropout(config.dropout)
            .bias(config.bias)
            .gelu(config.gelu)
            .layer_norm_eps(config.layer_norm_eps)
            .dtype(dtype)
            .precision(config.precision)
            .init(backend, generator)?;
        let residual_std = INIT_STD / (2.0 * config.n_layer as f64).sqrt();
        // Re-initialise nanoGPT's way, in parameter order.
        for (name, var) in block.parameters() {
            let dims = var.dims().to_vec();
            let value = if dims.len() == 1 {
                if name.ends_with("weight") {
                    Tensor::ones(dims, dtype, backend)?
                } else {
                    Tensor::zeros(dims, dtype, backend)?
                }
            } else {
                let residual = name.starts_with("attn.out_proj") || name.starts_with("mlp.c_proj");
                let std = if residual { residual_std } else { INIT_STD };
                init::normal([dims[0], dims[1]], 0.0, std, dtype, generator, backend)?
            };
            var.set_value(value)?;
        }
        Ok(block)
    }

    /// Gives block `block`'s parameters the values a [`Gpt::new`] from the generator this model
    /// was built from draws for them (PyTorch's `reset_parameters` of one block): what a
    /// model from [`GptConfig::init_deferred`] calls for each block, e.g. through
    /// [`ShardedUnits::initialize`], which shards each block as soon as it has values. The
    /// block's dropout streams are left as they are.
    ///
    /// ```
    /// use tessera_core::Generator;
    /// use tessera_nn::{gpt::GptConfig, Module};
    /// # fn main() -> tessera_core::Result<()> {
    /// let (dev, config) = (tessera_cpu::Cpu::new(), GptConfig::new(2, 2, 8, 4, 10));
    /// let plain = config.init(&dev, &mut Generator::new(3))?;
    /// let deferred = config.init_deferred(&dev, &mut Generator::new(3))?;
    /// for block in 0..2 {
    ///     deferred.init_block(block)?;
    /// }
    /// for ((name, a), (_, b)) in plain.parameters().iter().zip(deferred.parameters()) {
    ///     assert_eq!(a.value().to_vec::<f32>()?, b.value().to_vec::<f32>()?, "{name}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn init_block(&self, block: usize) -> Result<()> {
        let (target, generator) = match (
            self.transformer.h.get(block),
            self.block_generators.get(block),
        ) {
            (Some(target), Some(generator)) => (target, generator),
            _ => {
                return Err(Error::InvalidArgument {
                    op: "Gpt::init_block",
                    msg: format!(
                        "no block {block}: the model has {}",
                        self.transformer.h.len()
                    ),
                })
            }
        };
        let backend = self.transformer.wte.weight().value().backend().clone();
        let fresh =
            no_grad(|| Self::init_block_from(&self.config, &backend, &mut generator.clone()))?;
        for ((_, var), (_, value)) in target.parameters().into_iter().zip(fresh.parameters()) {
            var.set_value(value.value())?;
        }
        Ok(())
    }

    /// Whether the model was built by [`GptConfig::init_deferred`] (its blocks hold
    /// placeholders until [`Gpt::init_block`] or a load gives them values).
    pub fn is_deferred(&self) -> bool {
        self.deferred
    }

    /// An error naming a parameter that would run as a placeholder: one of a deferred
    /// build's blocks not given values yet. Checked before anything runs, so that a refused
    /// pass draws no dropout mask.
    fn check_runnable(&self) -> Result<()> {
        let blocks = (self.transformer.h.iter().enumerate())
            .map(|(i, block)| (format!("transformer.h.{i}."), block));
        check_blocks_runnable(
            "Gpt",
            self.deferred,
            self.units.get().map(|u| &**u),
            blocks,
            "give each block its values with Gpt::init_block (or ShardedUnits::initialize), \
             or load them",
        )
    }

    /// Marks the model as built with (`true`) or without placeholders in its blocks: a
    /// loader's, after it has read every block.
    pub(crate) fn set_deferred(&mut self, deferred: bool) {
        self.deferred = deferred;
    }

    /// The parameter-name prefix of each block (`transformer.h.{i}`): the units of
    /// [`Gpt::shard_blocks`].
    pub fn block_prefixes(&self) -> Vec<String> {
        (0..self.transformer.h.len())
            .map(|i| format!("transformer.h.{i}"))
            .collect()
    }

    /// Runs every block through `units` from now on (sharding level 3: each block's parameters
    /// gathered for its forward and backward passes only; see [`ShardedUnits`]), whose units
    /// must be [`Gpt::block_prefixes`]. Once per model.
    pub fn shard_blocks(&self, units: Arc<ShardedUnits<B>>) -> Result<()> {
        let blocks = self.transformer.h.len();
        install_units(&self.units, units, blocks, "Gpt::shard_blocks", "blocks")
    }

    /// The configuration.
    pub fn config(&self) -> &GptConfig {
        &self.config
    }

    /// The body (embeddings, blocks, final norm).
    pub fn transformer(&self) -> &GptTransformer<B> {
        &self.transformer
    }

    /// The output head `n_embd → vocab_size` (no bias), tied to the token embedding.
    pub fn lm_head(&self) -> &Linear<B> {
        &self.lm_head
    }

    /// Checks `idx` (i64 `[batch, t]`) and returns `t`, which must fit after `start` positions.
    fn check_tokens(&self, idx: &Tensor<B>, start: usize) -> Result<usize> {
        if idx.dtype() != DType::I64 || idx.rank() != 2 {
            return Err(Error::InvalidArgument {
                op: "Gpt",
                msg: format!(
                    "token indices must be i64 [batch, length], got a {} tensor of shape {}",
                    idx.dtype(),
                    idx.shape()
                ),
            });
        }
        let t = idx.dims()[1];
        if start + t > self.config.block_size {
            return Err(Error::InvalidArgument {
                op: "Gpt",
                msg: format!(
                    "{} positions exceed the block size {}",
                    start + t,
                    self.config.block_size
                ),
            });
        }
        Ok(t)
    }

    /// The summed token and position embeddings of `idx` at positions `start..`.
    fn embed(&self, idx: &Tensor<B>, start: usize) -> Result<Var<B>> {
        let t = self.check_tokens(idx, start)?;
        let tokens = self.transformer.wte.lookup(idx)?;
        let positions = Tensor::arange(
            start as f64,
            (start + t) as f64,
            1.0,
            DType::I64,
            idx.backend(),
        )?;
        let pos = self.transformer.wpe.lookup(&positions)?;
        self.transformer.drop.forward(&tokens.add(&pos)?)
    }

    /// The logits `[batch, t, vocab_size]` of every position of `idx: [batch, t]`.
    pub fn forward(&self, idx: &Tensor<B>) -> Result<Var<B>> {
        self.check_runnable()?;
        let mut x = self.embed(idx, 0)?;
        for (i, block) in self.transformer.h.iter().enumerate() {
            x = match self.units.get() {
                Some(units) => units.run(i, &x, block)?,
                None => block.forward(&x)?,
            };
        }
        self.lm_head.forward(&self.transformer.ln_f.forward(&x)?)
    }

    /// The mean next-token cross-entropy (nats) of `idx: [batch, t]` against
    /// `targets: [batch, t]`.
    pub fn loss(&self, idx: &Tensor<B>, targets: &Tensor<B>) -> Result<Var<B>> {
        let logits = self.forward(idx)?;
        let (b, t, v) = (logits.dims()[0], logits.dims()[1], logits.dims()[2]);
        cross_entropy(&logits.reshape([b * t, v])?, &targets.reshape([b * t])?)
    }

    /// The logits `[batch, n, vocab_size]` of the new tokens `idx: [batch, n]` following the
    /// positions already in `cache`, whose keys and values it appends (inference: no
    /// gradient, no dropout). Equal to the last `n` rows of [`Gpt::forward`] over the whole
    /// sequence.
    pub fn forward_cached(&self, idx: &Tensor<B>, cache: &mut GptCache<B>) -> Result<Tensor<B>> {
        if cache.layers().len() != self.transformer.h.len() {
            return Err(Error::InvalidArgument {
                op: "Gpt::forward_cached",
                msg: format!(
                    "a cache of {} layers for a model of {}",
                    cache.layers().len(),
                    self.transformer.h.len()
                ),
            });
        }
        let training = self.is_training();
        self.set_training(false);
        let result = no_grad(|| {
            self.check_runnable()?;
            let start = cache.len();
            let mut x = self.embed(idx, start)?;
            let layers = cache.layers_mut().iter_mut();
            for (i, (block, layer)) in self.transformer.h.iter().zip(layers).enumerate() {
                let units = self.units.get().map(|u| &**u);
                x = cached_step(units, i, &x, layer, |x, c| block.forward_cached(x, c))?;
            }
            Ok(self
                .lm_head
                .forward(&self.transformer.ln_f.forward(&x)?)?
                .value())
        });
        self.set_training(training);
        result
    }
}

impl<B: Backend> Module<B> for Gpt<B> {
    fn visit(&self, prefix: &str, visitor: &mut dyn ModuleVisitor<B>) {
        self.transformer
            .visit(&child_name(prefix, "transformer"), visitor);
        self.lm_head.visit(&child_name(prefix, "lm_head"), visitor);
    }

    fn set_training(&self, training: bool) {
        self.transformer.set_training(training);
        self.lm_head.set_training(training);
    }

    fn training_mode(&self) -> Option<bool> {
        self.transformer.training_mode()
    }
}

/// Written by hand rather than derived: the derived move would copy the tied weight twice and
/// untie it; this one moves the body and rebuilds the head over the moved embedding.
impl<B: Backend> ToBackend<B> for Gpt<B> {
    type On<B2: Backend> = Gpt<B2>;

    fn to_backend<B2: Backend>(&self, backend: &B2) -> Result<Gpt<B2>> {
        let transformer = self.transformer.to_backend(backend)?;
        let lm_head = Linear::from_vars(transformer.wte.weight().clone(), None)?
            .with_precision(self.lm_head.precision());
        lm_head.set_training(self.lm_head.is_training());
        Ok(Gpt {
            transformer,
            lm_head,
            config: self.config,
            units: OnceLock::new(),
            block_generators: self.block_generators.clone(),
            deferred: self.deferred,
        })
    }
}
