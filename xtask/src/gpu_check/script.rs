//! `run.sh`, the bundle's entry point on a GPU machine: `nvidia-smi` first, then the driver's
//! library folder on the loader path, then every check with a time limit, each writing its
//! output into the results folder given as the only argument. It ends with the lifecycle
//! report measured on that machine ([`lifecycle_steps`], run through `lifecycle.sh`).
//!
//! Step limits add up to at most [`STEP_BUDGET_S`] (one 10-minute device command with room to
//! start): a limit is the most a step may take, not what it is expected to take.

/// The most seconds all steps' limits may add up to.
pub const STEP_BUDGET_S: u32 = 540;

/// One step of the script: a name (its output files are `<name>.out` and `<name>.err`), a time
/// limit in seconds and the command line (shell words; `$here` is the bundle folder).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// Name of the step and of its output files.
    pub name: &'static str,
    /// Seconds before `timeout` stops it.
    pub limit_s: u32,
    /// The command, as shell words.
    pub command: String,
}

/// The steps: the conformance suite (every family in f32, f64, f16 and bf16 where the device
/// declares them, cuBLAS in each, TF32), short training runs (f32 and bf16), and the GEMM
/// benchmarks (cuBLAS in f32 and TF32, the tiled kernel).
pub fn steps(has_data: bool, train_samples: usize, test_samples: usize) -> Vec<Step> {
    let bench = "\"$here/bin/tessera-bench\" --backend cuda";
    let mut steps = vec![
        // The families run their F16/BF16 cells wherever `supports_dtype` says yes; the test
        // `cuda_declares_the_16_bit_dtypes` fails if CUDA does not declare them.
        Step {
            name: "conformance",
            // 15-19 s on an H200 (2026-12-04).
            limit_s: 75,
            command: "\"$here/bin/gpu_conformance\" --test-threads=8".into(),
        },
        // Alone, because it asserts that the device-wide cuBLAS counter did not move.
        Step {
            name: "conformance-tiled",
            limit_s: 10,
            command: "\"$here/bin/gpu_conformance\" --ignored --exact matmul_with_the_tiled_kernel"
                .into(),
        },
        Step {
            name: "index-error",
            limit_s: 10,
            command: "\"$here/bin/gpu_index_error\"".into(),
        },
        // One rank only: NCCL refuses two ranks of a communicator on one GPU, and the machine
        // has one H200. Skips, saying so, without libnccl.so.2 (pip install nvidia-nccl-cu12).
        Step {
            name: "nccl-allreduce",
            limit_s: 15,
            command: "\"$here/bin/nccl_library\" --nocapture --test-threads=1".into(),
        },
    ];
    // Limits of the training runs (each took 1 s on an H200, 2026-12-04): a few seconds of work
    // on an H200 each, plus start-up
    // (context, kernels, cuBLAS); they were 60 s before the 16-bit and lifecycle steps, 40 s
    // before the sharded GPT step. (The GPT's train and generate steps gave 5 s each to the
    // pretrained-model step.)
    if has_data {
        steps.push(Step {
            name: "train-mlp",
            limit_s: 25,
            command: format!(
                "\"$here/bin/train\" --backend cuda --model mlp --epochs 2 --data \"$here/data\" \
                 --train-limit {train_samples} --test-limit {test_samples}"
            ),
        });
        // The data-parallel path on one rank: DistributedDataParallel over NCCL (or, without
        // libnccl.so.2, the host), built without MPI so the GPU machine needs no libmpi.
        steps.push(Step {
            name: "train-ddp-1rank",
            limit_s: 15,
            command: "\"$here/bin/train\" --backend cuda --distributed --comm auto --model mlp \
                      --epochs 1 --data \"$here/data\" --train-limit 2000 --test-limit 500"
                .into(),
        });
        steps.push(Step {
            name: "train-cnn",
            limit_s: 25,
            command: format!(
                "\"$here/bin/train\" --backend cuda --model cnn --epochs 1 --data \"$here/data\" \
                 --train-limit {train_samples} --test-limit {test_samples}"
            ),
        });
        // Mixed precision on the GPU: bf16 linear layers (16-bit kernels, cuBLAS GemmEx with
        // f32 compute), f32 master weights; its accuracy line sits beside train-mlp's.
        steps.push(Step {
            name: "train-mlp-bf16",
            limit_s: 25,
            command: format!(
                "\"$here/bin/train\" --backend cuda --model mlp --precision bf16 --epochs 2 \
                 --data \"$here/data\" --train-limit {train_samples} --test-limit {test_samples}"
            ),
        });
    }
    // The f32 matrix products through cuBLAS (TF32 off), with TF32 allowed, and on the tiled
    // kernel. The mlp and infer benchmarks that were here are now the lifecycle steps' (on
    // CUDA in f32, TF32 and bf16, with the CPU beside them).
    steps.extend([
        Step {
            name: "bench-gemm-auto",
            limit_s: 25,
            command: format!(
                "env TESSERA_CUDA_GEMM=auto {bench} gemm --sizes 256,1024,4096 --reps 10"
            ),
        },
        Step {
            name: "bench-gemm-tf32",
            limit_s: 15,
            command: format!(
                "env TESSERA_CUDA_GEMM=auto {bench} --precision tf32 gemm --sizes 1024,4096 \
                 --reps 10"
            ),
        },
        Step {
            name: "bench-gemm-tiled",
            limit_s: 15,
            command: format!(
                "env TESSERA_CUDA_GEMM=tiled {bench} gemm --sizes 256,1024,4096 --reps 10"
            ),
        },
    ]);
    steps
}

