//! What the model suites share: the reference models by name, their multiply-add counts (for
//! GFLOP/s), and random inputs of the right shape.

use clap::ValueEnum;
use tessera_core::{Backend, DType, Result, Tensor};
use tessera_nn::models::ModelKind;

/// A reference model of `tessera_nn::models`, as named on the command line and in records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModelName {
    /// `tessera_nn::models::mlp`: 784-512-512-10 with ReLU.
    Mlp,
    /// `tessera_nn::models::cnn`: two conv 3x3 + max-pool blocks, then 3136-128-10.
    Cnn,
}

impl ModelName {
    /// Both models, MLP first.
    pub const ALL: [ModelName; 2] = [ModelName::Mlp, ModelName::Cnn];

    /// The name in records and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ModelName::Mlp => "mlp",
            ModelName::Cnn => "cnn",
        }
    }

    /// The `nn` model kind.
    pub fn kind(self) -> ModelKind {
        match self {
            ModelName::Mlp => ModelKind::Mlp,
            ModelName::Cnn => ModelKind::Cnn,
        }
    }

    /// Multiply-adds of each weight layer for one sample's forward pass, input layer first.
    pub fn layer_macs(self) -> Vec<f64> {
        match self {
            ModelName::Mlp => vec![784.0 * 512.0, 512.0 * 512.0, 512.0 * 10.0],
            ModelName::Cnn => vec![
                // conv 1→32, 3x3, on 28x28; conv 32→64, 3x3, on 14x14; then the two linears.
                32.0 * 28.0 * 28.0 * 9.0,
                64.0 * 14.0 * 14.0 * 32.0 * 9.0,
                3136.0 * 128.0,
                128.0 * 10.0,
            ],
        }
    }

    /// Floating-point operations of one sample's forward pass (2 per multiply-add).
    pub fn forward_flops(self) -> f64 {
        2.0 * self.layer_macs().iter().sum::<f64>()
    }

    /// Floating-point operations of one sample's training step: the forward pass, the weight
    /// gradients (as much again) and the input gradients of every layer but the first.
    pub fn train_flops(self) -> f64 {
        let macs = self.layer_macs();
        let all: f64 = macs.iter().sum();
        2.0 * (3.0 * all - macs[0])
    }

    /// A standard-normal input batch of `batch` samples and random labels in `0..10`.
    pub fn random_batch<B: Backend>(
        self,
        batch: usize,
        seed: u64,
        dev: &B,
    ) -> Result<(Tensor<B>, Tensor<B>)> {
        let mut dims = vec![batch];
        dims.extend(self.kind().sample_dims());
        let x = Tensor::<B>::randn(dims, DType::F32, seed, dev)?;
        let labels: Vec<i64> = (0..batch as u64)
            .map(|i| (tessera_nn::data::SplitMix64::new(seed ^ i).next_u64() % 10) as i64)
            .collect();
        let y = Tensor::from_vec(labels, [batch], dev)?;
        Ok((x, y))
    }
}

/// Parses a comma-separated model list (`mlp,cnn`) for clap.
pub fn model_list_words(models: &[ModelName]) -> String {
    models
        .iter()
        .map(|m| m.name())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flop_counts_follow_the_layers() {
        let mlp = ModelName::Mlp;
        assert_eq!(
            mlp.forward_flops(),
            2.0 * (784.0 * 512.0 + 512.0 * 512.0 + 5120.0)
        );
        // Training: forward + weight gradients + input gradients of layers 2 and 3.
        let expected = 2.0 * (2.0 * 668_672.0 + 512.0 * 512.0 + 5120.0);
        assert_eq!(mlp.train_flops(), expected);
        assert!(ModelName::Cnn.forward_flops() > 8.0e6);
    }

    #[test]
    fn random_batches_have_the_model_input_shape() {
        let dev = tessera_cpu::Cpu::new();
        let (x, y) = ModelName::Cnn.random_batch(3, 1, &dev).unwrap();
        assert_eq!(x.dims(), [3, 1, 28, 28]);
        assert_eq!(y.dims(), [3]);
        let labels = y.to_vec::<i64>().unwrap();
        assert!(labels.iter().all(|&l| (0..10).contains(&l)));
    }
}
