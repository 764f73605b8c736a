//! Loading a Hugging Face folder a block at a time (`PretrainedModel::from_pretrained_deferred`
//! and `load_block`): before its blocks are read the model holds one element per block tensor
//! and refuses to run; after, it computes `transformers`' logits. On three thread ranks of
//! level 3 (`ShardedUnits::initialize`) no rank holds two blocks whole and every rank ends with
//! the folder's values, and a cached decode through the released blocks (or through blocks
//! held each by its owner rank, pipelined) gives the whole model's logits.

use crate::gpt_steps::{bits, is_placeholder};
use crate::pretrained::{fixture, scratch_copy};
use crate::thread_comm::on_ranks;
use std::path::Path;
use std::sync::Arc;
use tessera_core::{BackendStorage, Error, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::checkpoint;
use tessera_nn::distributed::{Communicator, ShardedOptimizer, ShardedUnits};
use tessera_nn::optim::{AdamW, AdamWConfig};
use tessera_nn::pretrained::{PretrainedModel, PretrainedOptions};
use tessera_nn::Module;

const MODELS: [&str; 4] = [
    "gpt2-tiny",
    "gpt2-tiny-sharded",
    "llama-tiny",
    "llama3-tiny",
];

fn deferred(name: &str) -> PretrainedModel<Cpu> {
    let options = PretrainedOptions::default();
    PretrainedModel::from_pretrained_deferred(fixture(name), &Cpu::new(), &options)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// How many blocks of `model` hold no placeholder.
fn blocks_with_values(model: &PretrainedModel<Cpu>) -> usize {
    let params = model.parameters();
    (model.block_prefixes().iter())
        .filter(|prefix| {
            let inside = format!("{prefix}.");
            let mut block = params.iter().filter(|(n, _)| n.starts_with(&inside));
            block.all(|(_, v)| !is_placeholder(&v.value()))
        })
        .count()
}

/// The 5 token ids of the reference logits `transformers` computed.
fn reference_ids(name: &str) -> Tensor<Cpu> {
    let r = checkpoint::load(fixture(name).join("reference.safetensors"), &Cpu::new()).unwrap();
    r.tensors["input_ids_5"].clone()
}

/// The rank of the communicator of `units`.
fn comm_rank(units: &ShardedUnits<Cpu>) -> usize {
    units.communicator().rank()
}

/// The logits of a cached decode of `model`: the reference ids as a prompt, then two single
/// tokens (the prompt's first, then its last), concatenated.
fn decode_in_steps(model: &PretrainedModel<Cpu>, name: &str) -> Vec<f64> {
    let ids = reference_ids(name);
    let t = ids.dims()[1];
    let mut cache = model.new_cache(1).unwrap();
    let mut logits = Vec::new();
    for step in [
        ids.clone(),
        ids.narrow(1, 0, 1).unwrap(),
        ids.narrow(1, t - 1, 1).unwrap(),
    ] {
        let out = model.forward_cached(&step.contiguous().unwrap(), &mut cache);
        logits.extend(out.unwrap().to_vec_f64().unwrap());
    }
    logits
}

fn reference_logits(name: &str) -> Tensor<Cpu> {
    let r = checkpoint::load(fixture(name).join("reference.safetensors"), &Cpu::new()).unwrap();
    r.tensors["logits_5"].clone()
}

#[test]
fn a_deferred_load_refuses_to_run_until_its_blocks_are_read_then_computes_transformers_logits() {
    for name in MODELS {
        let model = deferred(name);
        assert!(model.is_deferred(), "{name}");
        let blocks = model.block_prefixes().len();
        assert!(blocks >= 2, "{name}");
        // Every block matrix is a placeholder (the norms' weights start as ones, not read
        // either); nothing outside the blocks is.
        for (param, var) in model.parameters() {
            let in_block = model
                .block_prefixes()
                .iter()
                .any(|p| param.starts_with(&format!("{p}.")));
            let placeholder = is_placeholder(&var.value());
            if !in_block || var.value().rank() == 2 {
                assert_eq!(placeholder, in_block, "{name}: {param}");
            }
        }
        // A sharded folder holds the same model as its one-file twin.
        let base = name.trim_end_matches("-sharded");
        let ids = reference_ids(base);
        let refused = model.forward(&ids).unwrap_err();
        assert!(matches!(refused, Error::InvalidArgument { .. }), "{name}");
        let first = &model.block_prefixes()[0];
        assert!(refused.to_string().contains(first), "{name}: {refused}");
        let mut cache = model.new_cache(1).unwrap();
        assert!(model.forward_cached(&ids, &mut cache).is_err(), "{name}");
        // Blocks read in another order than they run, one of them twice.
        for block in (0..blocks).rev().chain([0]) {
            model.load_block(block).unwrap();
        }
        assert_eq!(blocks_with_values(&model), blocks, "{name}");
        let logits = model.forward(&ids).unwrap().value();
        let expected = reference_logits(base);
        let (a, b) = (logits.to_vec_f64().unwrap(), expected.to_vec_f64().unwrap());
        assert_eq!(a.len(), b.len(), "{name}");
        let scale = b.iter().map(|v| v.abs()).fold(0.0, f64::max);
        let diff = (a.iter().zip(&b)).fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
        assert!(
            diff / scale < 1e-4,
            "{name}: relative error {:.2e}",
            diff / scale
        );
        let whole =
            PretrainedModel::from_pretrained(fixture(name), &Cpu::new(), &Default::default())
                .unwrap();
        assert!(!whole.is_deferred());
        assert!(
            bits(&model) == bits(&whole),
            "{name}: the parameters differ"
        );
        // A block that does not exist, and a model loaded whole, are typed errors.
        let missing = model.load_block(blocks).unwrap_err();
        assert!(missing.to_string().contains("no block"), "{missing}");
        assert!(matches!(
            whole.load_block(0),
            Err(Error::InvalidArgument { .. })
        ));
    }
}

#[test]
fn a_llama_layer_is_read_as_stored() {
    // Llama's tensor names are the stored ones: each layer's parameters are the file's bits.
    let model = deferred("llama-tiny");
    let stored = checkpoint::load(fixture("llama-tiny").join("model.safetensors"), &Cpu::new())
        .unwrap()
        .tensors;
    model.load_block(1).unwrap();
    let mut compared = 0;
    for (name, var) in model.parameters() {
        if name.starts_with("model.layers.1.") {
            let file = stored[&name].to_vec_f64().unwrap();
            assert_eq!(var.value().to_vec_f64().unwrap(), file, "{name}");
            compared += 1;
        } else if name.starts_with("model.layers.0.") && var.value().rank() == 2 {
            assert!(is_placeholder(&var.value()), "{name} was read too");
        }
    }
    assert!(compared >= 7, "{compared} tensors compared");
}

#[test]
fn a_mis_shaped_block_tensor_fails_the_deferred_load_before_anything_runs() {
    let dir = scratch_copy("llama-tiny");
    let weights = dir.path().join("model.safetensors");
    let mut tensors = checkpoint::load(&weights, &Cpu::new()).unwrap().tensors;
    let name = "model.layers.1.mlp.up_proj.weight";
    let t = tensors[name].clone();
    let cut = t
        .narrow(0, 0, t.dims()[0] - 1)
        .unwrap()
        .contiguous()
        .unwrap();
    tensors.insert(name.to_string(), cut);
    checkpoint::save(&weights, tensors.iter(), &Default::default()).unwrap();
    let options = PretrainedOptions::default();
    let err = PretrainedModel::from_pretrained_deferred(dir.path(), &Cpu::new(), &options)
        .err()
        .expect("a mis-shaped tensor loads");
    assert!(matches!(err, Error::Checkpoint { .. }), "{err:?}");
    assert!(err.to_string().contains(name), "{err}");
}

const RANKS: usize = 3;

#[test]
fn level_three_ranks_read_one_block_at_a_time_and_end_with_the_folders_values() {
    for name in ["gpt2-tiny", "llama-tiny"] {
        let whole =
            PretrainedModel::from_pretrained(fixture(name), &Cpu::new(), &Default::default())
                .unwrap();
        let seen = on_ranks(RANKS, |comm| {
            let comm: Arc<dyn Communicator<Cpu>> = Arc::new(comm);
            let model = deferred(name);
            let units = ShardedUnits::new(comm, model.block_prefixes()).unwrap();
            let adamw = |p| AdamW::new(p, AdamWConfig::new(0.01));
            let sharded =
                ShardedOptimizer::with_units(model.parameters(), &units, 64, adamw).unwrap();
            model.shard_blocks(units.clone()).unwrap();
            // How many blocks held values while each block was read (itself excluded).
            let mut others = Vec::new();
            units
                .initialize(&mut |unit| {
                    others.push(blocks_with_values(&model));
                    model.load_block(unit)
                })
                .unwrap();
            assert!(!units.is_held());
            // Each share holds its own elements only.
            for share in sharded.shards() {
                assert_eq!(share.value().storage().len(), share.numel());
            }
            // Released, a cached decode gathers each block for its step and releases it
            // again: with and without prefetch, no block holds values after.
            let released = decode_in_steps(&model, name);
            assert_eq!(blocks_with_values(&model), 0, "{name}");
            units.set_prefetch(true);
            let prefetched = decode_in_steps(&model, name);
            assert_eq!(blocks_with_values(&model), 0, "{name}");
            // Held by owners (pipelined): each rank holds its own blocks whole, and only them.
            units.hold_by_owners().unwrap();
            let blocks = model.block_prefixes().len();
            let owned = (0..blocks).filter(|&b| units.owner_of(b) == comm_rank(&units));
            assert_eq!(blocks_with_values(&model), owned.count(), "{name}");
            let pipelined = decode_in_steps(&model, name);
            // A cache whose positions another rank computed is refused once the hold ends.
            let mut cache = model.new_cache(1).unwrap();
            model
                .forward_cached(&reference_ids(name), &mut cache)
                .unwrap();
            units.release_all().unwrap();
            assert_eq!(blocks_with_values(&model), 0, "{name}");
            let next = reference_ids(name)
                .narrow(1, 0, 1)
                .unwrap()
                .contiguous()
                .unwrap();
            let continued = model.forward_cached(&next, &mut cache);
            let computed_every_block = (0..blocks).all(|b| units.owner_of(b) == comm_rank(&units));
            assert_eq!(continued.is_ok(), computed_every_block, "{name}");
            units.gather_all().unwrap();
            let held = decode_in_steps(&model, name);
            (
                others,
                bits(&model),
                [released, prefetched, pipelined, held],
            )
        });
        let expected = decode_in_steps(&whole, name);
        for (rank, (others, values, decoded)) in seen.iter().enumerate() {
            assert!(
                others.iter().all(|&n| n == 0),
                "{name}, rank {rank}: {others:?}"
            );
            assert!(*values == bits(&whole), "{name}, rank {rank}'s parameters");
            for logits in decoded {
                assert_eq!(*logits, expected, "{name}, rank {rank}'s logits");
            }
        }
    }
}

/// Every file of `dir` by name, with its bytes.
fn files_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn level_three_ranks_write_the_folder_a_block_at_a_time_as_one_process_writes_it() {
    for name in ["gpt2-tiny", "llama-tiny"] {
        let whole =
            PretrainedModel::from_pretrained(fixture(name), &Cpu::new(), &Default::default())
                .unwrap();
        let tmp = tempfile::tempdir().unwrap();
        // Small files: the folder is sharded, a block's tensors spread over several files.
        let max = 20_000;
        let expected = tmp.path().join("whole");
        whole.save_pretrained_sharded(&expected, max).unwrap();
        let written = tmp.path().join("ranks");
        on_ranks(RANKS, |comm| {
            let comm: Arc<dyn Communicator<Cpu>> = Arc::new(comm);
            let model = deferred(name);
            let units = ShardedUnits::new(comm.clone(), model.block_prefixes()).unwrap();
            let adamw = |p| AdamW::new(p, AdamWConfig::new(0.01));
            let _sharded =
                ShardedOptimizer::with_units(model.parameters(), &units, 64, adamw).unwrap();
            model.shard_blocks(units.clone()).unwrap();
            units
                .initialize(&mut |unit| model.load_block(unit))
                .unwrap();
            model
                .save_pretrained_gathered(&written, max, Some(&units), &*comm)
                .unwrap();
            assert!(!units.is_held());
            // An impossible size fails on every rank.
            let err = model
                .save_pretrained_gathered(&written, 0, Some(&units), &*comm)
                .unwrap_err();
            assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
        });
        let (a, b) = (files_of(&written), files_of(&expected));
        assert!(a.len() > 3, "{name}: {} files", a.len());
        let names = |f: &[(String, Vec<u8>)]| f.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        assert_eq!(names(&a), names(&b), "{name}");
        for ((file, x), (_, y)) in a.iter().zip(&b) {
            if file.ends_with(".safetensors") {
                // The same tensors, names and bytes (the spool may lay them out in another
                // order within a file).
                let load = |bytes: &[u8]| {
                    let dir = tempfile::tempdir().unwrap();
                    let path = dir.path().join("f.safetensors");
                    std::fs::write(&path, bytes).unwrap();
                    let t = checkpoint::load(&path, &Cpu::new()).unwrap();
                    let values: Vec<(String, Vec<f64>)> = (t.tensors.iter())
                        .map(|(n, t)| (n.clone(), t.to_vec_f64().unwrap()))
                        .collect();
                    (values, t.metadata)
                };
                assert!(load(x) == load(y), "{name}: {file}");
            } else {
                assert_eq!(x, y, "{name}: {file}");
            }
        }
        // And it loads back as the model.
        let back =
            PretrainedModel::from_pretrained(&written, &Cpu::new(), &Default::default()).unwrap();
        assert!(bits(&back) == bits(&whole), "{name}");
    }
}

#[test]
fn a_configuration_claiming_more_blocks_than_stored_fails_before_building_them() {
    let dir = scratch_copy("llama-tiny");
    // A million layers would be a million layers of placeholders (gigabytes of handles).
    let path = dir.path().join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let stored = config["num_hidden_layers"].as_u64().unwrap();
    config["num_hidden_layers"] = (1u64 << 20).into();
    std::fs::write(&path, config.to_string()).unwrap();
    for deferred in [false, true] {
        let options = PretrainedOptions::default();
        let loaded = match deferred {
            true => PretrainedModel::from_pretrained_deferred(dir.path(), &Cpu::new(), &options),
            false => PretrainedModel::from_pretrained(dir.path(), &Cpu::new(), &options),
        };
        let err = loaded.err().expect("a million layers load");
        assert!(matches!(err, Error::Checkpoint { .. }), "{err:?}");
        let missing = format!("block {stored}");
        assert!(err.to_string().contains(&missing), "{err}");
    }
}