/// One column of the lifecycle report: a backend in a precision, the limit of its step and
/// the suites it runs (`@DATA@` is the bundle's data folder, `@OUT@` the records folder).
struct LifecycleRun {
    name: &'static str,
    backend: &'static str,
    precision: &'static str,
    limit_s: u32,
    suites: &'static [&'static str],
}

/// The suites needing the Fashion-MNIST slice.
fn needs_data(suite: &str) -> bool {
    suite.contains("@DATA@")
}

/// The lifecycle report measured on the GPU machine itself: every phase (prep, train, eval,
/// infer-1, infer-batch; MLP, CNN and GPT) on the CPU backend with all its cores and on CUDA in
/// f32, TF32 and bf16, each run's records in `$results/lifecycle/<run>.jsonl`, then
/// `tessera-bench lifecycle-report` renders `lifecycle.{md,json,svg}` with the speedup of
/// each column over the CPU per phase. Prep has no matrix product and is measured in f32
/// only. Without the data slice, prep and eval are left out.
pub fn lifecycle_steps(has_data: bool) -> Vec<Step> {
    const ALL_F32: &[&str] = &[
        "prep --data @DATA@ --reps 3",
        "mlp --reps 10",
        "cnn --reps 10",
        "infer --reps 10",
        "eval --data @DATA@ --reps 3",
        "gpt --reps 5 --init @OUT@/gpt-init.safetensors",
    ];
    let runs = [
        LifecycleRun {
            name: "cpu",
            backend: "cpu",
            precision: "f32",
            // 4 s on the H200 machine's 16 cores (2026-12-04).
            limit_s: 20,
            suites: ALL_F32,
        },
        LifecycleRun {
            name: "cuda",
            backend: "cuda",
            precision: "f32",
            // 6 s on an H200 (2026-12-04).
            limit_s: 20,
            suites: ALL_F32,
        },
        LifecycleRun {
            name: "cuda-tf32",
            backend: "cuda",
            precision: "tf32",
            // 25 s until the pretrained-model step needed room in the budget.
            limit_s: 20,
            suites: &ALL_F32[1..],
        },
        LifecycleRun {
            name: "cuda-bf16",
            backend: "cuda",
            precision: "bf16",
            limit_s: 20,
            suites: &ALL_F32[1..],
        },
    ];
    let mut steps: Vec<Step> = runs
        .iter()
        .map(|run| {
            let suites: Vec<String> = run
                .suites
                .iter()
                .filter(|s| has_data || !needs_data(s))
                .map(|s| format!("\"{s}\""))
                .collect();
            Step {
                name: match run.name {
                    "cpu" => "lifecycle-cpu",
                    "cuda" => "lifecycle-cuda",
                    "cuda-tf32" => "lifecycle-cuda-tf32",
                    _ => "lifecycle-cuda-bf16",
                },
                limit_s: run.limit_s,
                command: format!(
                    "bash \"$here/lifecycle.sh\" \"$here\" \"$results/lifecycle\" {} {} {} {}",
                    run.name,
                    run.backend,
                    run.precision,
                    suites.join(" ")
                ),
            }
        })
        .collect();
    steps.push(Step {
        name: "lifecycle-report",
        limit_s: 5,
        command: "\"$here/bin/tessera-bench\" lifecycle-report \"$results/lifecycle\" \
                  --gpu \"$gpu_name\""
            .into(),
    });
    steps
}

