//! `train --save DIR --resume`: a run interrupted after any step (the hidden
//! `--halt-after-step`, which exits as a kill would) and resumed, once or several times, ends
//! with bit-identical parameters, optimizer state, per-epoch figures and test accuracy to the
//! same run uninterrupted: on the CPU in f32, bf16 and f16 (with the loss scaler), for the MLP
//! and the CNN, and on OpenCL when a device is present. Mismatched resumes are refused.
//! Skips, printing why, without Fashion-MNIST.

use crate::common;

use common::{
    assert_same_state, data_available, final_state, summary, train, write_corpus, HALTED,
};
use serde_json::Value;
use tessera_nn::run::RunDir;

/// Runs `args` uninterrupted, then interrupted after each step of `halts` in turn (resuming
/// each time), and compares the two ends bit for bit.
fn check_resume_is_exact(args: &[&str], halts: &[usize]) {
    let tmp = tempfile::tempdir().unwrap();
    let (whole, pieces) = (tmp.path().join("whole"), tmp.path().join("pieces"));
    let reference = summary(&train(&whole, args));
    assert_eq!(reference["resumed_from_step"], Value::Null);
    assert_eq!(reference["checkpoint"], whole.display().to_string());

    let mut resumed_from = None;
    for (i, halt) in halts.iter().enumerate() {
        let mut a = args.to_vec();
        let halt = halt.to_string();
        a.extend(["--halt-after-step", &halt]);
        if i > 0 {
            a.push("--resume");
        }
        let out = train(&pieces, &a);
        assert_eq!(
            out.status.code(),
            Some(HALTED),
            "{args:?} halted at {halt}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        resumed_from = RunDir::open(&pieces)
            .unwrap()
            .steps()
            .unwrap()
            .last()
            .copied();
    }
    let mut a = args.to_vec();
    a.push("--resume");
    let resumed = summary(&train(&pieces, &a));
    assert_eq!(
        resumed["resumed_from_step"],
        resumed_from.map_or(Value::Null, Value::from)
    );
    // The summaries agree on everything but the timings, the process's measured memory and the
    // folder.
    let figures = |v: &Value| {
        let mut v = v.as_object().unwrap().clone();
        for measured in [
            "seconds",
            "samples_per_s",
            "tokens_per_s",
            "peak_rss_bytes",
            "peak_virtual_bytes",
        ] {
            v.remove(measured);
        }
        for other in ["resumed_from_step", "checkpoint"] {
            v.remove(other);
        }
        v
    };
    assert_eq!(
        figures(&resumed),
        figures(&reference),
        "{args:?} halts {halts:?}"
    );
    let context = format!("{args:?} halts {halts:?}");
    assert_same_state(&final_state(&whole), &final_state(&pieces), &context);
    // The folder's newest model is the final one.
    assert_eq!(
        std::fs::read(whole.join("model.safetensors")).unwrap(),
        std::fs::read(pieces.join("model.safetensors")).unwrap()
    );
}

#[test]
fn an_interrupted_mlp_run_resumes_bit_for_bit_in_every_precision() {
    if !data_available() {
        return;
    }
    // After a checkpoint (3), between two (5: back to 3), at an epoch's last step before its
    // evaluation (10: back to 9), and twice in one run (4, then 16).
    for precision in ["f32", "bf16", "f16"] {
        let args = ["--model", "mlp", "--precision", precision];
        for halts in [&[3][..], &[5], &[10], &[4, 16]] {
            check_resume_is_exact(&args, halts);
        }
    }
}

#[test]
fn an_interrupted_cnn_run_resumes_bit_for_bit() {
    if !data_available() {
        return;
    }
    check_resume_is_exact(&["--model", "cnn", "--optimizer", "sgd"], &[7]);
}

#[test]
fn an_interrupted_gpt_run_resumes_bit_for_bit() {
    let tmp = tempfile::tempdir().unwrap();
    let text = "To be or not to be, that is the question.\n%\nWhether 'tis nobler.\n%\n";
    let corpus = write_corpus(tmp.path(), &text.repeat(40));
    let corpus = corpus.as_str();
    // 12 steps, estimates every 4, checkpoints every 3 as well; dropout draws masks.
    for precision in ["f32", "f16"] {
        let args = [
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
            "--precision",
            precision,
        ];
        for halts in [&[5][..], &[7, 10]] {
            check_resume_is_exact(&args, halts);
        }
    }
}

/// `train --init-from DIR` (a Hugging Face folder fine-tuned): interrupted and resumed, the
/// run ends bit for bit where the uninterrupted one does, for GPT-2 in f32 and for Llama
/// (grouped-query attention) in f16 with the loss scaler; the newest Hugging Face weights are
/// the same file too.
#[test]
fn an_interrupted_fine_tuning_run_resumes_bit_for_bit() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = write_corpus(tmp.path(), &"the cat sat on the mat. ".repeat(400));
    for (name, precision, halts) in [
        ("gpt2-tiny", "f32", &[5][..]),
        ("llama-tiny", "f16", &[7, 10][..]),
    ] {
        let mut args = common::finetune_args(name, &corpus);
        args.extend(["--precision".to_string(), precision.to_string()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        check_resume_is_exact(&args, halts);
    }
}

#[test]
fn an_interrupted_run_on_opencl_resumes_bit_for_bit() {
    if !data_available() {
        return;
    }
    if let Err(e) = tessera_opencl::OpenCl::new() {
        println!("skipped: no OpenCL device ({e})");
        return;
    }
    check_resume_is_exact(&["--model", "mlp", "--backend", "opencl"], &[5]);
}

#[test]
fn resuming_another_configuration_or_overwriting_a_run_is_refused() {
    if !data_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    let out = train(&dir, &["--halt-after-step", "4"]);
    assert_eq!(out.status.code(), Some(HALTED));

    let out = train(&dir, &["--resume", "--lr", "0.002"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("`lr`") && stderr.contains("0.002"),
        "{stderr}"
    );

    let out = train(&dir, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("--resume"), "{stderr}");

    // A damaged newest checkpoint: the run says so and resumes from the one before.
    let run = RunDir::open(&dir).unwrap();
    assert_eq!(run.steps().unwrap(), vec![3]);
    let out = train(&dir, &["--halt-after-step", "7", "--resume"]);
    assert_eq!(out.status.code(), Some(HALTED));
    assert_eq!(run.steps().unwrap(), vec![3, 6]);
    std::fs::write(run.checkpoint_path(6), b"torn").unwrap();
    let done = train(&dir, &["--resume"]);
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(summary(&done)["resumed_from_step"], 3, "{stderr}");
    assert!(stderr.contains("skipped a damaged checkpoint"), "{stderr}");
}
