//! `ShardedOptimizer` on one rank (`LocalCommunicator`) against the plain optimizer it wraps:
//! the same parameters bit for bit, the same consolidated state, states that load both ways,
//! and typed refusals. The multi-rank equality runs under `mpirun` in
//! `distributed/tests/mpi_ranks.rs`.

use std::sync::Arc;
use tessera_autograd::Var;
use tessera_core::{DType, Error, Generator, Result, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::distributed::{Communicator, LocalCommunicator, ShardLevel, ShardedOptimizer};
use tessera_nn::layers::{Linear, LinearConfig, ReLU, Sequential};
use tessera_nn::loss::cross_entropy;
use tessera_nn::optim::{AdamW, AdamWConfig, Optimizer};
use tessera_nn::{Forward, Module};

type Model = Sequential<(Linear<Cpu>, ReLU, Linear<Cpu>)>;

fn model(dev: &Cpu) -> Model {
    let mut g = Generator::new(3);
    Sequential::new((
        LinearConfig::new(5, 7).init(dev, &mut g).unwrap(),
        ReLU::new(),
        LinearConfig::new(7, 3).init(dev, &mut g).unwrap(),
    ))
}

fn adamw(params: Vec<(String, Var<Cpu>)>) -> Result<AdamW<Cpu>> {
    AdamW::new(
        params,
        AdamWConfig {
            weight_decay: 0.1,
            ..AdamWConfig::new(0.01)
        },
    )
}

fn comm() -> Arc<dyn Communicator<Cpu>> {
    Arc::new(LocalCommunicator::new())
}

fn train(model: &Model, optimizer: &mut dyn Optimizer<Cpu>, steps: std::ops::Range<u64>) {
    let dev = Cpu::new();
    for step in steps {
        let x = Tensor::randn([6, 5], DType::F32, 100 + step, &dev).unwrap();
        let y = Tensor::from_vec(vec![0i64, 1, 2, 1, 0, 2], [6], &dev).unwrap();
        let loss = cross_entropy(&model.forward(&Var::constant(x)).unwrap(), &y).unwrap();
        optimizer.zero_grad();
        loss.backward().unwrap();
        optimizer.step().unwrap();
    }
}

fn bits(model: &Model) -> Vec<u32> {
    model
        .parameters()
        .iter()
        .flat_map(|(_, v)| v.value().to_vec::<f32>().unwrap())
        .map(f32::to_bits)
        .collect()
}

fn sorted_state(state: Vec<(String, Tensor<Cpu>)>) -> Vec<(String, Vec<u64>)> {
    let mut out: Vec<_> = state
        .into_iter()
        .map(|(k, t)| {
            let values = t
                .to_vec_f64()
                .unwrap()
                .into_iter()
                .map(f64::to_bits)
                .collect();
            (k, values)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn levels_one_and_two_train_like_the_plain_optimizer_and_save_its_state() {
    let dev = Cpu::new();
    let plain_model = model(&dev);
    let mut plain = adamw(plain_model.parameters()).unwrap();
    train(&plain_model, &mut plain, 0..5);
    for level in [ShardLevel::OptimizerState, ShardLevel::Gradients] {
        // 40-byte buckets: every parameter in buckets of its own or shared.
        for bucket_bytes in [40, 1 << 20] {
            let m = model(&dev);
            let mut sharded =
                ShardedOptimizer::new(m.parameters(), comm(), level, bucket_bytes, adamw).unwrap();
            train(&m, &mut sharded, 0..5);
            assert_eq!(bits(&m), bits(&plain_model), "{level:?}, {bucket_bytes} B");
            sharded.prepare_checkpoint().unwrap();
            assert_eq!(
                sorted_state(sharded.state()),
                sorted_state(plain.state()),
                "{level:?}: the consolidated state is the plain optimizer's"
            );
            sharded.finish_checkpoint();
            // Without preparing, the state is this rank's shares under the bucket names.
            assert!(sharded.state().iter().all(|(k, _)| k.starts_with("bucket")));
        }
    }
}

#[test]
fn a_plain_state_resumes_sharded_and_a_sharded_state_resumes_plain() {
    let dev = Cpu::new();
    let reference = model(&dev);
    let mut plain = adamw(reference.parameters()).unwrap();
    train(&reference, &mut plain, 0..6);

    // Plain for 3 steps, then sharded from its state.
    let a = model(&dev);
    let mut first = adamw(a.parameters()).unwrap();
    train(&a, &mut first, 0..3);
    let mut second =
        ShardedOptimizer::new(a.parameters(), comm(), ShardLevel::Gradients, 64, adamw).unwrap();
    second.load_state(&first.state()).unwrap();
    train(&a, &mut second, 3..6);
    assert_eq!(bits(&a), bits(&reference));

    // Sharded for 3 steps, then plain from its consolidated state.
    let b = model(&dev);
    let mut first = ShardedOptimizer::new(
        b.parameters(),
        comm(),
        ShardLevel::OptimizerState,
        64,
        adamw,
    )
    .unwrap();
    train(&b, &mut first, 0..3);
    first.prepare_checkpoint().unwrap();
    let mut second = adamw(b.parameters()).unwrap();
    second.load_state(&first.state()).unwrap();
    train(&b, &mut second, 3..6);
    assert_eq!(bits(&b), bits(&reference));
}

#[test]
fn bad_levels_and_states_are_typed_errors() {
    let dev = Cpu::new();
    let m = model(&dev);
    for level in [ShardLevel::Replicated, ShardLevel::Parameters] {
        let made = ShardedOptimizer::new(m.parameters(), comm(), level, 64, adamw);
        assert!(
            matches!(made, Err(Error::InvalidArgument { .. })),
            "{level:?}"
        );
    }
    let mut plain = adamw(m.parameters()).unwrap();
    train(&m, &mut plain, 0..1);
    let good = plain.state();
    let mut sharded =
        ShardedOptimizer::new(m.parameters(), comm(), ShardLevel::Gradients, 64, adamw).unwrap();

    let mut extra = good.clone();
    extra.push(("nonsense.exp_avg".into(), good[1].1.clone()));
    let mut reshaped = good.clone();
    let at = reshaped
        .iter()
        .position(|(k, _)| k.ends_with("exp_avg"))
        .unwrap();
    reshaped[at].1 = Tensor::zeros([1], DType::F32, &dev).unwrap();
    let missing: Vec<_> = good.iter().skip(1).cloned().collect();
    for (what, state) in [
        ("extra", extra),
        ("reshaped", reshaped),
        ("missing", missing),
    ] {
        match sharded.load_state(&state) {
            Err(Error::InvalidArgument { msg, .. }) => assert!(!msg.is_empty(), "{what}"),
            other => panic!("{what}: expected a typed error, got {other:?}"),
        }
    }
    // A refused state leaves the optimizer usable.
    sharded.load_state(&good).unwrap();
}

mod level_three {
    use super::*;
    use tessera_nn::distributed::ShardedUnits;
    use tessera_nn::gpt::{Gpt, GptConfig};

    fn gpt(dev: &Cpu) -> Gpt<Cpu> {
        GptConfig::new(2, 2, 16, 8, 11)
            .dropout(0.2)
            .init(dev, &mut Generator::new(9))
            .unwrap()
    }

    /// The next-token loss function of a language model over 11 tokens.
    type LossFn<'a> = &'a dyn Fn(&Tensor<Cpu>, &Tensor<Cpu>) -> tessera_core::Result<Var<Cpu>>;

    /// One optimizer step of `loss` on two windows of 8 tokens drawn from `seed`: the loss.
    fn lm_step(loss: LossFn<'_>, optimizer: &mut dyn Optimizer<Cpu>, seed: u64) -> f64 {
        let dev = Cpu::new();
        let tokens: Vec<i64> = (0..2 * 9)
            .map(|i| ((i as u64 * 7 + seed) % 11) as i64)
            .collect();
        let all = Tensor::from_vec(tokens, [2, 9], &dev).unwrap();
        let x = all.narrow(1, 0, 8).unwrap().contiguous().unwrap();
        let y = all.narrow(1, 1, 8).unwrap().contiguous().unwrap();
        optimizer.zero_grad();
        let loss = loss(&x, &y).unwrap();
        loss.backward().unwrap();
        optimizer.step().unwrap();
        loss.value().to_scalar_f64().unwrap()
    }

    fn step(model: &Gpt<Cpu>, optimizer: &mut dyn Optimizer<Cpu>, seed: u64) -> f64 {
        lm_step(&|x, y| model.loss(x, y), optimizer, seed)
    }

    fn gpt_bits(model: &Gpt<Cpu>) -> Vec<u32> {
        model
            .parameters()
            .iter()
            .flat_map(|(_, v)| v.value().to_vec::<f32>().unwrap())
            .map(f32::to_bits)
            .collect()
    }

    #[test]
    fn sharded_blocks_with_dropout_train_like_the_plain_model() {
        let dev = Cpu::new();
        let plain_model = gpt(&dev);
        plain_model.train();
        let mut plain = adamw(plain_model.parameters()).unwrap();
        let plain_losses: Vec<f64> = (0..4).map(|s| step(&plain_model, &mut plain, s)).collect();

        let model = gpt(&dev);
        model.train();
        let units = ShardedUnits::new(comm(), model.block_prefixes()).unwrap();
        let mut sharded =
            ShardedOptimizer::with_units(model.parameters(), &units, 64, adamw).unwrap();
        model.shard_blocks(units.clone()).unwrap();
        units.release_all().unwrap();
        // Between uses a block's parameters are one-element placeholders.
        let (_, block_weight) = model
            .parameters()
            .into_iter()
            .find(|(n, _)| n.starts_with("transformer.h.0."))
            .unwrap();
        assert_eq!(
            block_weight
                .value()
                .to_vec::<f32>()
                .unwrap()
                .iter()
                .filter(|&&v| v != 0.0)
                .count(),
            0
        );
        let losses: Vec<f64> = (0..4).map(|s| step(&model, &mut sharded, s)).collect();
        assert_eq!(losses, plain_losses);
        units.gather_all().unwrap();
        assert_eq!(gpt_bits(&model), gpt_bits(&plain_model));
        sharded.prepare_checkpoint().unwrap();
        assert_eq!(sorted_state(sharded.state()), sorted_state(plain.state()));
        sharded.finish_checkpoint();
        // Held whole, then released again: training continues where it was.
        units.release_all().unwrap();
        assert_eq!(
            step(&model, &mut sharded, 4),
            step(&plain_model, &mut plain, 4)
        );
    }

    /// A Llama with grouped-query attention and a tied head, its layers sharded over two
    /// ranks (each layer gathered for its forward pass and again for its backward pass) and
    /// both ranks on the same batches: the same losses and parameters, bit for bit, as the
    /// plain model trained in one process (the gradients averaged over two equal copies).
    #[test]
    fn sharded_llama_layers_on_two_ranks_train_like_the_plain_model() {
        use crate::thread_comm::on_ranks;
        use tessera_nn::llama::{Llama, LlamaConfig};
        fn llama(dev: &Cpu) -> Llama<Cpu> {
            let mut config = LlamaConfig::new(11, 16, 24, 3, 4, 2, 16);
            config.tie_word_embeddings = true;
            config.init(dev, &mut Generator::new(5)).unwrap()
        }
        fn step(model: &Llama<Cpu>, optimizer: &mut dyn Optimizer<Cpu>, seed: u64) -> f64 {
            lm_step(&|x, y| model.loss(x, y), optimizer, seed)
        }
        let dev = Cpu::new();
        let plain_model = llama(&dev);
        let mut plain = adamw(plain_model.parameters()).unwrap();
        let plain_losses: Vec<f64> = (0..3).map(|s| step(&plain_model, &mut plain, s)).collect();
        let plain_bits = crate::gpt_steps::bits(&plain_model);

        let results = on_ranks(2, |comm| {
            let comm: Arc<dyn Communicator<Cpu>> = Arc::new(comm);
            let dev = Cpu::new();
            let model = llama(&dev);
            let prefixes = model.layer_prefixes();
            assert_eq!(prefixes[2], "model.layers.2");
            let units = ShardedUnits::new(comm, prefixes).unwrap();
            let mut sharded =
                ShardedOptimizer::with_units(model.parameters(), &units, 64, adamw).unwrap();
            model.shard_layers(units.clone()).unwrap();
            // Sharding twice is refused by name.
            let again = model.shard_layers(units.clone()).unwrap_err().to_string();
            assert!(again.contains("already"), "{again}");
            units.release_all().unwrap();
            let losses: Vec<f64> = (0..3).map(|s| step(&model, &mut sharded, s)).collect();
            units.gather_all().unwrap();
            (losses, crate::gpt_steps::bits(&model))
        });
        for (losses, model_bits) in results {
            assert_eq!(losses, plain_losses);
            assert!(
                model_bits == plain_bits,
                "the parameters differ from the plain model's"
            );
        }
    }
}

/// Level 3's evaluation (`evaluate_in_lockstep`): ranks whose test shares differ in length run
/// as many forward passes as the longest, each unit gathered as it runs.
mod lockstep_evaluation {
    use crate::thread_comm::on_ranks;
    use std::sync::Arc;
    use tessera_core::{DType, Result};
    use tessera_cpu::Cpu;
    use tessera_nn::data::{DataLoader, Dataset, LoaderConfig};
    use tessera_nn::distributed::{Communicator, ShardedOptimizer, ShardedUnits};
    use tessera_nn::models::ModelKind;
    use tessera_nn::optim::{Sgd, SgdConfig};
    use tessera_nn::training::{evaluate, evaluate_in_lockstep};
    use tessera_nn::Module;

    /// `n` images of 784 pixels (from item `first` on), labels of 10 classes.
    #[derive(Clone)]
    struct Pixels {
        n: usize,
        first: usize,
    }

    impl Dataset for Pixels {
        fn len(&self) -> usize {
            self.n
        }
        fn item_dims(&self) -> &[usize] {
            &[784]
        }
        fn fill_batch(&self, at: &[usize], x: &mut Vec<f32>, y: &mut Vec<i64>) -> Result<()> {
            for &i in at {
                let i = i + self.first;
                x.extend((0..784).map(|p| ((i * 31 + p * 7) % 97) as f32 / 97.0));
                y.push((i % 10) as i64);
            }
            Ok(())
        }
    }

    #[test]
    fn ranks_with_test_shares_of_different_lengths_evaluate_level_three_in_lockstep() {
        // Batches of 2: 3, 1 and no batches.
        let lens = [5usize, 2, 0];
        let results = on_ranks(3, |comm| {
            let comm: Arc<dyn Communicator<Cpu>> = Arc::new(comm);
            let rank = comm.rank();
            let dev = Cpu::new();
            let plain = ModelKind::Mlp.build(DType::F32, 3, &dev).unwrap();
            let model = ModelKind::Mlp.build(DType::F32, 3, &dev).unwrap();
            let units = ShardedUnits::new(comm.clone(), model.unit_prefixes()).unwrap();
            let model = model.shard_layers(units.clone()).unwrap();
            let _optimizer = ShardedOptimizer::with_units(model.parameters(), &units, 4096, |s| {
                Sgd::new(s, SgdConfig::new(0.1))
            })
            .unwrap();
            units.release_all().unwrap();
            let data = Pixels {
                n: lens[rank],
                first: 10 * rank,
            };
            let loader = DataLoader::new(data, LoaderConfig::new(2).sequential()).unwrap();
            let got = evaluate_in_lockstep(&model, &loader, &dev, &*comm).unwrap();
            let want = evaluate(&plain, &loader, &dev).unwrap();
            // The parameters stay released (nothing held them whole).
            assert!(!units.is_held());
            (got, want)
        });
        for (rank, (got, want)) in results.iter().enumerate() {
            assert_eq!(got, want, "rank {rank}");
            assert_eq!(got.samples, lens[rank]);
        }
    }
}
