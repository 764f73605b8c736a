//! `mpirun -np 2 train --distributed`: the command trains data-parallel, rank 0 alone prints the
//! summary (with `world_size` and the total throughput) and writes the checkpoint; a 2-rank
//! run interrupted and relaunched with `--resume` ends bit for bit where it ends uninterrupted;
//! every sharding level trains the same model, and level 3 fits a GPT under a memory limit that
//! stops plain data parallelism. Uses this package's `train` when the tests are built with the
//! `mpi` feature (CI: `cargo test --workspace --features tessera-cli/mpi`), otherwise builds one
//! with `--features mpi` (a nested cargo sharing this target folder). Skipped, printing why,
//! without Open MPI's `mpirun` (unless `TESSERA_REQUIRE_MPI` is set, as in CI) or the data set.

use crate::common;

use common::{
    assert_same_state, data_available, final_state, mpi_train, mpirun, skip_reason, summary, train,
    train_with_mpi, write_corpus,
};
use std::process::Command;
use tessera_nn::run::RunDir;

#[test]
fn two_ranks_train_and_rank_zero_alone_reports_and_saves() {
    if let Some(reason) = skip_reason() {
        println!("skipped: {reason}");
        return;
    }
    let train = train_with_mpi();
    let dir = tempfile::tempdir().unwrap();
    let checkpoint = dir.path().join("run");
    let out = mpirun(2)
        .arg(&train)
        .args(["--distributed", "--epochs", "1", "--batch-size", "32"])
        .args(["--train-limit", "1024", "--test-limit", "500", "--save"])
        .arg(&checkpoint)
        .output()
        .expect("mpirun starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let summaries: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(summaries.len(), 1, "one JSON line, from rank 0\n{stdout}");
    let summary = &summaries[0];
    assert_eq!(summary["world_size"], 2, "{summary}");
    assert_eq!(summary["batch_size"], 32, "{summary}");
    assert_eq!(summary["global_batch_size"], 64, "{summary}");
    assert!(
        summary["samples_per_s"].as_f64().unwrap() > 0.0,
        "{summary}"
    );
    // 1024 samples in 16 steps of 64: well above the 10% of chance on 500 test images.
    let accuracy = summary["test_accuracy"].as_f64().unwrap();
    assert!(accuracy > 0.3, "{summary}");
    assert_eq!(stderr.matches("epoch 1/1").count(), 1, "{stderr}");
    assert!(
        checkpoint.join("model.safetensors").exists(),
        "rank 0 saved no model"
    );
}

#[test]
fn two_ranks_train_in_f16_and_skip_overflowing_steps_together() {
    if let Some(reason) = skip_reason() {
        println!("skipped: {reason}");
        return;
    }
    // The scaler starts at 2^16: the first steps overflow in f16 and are skipped. A rank that
    // skipped alone would leave the other waiting in the gradient all-reduce (a timeout here).
    let out = mpirun(2)
        .arg(train_with_mpi())
        .args(["--distributed", "--precision", "f16", "--epochs", "1"])
        .args([
            "--batch-size",
            "32",
            "--train-limit",
            "1024",
            "--test-limit",
            "500",
        ])
        .output()
        .expect("mpirun starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let summary: serde_json::Value = stdout
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .expect("rank 0's JSON line");
    assert_eq!(summary["precision"], "f16", "{summary}");
    let accuracy = summary["test_accuracy"].as_f64().unwrap();
    assert!(accuracy > 0.3, "{summary}");
}

#[test]
fn distributed_without_mpi_says_how_to_build_it() {
    if cfg!(feature = "mpi") {
        println!("skipped: this train is built with the mpi feature");
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_train"))
        .args(["--distributed", "--epochs", "1"])
        .output()
        .expect("train starts");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--features mpi"), "{stderr}");
}

#[test]
fn an_interrupted_two_rank_run_resumes_bit_for_bit() {
    if let Some(reason) = skip_reason() {
        println!("skipped: {reason}");
        return;
    }
    let train = train_with_mpi();
    let tmp = tempfile::tempdir().unwrap();
    let (whole, pieces) = (tmp.path().join("whole"), tmp.path().join("pieces"));
    let out = mpi_train(&train, &whole, &[]).output().unwrap();
    let reference = summary(&out);
    assert_eq!(reference["world_size"], 2);
    // Each rank halts after step 5 (after the checkpoint of step 3), as a killed job would.
    let out = mpi_train(&train, &pieces, &["--halt-after-step", "5"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(RunDir::open(&pieces).unwrap().steps().unwrap(), vec![3]);
    let resumed = summary(&mpi_train(&train, &pieces, &["--resume"]).output().unwrap());
    assert_eq!(resumed["resumed_from_step"], 3);
    assert_eq!(resumed["test_accuracy"], reference["test_accuracy"]);
    assert_same_state(&final_state(&whole), &final_state(&pieces), "2 ranks");
}

/// A small GPT on a text of its own, as the 2-rank tests train it.
fn gpt_args(corpus: &str) -> Vec<&str> {
    vec![
        "--model",
        "gpt",
        "--data",
        corpus,
        "--steps",
        "12",
        "--block-size",
        "8",
        "--n-layer",
        "1",
        "--n-head",
        "2",
        "--n-embd",
        "16",
        "--eval-interval",
        "4",
        "--eval-iters",
        "1",
        "--sample-chars",
        "0",
        "--dropout",
        "0.1",
        "--batch-size",
        "8",
    ]
}

#[test]
fn two_ranks_train_a_gpt_and_an_interrupted_job_resumes_bit_for_bit() {
    if let Some(reason) = skip_reason() {
        println!("skipped: {reason}");
        return;
    }
    let train = train_with_mpi();
    let tmp = tempfile::tempdir().unwrap();
    let corpus = write_corpus(
        tmp.path(),
        &"To be or not to be, that is the question.\n%\n".repeat(60),
    );
    let args = gpt_args(&corpus);
    let (whole, pieces) = (tmp.path().join("whole"), tmp.path().join("pieces"));
    let out = mpi_train(&train, &whole, &args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let reference = summary(&out);
    assert_eq!(reference["world_size"], 2, "{reference}");
    assert_eq!(reference["global_batch_size"], 16, "{reference}");
    // Rank 0 alone prints; the model learns (step 0's validation loss is printed first).
    assert_eq!(stderr.matches("step     0:").count(), 1, "{stderr}");
    let first: f64 = stderr
        .split("step     0: train loss ")
        .nth(1)
        .and_then(|rest| rest.split(", val loss ").nth(1))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("step 0's validation loss");
    assert!(
        reference["val_loss"].as_f64().unwrap() < first - 0.1,
        "{reference} vs {first}"
    );

    let mut halted = args.clone();
    halted.extend(["--halt-after-step", "5"]);
    assert!(!mpi_train(&train, &pieces, &halted)
        .output()
        .unwrap()
        .status
        .success());
    let mut resumed = args.clone();
    resumed.push("--resume");
    let again = summary(&mpi_train(&train, &pieces, &resumed).output().unwrap());
    assert_eq!(again["resumed_from_step"], 4);
    for key in ["val_loss", "train_loss", "skipped_steps"] {
        assert_eq!(again[key], reference[key], "{key}");
    }
    assert_same_state(&final_state(&whole), &final_state(&pieces), "2-rank GPT");
}

#[test]
fn sharded_levels_train_the_same_model_and_resume_across_levels() {
    if let Some(reason) = skip_reason() {
        println!("skipped: {reason}");
        return;
    }
    let train = train_with_mpi();
    let tmp = tempfile::tempdir().unwrap();
    let run = |name: &str, extra: &[&str]| {
        let dir = tmp.path().join(name);
        let out = mpi_train(&train, &dir, extra).output().unwrap();
        (dir, out)
    };
    let (plain_dir, out) = run("plain", &[]);
    let plain = summary(&out);
    assert_eq!(plain["shard"], 0, "{plain}");
    let plain_state = final_state(&plain_dir);
    // Level 3: each linear layer a unit, its parameters gathered for its passes only.
    for level in ["1", "2", "3"] {
        let (dir, out) = run(&format!("level{level}"), &["--shard", level]);
        let sharded = summary(&out);
        assert_eq!(sharded["shard"].to_string(), level, "{sharded}");
        assert_eq!(
            sharded["test_accuracy"], plain["test_accuracy"],
            "{sharded}"
        );
        // The same model and the same (consolidated) optimizer state, bit for bit.
        assert_same_state(&plain_state, &final_state(&dir), &format!("level {level}"));
        for key in ["state_bytes_per_rank", "peak_rss_bytes"] {
            assert!(sharded[key].as_u64().unwrap() > 0, "{key}: {sharded}");
        }
        assert!(
            sharded["state_bytes_per_rank"].as_u64() < plain["state_bytes_per_rank"].as_u64(),
            "level {level} holds less than plain data parallelism: {sharded} vs {plain}"
        );
    }
    // Interrupted at level 2, resumed at level 1: still the plain run's end.
    let pieces = tmp.path().join("pieces");
    let halted = mpi_train(&train, &pieces, &["--shard", "2", "--halt-after-step", "5"])
        .output()
        .unwrap();
    assert!(!halted.status.success());
    let resumed = summary(
        &mpi_train(&train, &pieces, &["--shard", "1", "--resume"])
            .output()
            .unwrap(),
    );
    assert_eq!(resumed["resumed_from_step"], 3);
    assert_same_state(&plain_state, &final_state(&pieces), "level 2, resumed at 1");
    // Interrupted at level 3 and resumed there (the `Learner` reads the units one at a time,
    // `run::resume_sharded`): still the plain run's end.
    let pieces = tmp.path().join("pieces-3");
    let halted = mpi_train(&train, &pieces, &["--shard", "3", "--halt-after-step", "5"])
        .output()
        .unwrap();
    assert!(!halted.status.success());
    let resumed = summary(
        &mpi_train(&train, &pieces, &["--shard", "3", "--resume"])
            .output()
            .unwrap(),
    );
    assert_eq!(resumed["resumed_from_step"], 3);
    assert_same_state(&plain_state, &final_state(&pieces), "level 3, resumed at 3");
}

#[test]
fn sharded_gpts_train_like_the_plain_one_and_level_three_resumes_bit_for_bit() {
    if let Some(reason) = skip_reason() {
        println!("skipped: {reason}");
        return;
    }
    let train = train_with_mpi();
    let tmp = tempfile::tempdir().unwrap();
    let corpus = write_corpus(
        tmp.path(),
        &"All that glitters is not gold.\n%\n".repeat(60),
    );
    let mut reference = None;
    let mut level_two_bytes = Vec::new();
    // Level 2 also with buckets of about 1 KB: many reduce-scattered during backward.
    for (level, bucket_mb) in [("0", "25"), ("2", "25"), ("2", "0.001"), ("3", "25")] {
        let mut args = gpt_args(&corpus);
        args.extend(["--shard", level, "--bucket-mb", bucket_mb]);
        let folder = tmp.path().join(format!("{level}-{bucket_mb}"));
        let out = mpi_train(&train, &folder, &args).output().unwrap();
        let report = summary(&out);
        assert_eq!(report["shard"].to_string(), level, "{report}");
        if level == "2" {
            level_two_bytes.push(report["state_bytes_per_rank"].as_u64().unwrap());
        }
        let loss = report["val_loss"].as_f64().unwrap();
        match reference {
            None => reference = Some(loss),
            // Gradient clipping sums the norm in another order when sharded: equal to rounding.
            Some(want) => assert!(
                ((loss - want) / want).abs() < 1e-5,
                "level {level}: validation loss {loss} vs {want}"
            ),
        }
    }
    // Smaller buckets: fewer whole gradients held at once.
    assert!(
        level_two_bytes[1] < level_two_bytes[0],
        "{level_two_bytes:?}"
    );
    // Level 3 with its gathers prefetched (each on a thread while a block computes, and
    // evaluation passes between): bit for bit level 3 without.
    // It also samples 24 characters at the end: every rank through the sharded blocks (no
    // rank holds the whole model), rank 0 reporting them.
    let mut args = gpt_args(&corpus);
    args.extend(["--shard", "3", "--shard-prefetch"]);
    let at = args.iter().position(|a| *a == "--sample-chars").unwrap();
    args[at + 1] = "24";
    let prefetched = tmp.path().join("3-prefetch");
    let out = mpi_train(&train, &prefetched, &args).output().unwrap();
    let report = summary(&out);
    assert_eq!(report["shard"], 3, "{report}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("sample:\n").count(), 1, "{err}");
    let rest = &err[err.find("sample:\n").unwrap() + "sample:\n".len()..];
    let sample: String = rest.chars().take(24).collect();
    assert!(rest[sample.len()..].starts_with("\n\n"), "{err}");
    assert_same_state(
        &final_state(&tmp.path().join("3-25")),
        &final_state(&prefetched),
        "level-3 GPT with prefetch",
    );
    // Level 3 interrupted after step 5 and resumed (from step 4): bit for bit its whole run.
    let mut args = gpt_args(&corpus);
    args.extend(["--shard", "3"]);
    let pieces = tmp.path().join("pieces");
    let mut halted = args.clone();
    halted.extend(["--halt-after-step", "5"]);
    assert!(!mpi_train(&train, &pieces, &halted)
        .output()
        .unwrap()
        .status
        .success());
    args.push("--resume");
    let again = summary(&mpi_train(&train, &pieces, &args).output().unwrap());
    assert_eq!(again["resumed_from_step"], 4);
    assert_same_state(
        &final_state(&tmp.path().join("3-25")),
        &final_state(&pieces),
        "level-3 GPT",
    );
}

/// `train --init-from DIR --distributed`: two ranks fine-tune the Llama folder (grouped-query
/// attention) at levels 0, 1 and 3 to the same validation loss (to rounding: a sharded norm
/// sums in another order), level 3 holding less state per rank; level 3 interrupted and
/// resumed ends bit for bit where its whole run does, and its saved folder is the same file.
#[test]
fn two_ranks_fine_tune_a_llama_folder_at_every_level_and_level_three_resumes_bit_for_bit() {
    if let Some(reason) = skip_reason() {
        println!("skipped: {reason}");
        return;
    }
    let train = train_with_mpi();
    let tmp = tempfile::tempdir().unwrap();
    let corpus = write_corpus(tmp.path(), &"the cat sat on the mat. ".repeat(400));
    let args = |level: &str| -> Vec<String> {
        let mut args = common::finetune_args("llama-tiny", &corpus);
        args.extend(["--shard".to_string(), level.to_string()]);
        args
    };
    let run = |dir: &std::path::Path, args: &[String]| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        mpi_train(&train, dir, &args).output().unwrap()
    };
    let mut reports = Vec::new();
    for level in ["0", "1", "3"] {
        let report = summary(&run(&tmp.path().join(level), &args(level)));
        assert_eq!(report["world_size"], 2, "{report}");
        assert_eq!(report["shard"].to_string(), level, "{report}");
        assert_eq!(report["model_type"], "llama", "{report}");
        reports.push(report);
    }
    let loss = |r: &serde_json::Value| r["final_val_loss"].as_f64().unwrap();
    assert!(loss(&reports[0]) < reports[0]["initial_val_loss"].as_f64().unwrap());
    for r in &reports[1..] {
        let rel = ((loss(r) - loss(&reports[0])) / loss(&reports[0])).abs();
        assert!(rel < 1e-5, "{r} vs {}", reports[0]);
    }
    let bytes = |r: &serde_json::Value| r["state_bytes_per_rank"].as_u64().unwrap();
    assert!(bytes(&reports[2]) < bytes(&reports[0]), "{reports:?}");

    let pieces = tmp.path().join("pieces");
    let mut halted = args("3");
    halted.extend(["--halt-after-step", "5"].map(String::from));
    assert!(!run(&pieces, &halted).status.success());
    let mut resumed = args("3");
    resumed.push("--resume".into());
    let again = summary(&run(&pieces, &resumed));
    assert_eq!(again["resumed_from_step"], 4);
    assert_eq!(again["final_val_loss"], reports[2]["final_val_loss"]);
    assert_same_state(
        &final_state(&tmp.path().join("3")),
        &final_state(&pieces),
        "level-3 fine-tuning",
    );
    assert_eq!(
        std::fs::read(tmp.path().join("3").join("model.safetensors")).unwrap(),
        std::fs::read(pieces.join("model.safetensors")).unwrap()
    );
}

#[test]
fn level_three_runs_in_one_process_and_unknown_levels_and_bucket_sizes_are_refused_by_name() {
    if !data_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = train(&tmp.path().join("mlp"), &["--shard", "3", "--epochs", "1"]);
    assert_eq!(summary(&out)["shard"], 3);
    let out = train(
        &tmp.path().join("early"),
        &["--shard", "2", "--shard-prefetch"],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--shard-prefetch"), "{stderr}");
    let out = train(
        &tmp.path().join("overlap"),
        &["--shard", "1", "--overlap-reductions"],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--overlap-reductions"), "{stderr}");
    let out = train(&tmp.path().join("four"), &["--shard", "4"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("sharding level"), "{stderr}");
    for bad in ["0", "-1", "nan", "lots"] {
        let arg = format!("--bucket-mb={bad}");
        let out = train(&tmp.path().join("bucket"), &["--distributed", &arg]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(stderr.contains("bucket size in MiB"), "{bad}: {stderr}");
    }
}

#[test]
fn a_cnn_at_level_three_and_overlapped_level_two_trains_the_plain_cnn_bit_for_bit() {
    if let Some(reason) = skip_reason() {
        println!("skipped: {reason}");
        return;
    }
    let train = train_with_mpi();
    let tmp = tempfile::tempdir().unwrap();
    let cnn = [
        "--model",
        "cnn",
        "--epochs",
        "1",
        "--train-limit",
        "256",
        "--test-limit",
        "100",
    ];
    let run = |level: &'static str, extra: &[&'static str]| {
        let dir = tmp.path().join(format!("{level}{}", extra.len()));
        let mut args = cnn.to_vec();
        args.extend(["--shard", level, "--batch-size", "32"]);
        args.extend(extra);
        let report = summary(&mpi_train(&train, &dir, &args).output().unwrap());
        (report, final_state(&dir), common::model_file(&dir))
    };
    let ((plain, plain_state, plain_model), (units, units_state, units_model)) =
        (run("0", &[]), run("3", &[]));
    assert_eq!(units["shard"], 3, "{units}");
    assert_eq!(units["test_accuracy"], plain["test_accuracy"], "{units}");
    assert_same_state(&plain_state, &units_state, "the CNN at level 3");
    // `model.safetensors`, written from each layer gathered to rank 0 in turn at level 3.
    assert!(!units_model.is_empty());
    assert!(
        units_model == plain_model,
        "the level-3 model file differs from plain data parallelism's"
    );
    let (prefetched, prefetched_state, _) = run("3", &["--shard-prefetch"]);
    assert_eq!(prefetched["test_accuracy"], plain["test_accuracy"]);
    assert_same_state(
        &plain_state,
        &prefetched_state,
        "the CNN at level 3 with prefetch",
    );
    // Level 2 with each bucket's reduce-scatter started during backward (on MPI's thread)
    // and settled at the step: bit for bit plain data parallelism.
    let (overlapped, overlapped_state, _) = run("2", &["--overlap-reductions"]);
    assert_eq!(overlapped["shard"], 2, "{overlapped}");
    assert_eq!(overlapped["test_accuracy"], plain["test_accuracy"]);
    assert_same_state(
        &plain_state,
        &overlapped_state,
        "the CNN at level 2 with overlapped reductions",
    );
    assert!(
        units["state_bytes_per_rank"].as_u64() < plain["state_bytes_per_rank"].as_u64(),
        "{units} vs {plain}"
    );
}

/// What a run of the memory test saves.
#[derive(Clone, Copy)]
enum Save {
    Nothing,
    Sharded,
    OneFile,
}

/// `mpirun -np 4` of the MPI `train` with `args`, each rank's address space limited to
/// `limit_bytes` (`ulimit -v`) when given, one thread per rank.
fn four_ranks_under(train: &std::path::Path, limit_bytes: Option<u64>, args: &[&str]) -> Command {
    let mut cmd = mpirun(4);
    if let Some(limit) = limit_bytes {
        let kib = (limit / 1024).to_string();
        cmd.args([
            "sh",
            "-c",
            "ulimit -v \"$0\" && shift && exec \"$@\"",
            &kib,
            "_",
        ]);
    }
    cmd.arg(train).arg("--distributed").args(args);
    cmd
}

/// The memory test: a GPT (8 blocks of width 384, 14M parameters: 227 MB of f32
/// parameters, gradients and AdamW moments per rank unsharded) on 4 ranks, under a per-process
/// address-space limit set halfway between what level 3 and plain data parallelism were measured
/// to need (`peak_virtual_bytes`, the largest rank's `VmPeak`): level 3 trains under it, and
/// plain data parallelism stops with a typed out-of-memory error (not an abort) on its ranks.
/// Level 3 also saves and resumes under the limit, with sharded checkpoints (each rank writes
/// its share) and with one-file checkpoints (gathered a bucket at a time).
#[test]
fn a_gpt_over_a_memory_limit_trains_at_level_three_and_fails_typed_without_sharding() {
    if let Some(reason) = skip_reason() {
        println!("skipped: {reason}");
        return;
    }
    let train = train_with_mpi();
    let tmp = tempfile::tempdir().unwrap();
    let corpus = write_corpus(tmp.path(), &"Many hands make light work.\n%\n".repeat(200));
    let saved = tmp.path().join("saved").display().to_string();
    let gathered = tmp.path().join("gathered").display().to_string();
    // `save`: none, sharded checkpoints or (gathered a bucket at a time) one-file ones.
    let args_saving = |level: &'static str, save: Save| {
        let mut a = vec!["--model", "gpt", "--data", &corpus, "--steps", "2"];
        match save {
            Save::Sharded => a.extend(["--save", &saved, "--sharded-checkpoints"]),
            Save::OneFile => a.extend(["--save", &gathered]),
            Save::Nothing => a.push("--no-save"),
        }
        a.extend(["--block-size", "16", "--batch-size", "2", "--n-layer", "8"]);
        a.extend(["--n-head", "6", "--n-embd", "384", "--dropout", "0"]);
        a.extend([
            "--eval-interval",
            "2",
            "--eval-iters",
            "1",
            "--sample-chars",
            "0",
        ]);
        a.extend(["--shard", level]);
        a
    };
    let args = |level| args_saving(level, Save::Nothing);
    let measured = |level| {
        summary(
            &four_ranks_under(&train, None, &args(level))
                .output()
                .unwrap(),
        )
    };
    let (sharded, plain) = (measured("3"), measured("0"));
    let figure = |v: &serde_json::Value, key: &str| v[key].as_u64().unwrap();
    let (state3, state0) = (
        figure(&sharded, "state_bytes_per_rank"),
        figure(&plain, "state_bytes_per_rank"),
    );
    // 1/4 of the plain state, plus one block's parameters and gradients (1/8 of the plain
    // parameters and gradients: 1/16 of the plain state), plus the root's (embeddings, norm).
    assert!(
        state3 <= state0 / 4 + state0 / 16 + state0 / 50,
        "level 3 holds {state3} bytes, plain {state0}"
    );
    let (virt3, virt0) = (
        figure(&sharded, "peak_virtual_bytes"),
        figure(&plain, "peak_virtual_bytes"),
    );
    assert!(
        virt0 > virt3 + (64 << 20),
        "plain data parallelism's peak address space {virt0} is not clearly above level 3's {virt3}"
    );
    let limit = virt3 + (virt0 - virt3) / 2;
    println!(
        "peak address space: level 3 {virt3}, plain {virt0}; limit {limit} (state bytes {state3} vs {state0})"
    );

    let out = four_ranks_under(&train, Some(limit), &args("3"))
        .output()
        .unwrap();
    let report = summary(&out);
    assert_eq!(report["shard"], 3, "{report}");
    // Level 3 saves under the limit too when every rank writes its own share...
    let out = four_ranks_under(&train, Some(limit), &args_saving("3", Save::Sharded))
        .output()
        .unwrap();
    summary(&out);
    let run = RunDir::open(&saved).unwrap();
    let manifest = tessera_nn::run::Manifest::read(&run.manifest_path(2)).unwrap();
    assert_eq!(manifest.shards.len(), 4, "{manifest:?}");
    let total: u64 = manifest.shards.iter().map(|f| f.bytes).sum();
    for file in &manifest.shards[1..] {
        assert!(file.bytes < total / 3, "{manifest:?}");
    }
    // ...and resumes from it under the limit: each rank reads the model and its share of the
    // optimizer state, not the whole checkpoint.
    let mut resume = args_saving("3", Save::Sharded);
    resume.push("--resume");
    let out = four_ranks_under(&train, Some(limit), &resume)
        .output()
        .unwrap();
    assert_eq!(summary(&out)["resumed_from_step"], 2);
    // ...and when the one-file checkpoint is gathered a bucket at a time (rank 0 spools it),
    // which then resumes under the limit too.
    let out = four_ranks_under(&train, Some(limit), &args_saving("3", Save::OneFile))
        .output()
        .unwrap();
    summary(&out);
    let run = RunDir::open(&gathered).unwrap();
    let manifest = tessera_nn::run::Manifest::read(&run.manifest_path(2)).unwrap();
    assert!(!manifest.is_sharded(), "{manifest:?}");
    let mut resume = args_saving("3", Save::OneFile);
    resume.push("--resume");
    let out = four_ranks_under(&train, Some(limit), &resume)
        .output()
        .unwrap();
    assert_eq!(summary(&out)["resumed_from_step"], 2);

    let out = four_ranks_under(&train, Some(limit), &args("0"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "plain data parallelism fitted under {limit} bytes"
    );
    assert!(
        stderr.contains("out of memory"),
        "no typed out-of-memory error:\n{stderr}"
    );
    for abort in ["memory allocation of", "signal", "panicked"] {
        assert!(!stderr.contains(abort), "{abort}:\n{stderr}");
    }
}

/// `checkpoint consolidate DIR --all`: every sharded checkpoint of the run folder as one file.
fn consolidate(dir: &std::path::Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_checkpoint"))
        .arg("consolidate")
        .arg(dir)
        .arg("--all")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
}

/// `mpirun -np ranks train --distributed` with the run arguments of [`mpi_train`].
fn mpi_train_on(
    ranks: usize,
    train: &std::path::Path,
    dir: &std::path::Path,
    extra: &[&str],
) -> Command {
    let mut cmd = mpirun(ranks);
    cmd.arg(train)
        .arg("--distributed")
        .args(common::run_args(dir, extra));
    cmd
}

/// Copies the files of folder `from` (and its subfolders) into a new folder `to`.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        match entry.file_type().unwrap().is_dir() {
            true => copy_dir(&entry.path(), &target),
            false => {
                std::fs::copy(entry.path(), target).unwrap();
            }
        }
    }
}

/// Whether the newest checkpoint of `dir` is sharded over `ranks` files.
fn newest_is_sharded_over(dir: &std::path::Path, ranks: usize) -> bool {
    let run = RunDir::open(dir).unwrap();
    let step = *run.steps().unwrap().last().unwrap();
    let manifest = tessera_nn::run::Manifest::read(&run.manifest_path(step)).unwrap();
    manifest.shards.len() == ranks
}

#[test]
fn sharded_checkpoints_resume_bit_for_bit_and_on_other_numbers_of_ranks() {
    if let Some(reason) = skip_reason() {
        println!("skipped: {reason}");
        return;
    }
    let train = train_with_mpi();
    let tmp = tempfile::tempdir().unwrap();
    let sharded = ["--shard", "2", "--sharded-checkpoints"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        sharded.iter().chain(extra).copied().collect()
    };
    let whole = tmp.path().join("whole");
    let reference = summary(&mpi_train(&train, &whole, &with(&[])).output().unwrap());
    assert!(newest_is_sharded_over(&whole, 2));
    // Halted after step 4: the newest checkpoint is step 3's, inside the first epoch.
    let pieces = tmp.path().join("pieces");
    assert!(
        !mpi_train(&train, &pieces, &with(&["--halt-after-step", "4"]))
            .output()
            .unwrap()
            .status
            .success()
    );
    assert_eq!(RunDir::open(&pieces).unwrap().steps().unwrap(), vec![3]);
    assert!(newest_is_sharded_over(&pieces, 2));
    // Four ranks take over the rest of an epoch two ranks had split (in a copy of the run)...
    let four_ranks = tmp.path().join("four-ranks");
    copy_dir(&pieces, &four_ranks);
    let out = mpi_train_on(4, &train, &four_ranks, &with(&["--resume"]))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("resuming inside epoch 1 on 4 ranks"),
        "{stderr}"
    );
    let four = summary(&out);
    assert_eq!(
        (
            four["resumed_from_step"].as_u64(),
            four["world_size"].as_u64()
        ),
        (Some(3), Some(4)),
        "{four}"
    );
    // ...and two ranks continue bit for bit.
    let resumed = summary(
        &mpi_train(&train, &pieces, &with(&["--resume"]))
            .output()
            .unwrap(),
    );
    assert_eq!(resumed["resumed_from_step"], 3);
    assert_eq!(resumed["test_accuracy"], reference["test_accuracy"]);
    consolidate(&whole);
    consolidate(&pieces);
    assert!(newest_is_sharded_over(&pieces, 0));
    assert_same_state(
        &final_state(&whole),
        &final_state(&pieces),
        "sharded checkpoints",
    );
    // A checkpoint at an epoch's end (step 5: 5 steps of 2 x 64 of 640 samples) resumes on
    // four ranks.
    let epoch_end = tmp.path().join("epoch-end");
    let no_mid_epoch = ["--checkpoint-every", "100"];
    let halt = with(&[no_mid_epoch[0], no_mid_epoch[1], "--halt-after-step", "6"]);
    assert!(!mpi_train(&train, &epoch_end, &halt)
        .output()
        .unwrap()
        .status
        .success());
    assert_eq!(RunDir::open(&epoch_end).unwrap().steps().unwrap(), vec![5]);
    let resume = with(&[no_mid_epoch[0], no_mid_epoch[1], "--resume"]);
    let four = summary(
        &mpi_train_on(4, &train, &epoch_end, &resume)
            .output()
            .unwrap(),
    );
    assert_eq!(
        (
            four["resumed_from_step"].as_u64(),
            four["world_size"].as_u64()
        ),
        (Some(5), Some(4))
    );
    assert!(
        newest_is_sharded_over(&epoch_end, 4),
        "the resumed run saves over 4 ranks"
    );
}

#[test]
fn a_level_three_gpt_with_sharded_checkpoints_resumes_bit_for_bit_and_on_four_ranks() {
    if let Some(reason) = skip_reason() {
        println!("skipped: {reason}");
        return;
    }
    let train = train_with_mpi();
    let tmp = tempfile::tempdir().unwrap();
    let corpus = write_corpus(tmp.path(), &"Brevity is the soul of wit.\n%\n".repeat(60));
    let mut args = gpt_args(&corpus);
    args.extend(["--shard", "3", "--sharded-checkpoints"]);
    let whole = tmp.path().join("whole");
    summary(&mpi_train(&train, &whole, &args).output().unwrap());
    let pieces = tmp.path().join("pieces");
    let mut halted = args.clone();
    halted.extend(["--halt-after-step", "5"]);
    assert!(!mpi_train(&train, &pieces, &halted)
        .output()
        .unwrap()
        .status
        .success());
    assert!(newest_is_sharded_over(&pieces, 2));
    // A copy of the interrupted run folder, to resume on four ranks.
    let copy = tmp.path().join("copy");
    std::fs::create_dir_all(copy.join("checkpoints")).unwrap();
    for entry in std::fs::read_dir(pieces.join("checkpoints")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(
            entry.path(),
            copy.join("checkpoints").join(entry.file_name()),
        )
        .unwrap();
    }
    let mut resumed = args.clone();
    resumed.push("--resume");
    let again = summary(&mpi_train(&train, &pieces, &resumed).output().unwrap());
    assert_eq!(again["resumed_from_step"], 4);
    consolidate(&whole);
    consolidate(&pieces);
    assert_same_state(
        &final_state(&whole),
        &final_state(&pieces),
        "level-3 GPT, sharded checkpoints",
    );
    let out = mpi_train_on(4, &train, &copy, &resumed).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let four = summary(&out);
    assert_eq!(
        (
            four["resumed_from_step"].as_u64(),
            four["world_size"].as_u64()
        ),
        (Some(4), Some(4))
    );
    assert!(stderr.contains("written by 2 rank(s)"), "{stderr}");
    assert!(four["val_loss"].as_f64().unwrap().is_finite(), "{four}");
}