/// `lifecycle.sh HERE OUT RUN BACKEND PRECISION SUITE...`: runs `tessera-bench --backend
/// BACKEND --precision PRECISION` once per SUITE (its words, with `@DATA@` and `@OUT@`
/// replaced), appending the records to `OUT/RUN.jsonl`; exits non-zero if any suite failed,
/// after running the others.
pub fn lifecycle_script() -> String {
    r#"#!/usr/bin/env bash
# Generated by `cargo xtask gpu-check`: one column of the lifecycle report (see run.sh).
# Usage: lifecycle.sh HERE OUT RUN BACKEND PRECISION SUITE...
set -uo pipefail
here=$1 out=$2 run=$3 backend=$4 precision=$5
shift 5
mkdir -p "$out"
status=0
for suite in "$@"; do
  words=()
  for word in $suite; do
    case $word in
      @DATA@) words+=("$here/data") ;;
      @OUT@/*) words+=("$out/${word#@OUT@/}") ;;
      *) words+=("$word") ;;
    esac
  done
  echo "==> $run: tessera-bench --backend $backend --precision $precision ${words[*]}"
  started=$SECONDS
  if ! "$here/bin/tessera-bench" --backend "$backend" --precision "$precision" "${words[@]}"       >>"$out/$run.jsonl"; then
    echo "$run: ${words[0]} failed" >&2
    status=1
  fi
  echo "    ${words[0]}: $((SECONDS - started))s"
done
exit "$status"
"#
    .to_string()
}

/// The GPT's steps, run after [`steps`] when the bundle has its text slice: a short
/// `train --model gpt` whose checkpoint goes into the results folder, then `generate` from it
/// (its stderr reports the first-token latency and tokens/s).
pub fn gpt_steps() -> Vec<Step> {
    vec![
        Step {
            name: "train-gpt",
            limit_s: 10,
            command: "\"$here/bin/train\" --backend cuda --model gpt --data \"$here/text\" \
                      --steps 60 --eval-interval 30 --eval-iters 2 --sample-chars 100 \
                      --save \"$results/gpt-checkpoint\""
                .into(),
        },
        // Sharding level 3 on one rank (NCCL when libnccl.so.2 loads, else the host): the
        // blocks gathered for their passes (each gather started ahead of its block, which for
        // NCCL queues it on the stream) and released, their gradients reduce-scattered; then
        // the end-of-run sample decodes with key/value caches through the blocks held by their
        // owner (`ShardedUnits::hold_by_owners`; on one rank, every block). Without prefetch
        // and the sample it ran on an H200 on 2026-12-04.
        Step {
            name: "train-gpt-shard3-1rank",
            limit_s: 10,
            command: "\"$here/bin/train\" --backend cuda --distributed --comm auto --shard 3 \
                      --shard-prefetch --model gpt --data \"$here/text\" --steps 30 --eval-interval 15 \
                      --eval-iters 2 --sample-chars 40 --save \"$results/gpt-shard3\""
                .into(),
        },
        Step {
            name: "generate-gpt",
            limit_s: 5,
            command: "\"$here/bin/generate\" --backend cuda --checkpoint \
                      \"$results/gpt-checkpoint\" --tokens 200 --seed 1"
                .into(),
        },
    ]
}

/// `gpt_peer.sh`: the GPT step and generation on CUDA against PyTorch on the same GPU
/// (`peers/gpt_torch.py --device cuda`), alternating; skips, saying why, without PyTorch's CUDA.
pub const GPT_PEER_SCRIPT: &str = include_str!("gpt_peer.sh");

/// The step running [`GPT_PEER_SCRIPT`] (records in `$results/gpt-peer/`).
pub fn gpt_peer_step() -> Step {
    Step {
        name: "gpt-vs-torch",
        // 90 s ended it during its third case on an H200 (2026-12-04).
        limit_s: 150,
        command: "bash \"$here/gpt_peer.sh\" \"$here\" \"$results/gpt-peer\"".into(),
    }
}

/// The pretrained-model step, run after the GPT's when the bundle has the Hugging Face
/// fixtures (`hf/`, from `fixtures/hf`): greedy generation from a GPT-2 folder in f32 and from a
/// Llama 3 folder (bf16 weights, rope scaling) computing in bf16 (each reports its first-token
/// latency and tokens/s), then, with the text slice, a short fine-tuning of the Llama folder.
/// One step (one limit) for the three commands: the bundle's budget has no room for three
/// limits, and each of these runs for about a second on a GPU. The `decode` benchmark of the
/// 124M shapes is not in the bundle (no room in the budget; `cargo xtask bench decode --backend
/// cuda` runs it).
pub fn pretrained_steps(has_text: bool) -> Vec<Step> {
    let mut commands = vec![
        "\"$here/bin/generate\" --backend cuda --model-dir \"$here/hf/gpt2-tiny\" --prompt \
         \"The meaning of life is\" --tokens 64 --temperature 0 --ignore-eos"
            .to_string(),
        "\"$here/bin/generate\" --backend cuda --model-dir \"$here/hf/llama3-tiny\" --precision \
         bf16 --prompt \"The meaning of life is\" --tokens 64 --temperature 0 --ignore-eos"
            .to_string(),
    ];
    if has_text {
        commands.push(
            "\"$here/bin/train\" --backend cuda --init-from \"$here/hf/llama-tiny\" --data \
             \"$here/text\" --steps 20 --eval-interval 10 --eval-iters 2 --batch-size 8 \
             --block-size 32 --save \"$results/llama-finetuned\""
                .to_string(),
        );
        // Fine-tuning in f16 (the loss scaler) interrupted after step 15 (exit status 75, as
        // a kill) and resumed from its step-10 checkpoint.
        let run = "\"$here/bin/train\" --backend cuda --init-from \"$here/hf/llama-tiny\" --data \
                   \"$here/text\" --steps 20 --eval-interval 10 --eval-iters 2 --batch-size 8 \
                   --block-size 32 --precision f16 --save \"$results/llama-resumed\"";
        commands.push(format!(
            "( {run} --halt-after-step 15; test $? -eq 75 ) && {run} --resume | tail -n 1 | grep \
             -q resumed_from_step.:10"
        ));
    }
    vec![Step {
        name: "pretrained-hf",
        limit_s: 25,
        // The bundle and results folders reach the inner shell as $1 and $2.
        command: format!(
            "bash -c '{}' pretrained-hf \"$here\" \"$results\"",
            commands
                .join(" && ")
                .replace("$here", "$1")
                .replace("$results", "$2")
        ),
    }]
}

/// The script's text.
pub fn run_script(steps: &[Step]) -> String {
    let mut s = String::from(
        r#"#!/usr/bin/env bash
# Generated by `cargo xtask gpu-check`: runs Tessera's CUDA checks on a machine with an NVIDIA
# GPU and its driver. Usage: bash run.sh RESULTS_DIR
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
results="${1:?usage: run.sh RESULTS_DIR}"
mkdir -p "$results"
: > "$results/summary.txt"

echo "==> nvidia-smi"
if ! nvidia-smi 2>&1 | tee "$results/nvidia-smi.txt"; then
  echo "nvidia-smi failed: no NVIDIA driver on this machine" | tee -a "$results/summary.txt"
  exit 1
fi
gpu_name="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"

# The driver's library folder goes first on the loader path: the binaries were linked against
# a stub libcuda.so (soname libcuda.so.1) and carry no rpath, so they load the real driver.
driver_dir=""
for dir in $(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 /{print $NF}' | xargs -r -n1 dirname) \
    /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/nvidia/lib64 /usr/lib/wsl/lib /usr/local/cuda/compat; do
  if [ -e "$dir/libcuda.so.1" ]; then driver_dir="$dir"; break; fi
done
if [ -z "$driver_dir" ]; then
  echo "no libcuda.so.1 found (is the NVIDIA driver installed?)" | tee -a "$results/summary.txt"
  exit 1
fi
export LD_LIBRARY_PATH="$driver_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "driver library folder: $driver_dir" | tee -a "$results/summary.txt"
# Kernels compiled ahead of time (NVRTC is used instead when the folder lacks one).
export TESSERA_CUDA_KERNELS="$here/kernels"
export RUST_BACKTRACE=1

status=0
# step NAME LIMIT_S COMMAND...: runs COMMAND with a time limit, output into the results folder.
step() {
  local name=$1 limit=$2
  shift 2
  echo "==> $name (limit ${limit}s): $*"
  local started=$SECONDS
  timeout "$limit" "$@" >"$results/$name.out" 2>"$results/$name.err"
  local rc=$?
  echo "$name: exit $rc after $((SECONDS - started))s" | tee -a "$results/summary.txt"
  [ "$rc" -eq 0 ] || status=1
  tail -n 4 "$results/$name.out"
}

"#,
    );
    for step in steps {
        s.push_str(&format!(
            "step {} {} {}\n",
            step.name, step.limit_s, step.command
        ));
    }
    s.push_str("\necho \"==> done (status $status); results in $results\"\nexit \"$status\"\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_smi_and_the_loader_path_come_before_any_binary() {
        let script = run_script(&steps(true, 100, 50));
        let smi = script.find("nvidia-smi 2>&1").unwrap();
        let path = script.find("export LD_LIBRARY_PATH").unwrap();
        let first_step = script.find("\nstep conformance").unwrap();
        assert!(smi < path && path < first_step);
        assert!(script.contains("--train-limit 100 --test-limit 50"));
        assert!(script.contains("results=\"${1:?usage"));
    }

    /// Every step of a bundle, as `gpu_check::run` orders them.
    fn bundle(has_data: bool) -> Vec<Step> {
        let mut all = steps(has_data, 1, 1);
        all.extend(gpt_steps());
        all.extend(pretrained_steps(true));
        all.push(gpt_peer_step());
        all.extend(lifecycle_steps(has_data));
        all
    }

    #[test]
    fn the_pretrained_step_generates_in_f32_and_bf16_and_fine_tunes() {
        let step = &pretrained_steps(true)[0];
        let c = &step.command;
        assert!(
            c.contains("hf/gpt2-tiny") && c.contains("hf/llama3-tiny"),
            "{c}"
        );
        assert!(
            c.contains("--precision bf16") && c.contains("--init-from"),
            "{c}"
        );
        assert!(c.ends_with("pretrained-hf \"$here\" \"$results\""), "{c}");
        assert!(
            !c[..c.len() - 30].contains("$here"),
            "the inner shell reads $1: {c}"
        );
        assert!(
            c.contains("--halt-after-step 15") && c.contains("--resume"),
            "{c}"
        );
        assert!(!pretrained_steps(false)[0].command.contains("--init-from"));
    }

    #[test]
    fn steps_fit_in_one_ten_minute_command() {
        for has_data in [false, true] {
            let total: u32 = bundle(has_data).iter().map(|s| s.limit_s).sum();
            assert!(total <= STEP_BUDGET_S, "{total} s");
        }
        assert!(!steps(false, 1, 1)
            .iter()
            .any(|s| s.name.starts_with("train")));
        let mut names: Vec<&str> = bundle(true).iter().map(|s| s.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(
            names.len(),
            before,
            "step names (and output files) are unique"
        );
    }

    #[test]
    fn the_bundle_trains_in_bf16_and_benchmarks_tf32() {
        let all = bundle(true);
        let bf16 = all.iter().find(|s| s.name == "train-mlp-bf16").unwrap();
        assert!(
            bf16.command.contains("--backend cuda") && bf16.command.contains("--precision bf16")
        );
        let tf32 = all.iter().find(|s| s.name == "bench-gemm-tf32").unwrap();
        assert!(
            tf32.command.contains("--precision tf32 gemm"),
            "{}",
            tf32.command
        );
    }

    #[test]
    fn the_lifecycle_covers_cpu_and_cuda_in_f32_tf32_and_bf16_and_ends_the_script() {
        let steps = lifecycle_steps(true);
        let command = |name: &str| {
            steps
                .iter()
                .find(|s| s.name == name)
                .unwrap_or_else(|| panic!("no step {name}"))
                .command
                .clone()
        };
        let cpu = command("lifecycle-cpu");
        assert!(cpu.contains(" cpu cpu f32 "), "{cpu}");
        for suite in [
            "\"prep ", "\"mlp ", "\"cnn ", "\"infer ", "\"eval ", "\"gpt ",
        ] {
            assert!(cpu.contains(suite), "{suite} missing: {cpu}");
            assert!(command("lifecycle-cuda").contains(suite), "{suite}");
        }
        let tf32 = command("lifecycle-cuda-tf32");
        assert!(
            tf32.contains(" cuda-tf32 cuda tf32 ") && tf32.contains("\"gpt "),
            "{tf32}"
        );
        assert!(
            !tf32.contains("\"prep "),
            "prep has no matrix product: {tf32}"
        );
        let bf16 = command("lifecycle-cuda-bf16");
        assert!(bf16.contains(" cuda-bf16 cuda bf16 ") && bf16.contains("\"eval "));
        assert!(
            bf16.contains("\"gpt "),
            "the GPT runs under the bf16 policy: {bf16}"
        );
        assert!(!bf16.contains("\"prep "), "{bf16}");
        // The report is the last step of the whole script.
        let script = run_script(&bundle(true));
        let last = script
            .lines()
            .rev()
            .find(|l| l.starts_with("step "))
            .unwrap();
        assert!(last.starts_with("step lifecycle-report 5 ") && last.contains("lifecycle-report"));
        assert!(script.contains("gpu_name=\"$(nvidia-smi --query-gpu=name"));
        // Without data: no prep or eval, the rest stays.
        let no_data = lifecycle_steps(false);
        assert!(no_data.iter().all(|s| !s.command.contains("@DATA@")));
        assert!(no_data[0].command.contains("\"mlp "));
    }

    #[test]
    fn every_lifecycle_suite_parses_as_tessera_bench_would_read_it() {
        use crate::bench::precision::BenchPrecision;
        use crate::bench::MeasureArgs;
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            bench: MeasureArgs,
        }
        for step in lifecycle_steps(true)
            .iter()
            .filter(|s| s.name != "lifecycle-report")
        {
            // `bash lifecycle.sh HERE OUT RUN BACKEND PRECISION "SUITE"...`
            let (_, rest) = step.command.split_once("\"$results/lifecycle\" ").unwrap();
            let (head, suites) = rest.split_once(" \"").unwrap();
            let [_, backend, precision] = head.split(' ').collect::<Vec<_>>()[..] else {
                panic!("not RUN BACKEND PRECISION: {head}");
            };
            let suites = format!("\"{suites}");
            for suite in suites.split('"').map(str::trim).filter(|s| !s.is_empty()) {
                let suite = suite.replace("@DATA@", "/data").replace("@OUT@", "/out");
                let mut words = vec![
                    "tessera-bench",
                    "--backend",
                    backend,
                    "--precision",
                    precision,
                ];
                words.extend(suite.split(' '));
                if backend == "cuda" && cfg!(not(feature = "cuda")) {
                    words[2] = "cpu";
                }
                let cli = Cli::try_parse_from(&words).unwrap_or_else(|e| panic!("{words:?}: {e}"));
                let precision: BenchPrecision = cli.bench.precision;
                assert_eq!(
                    cli.bench.suite.precision_unavailable(precision),
                    None,
                    "{words:?}"
                );
            }
        }
    }

    #[test]
    fn both_scripts_are_valid_bash() {
        for (name, text) in [
            ("run.sh", run_script(&bundle(true))),
            ("lifecycle.sh", lifecycle_script()),
            ("gpt_peer.sh", GPT_PEER_SCRIPT.to_string()),
        ] {
            let file = std::env::temp_dir().join(format!("{}-{name}", std::process::id()));
            std::fs::write(&file, text).unwrap();
            let out = std::process::Command::new("bash")
                .arg("-n")
                .arg(&file)
                .output()
                .unwrap();
            std::fs::remove_file(&file).unwrap();
            assert!(
                out.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    #[test]
    fn the_lifecycle_script_replaces_the_placeholders_and_keeps_going_after_a_failure() {
        // A bundle folder with spaces in its path and a stand-in tessera-bench that prints its
        // arguments, one per line, and fails for the `cnn` suite.
        let root = std::env::temp_dir().join(format!("gpu check {}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::write(root.join("lifecycle.sh"), lifecycle_script()).unwrap();
        let fake = root.join("bin").join("tessera-bench");
        std::fs::write(
            &fake,
            "#!/usr/bin/env bash\nprintf '%s\\n' \"$@\"\n[ \"$5\" != cnn ]\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = root.join("results dir");
        let status = std::process::Command::new("bash")
            .arg(root.join("lifecycle.sh"))
            .arg(&root)
            .arg(&out)
            .args(["cuda-bf16", "cuda", "bf16"])
            .args([
                "eval --data @DATA@ --reps 3",
                "cnn --reps 1",
                "gpt --init @OUT@/w.st",
            ])
            .output()
            .unwrap()
            .status;
        assert!(!status.success(), "the failing suite makes the run fail");
        let written = std::fs::read_to_string(out.join("cuda-bf16.jsonl")).unwrap();
        let lines: Vec<&str> = written.lines().collect();
        let data = root.join("data").display().to_string();
        let weights = out.join("w.st").display().to_string();
        let expected = [
            "--backend",
            "cuda",
            "--precision",
            "bf16",
            "eval",
            "--data",
            &data,
            "--reps",
            "3",
            "--backend",
            "cuda",
            "--precision",
            "bf16",
            "cnn",
            "--reps",
            "1",
            "--backend",
            "cuda",
            "--precision",
            "bf16",
            "gpt",
            "--init",
            &weights,
        ];
        assert_eq!(lines, expected, "the suite after the failure still ran");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
