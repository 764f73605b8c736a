//! Every shared kernel compiles with NVRTC for `compute_80` and `compute_90`, and the PTX
//! assembles with `ptxas` for `sm_80` and `sm_90`: what CI checks without a GPU.
//!
//! NVRTC comes from `pip install nvidia-cuda-nvrtc-cu12` (or the CUDA toolkit) and `ptxas` from
//! `pip install nvidia-cuda-nvcc-cu12`. Without them the tests print why and skip, unless
//! `TESSERA_REQUIRE_NVRTC=1` (set by CI), which turns a missing tool into a failure.

use tessera_cuda::kernels::{self, Arch};

/// Architectures checked: Ampere (A100) and Hopper (H100/H200).
const ARCHS: [u32; 2] = [80, 90];

/// Whether a missing NVRTC or ptxas must fail the test instead of skipping it.
fn required() -> bool {
    std::env::var("TESSERA_REQUIRE_NVRTC").is_ok_and(|v| v == "1")
}

/// Prints why the test is skipped, or panics when the tool is required.
fn missing(what: &str) {
    assert!(!required(), "{what}, and TESSERA_REQUIRE_NVRTC=1");
    eprintln!("skipped: {what}");
}

#[test]
fn every_kernel_compiles_with_nvrtc_and_assembles_with_ptxas() {
    let (version, library) = match kernels::nvrtc_status() {
        Ok(found) => found,
        Err(reason) => return missing(&format!("NVRTC is not available ({reason})")),
    };
    eprintln!(
        "NVRTC {}.{} from {}",
        version.0,
        version.1,
        library.display()
    );
    let ptxas = kernels::find_ptxas();
    if ptxas.is_none() {
        missing("ptxas is not available (pip install nvidia-cuda-nvcc-cu12); PTX not assembled");
    }
    let modules = kernels::modules();
    assert!(modules.len() >= 6);
    // NVRTC and ptxas are slow (seconds per module): spread the modules over the cores.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per_thread = modules.len().div_ceil(threads);
    std::thread::scope(|scope| {
        for share in modules.chunks(per_thread) {
            let ptxas = &ptxas;
            scope.spawn(move || {
                for module in share {
                    check_module(module, ptxas.as_deref());
                }
            });
        }
    });
}

/// Compiles `module` to PTX for every architecture of [`ARCHS`] and assembles it.
fn check_module(module: &kernels::KernelModule, ptxas: Option<&std::path::Path>) {
    for cc in ARCHS {
        let ptx = kernels::compile(module, Arch::Virtual(cc)).unwrap_or_else(|e| panic!("{e}"));
        let text = String::from_utf8_lossy(&ptx);
        assert!(
            text.contains(&format!(".target sm_{cc}")),
            "{} for compute_{cc}: unexpected PTX header",
            module.label()
        );
        if let Some(ptxas) = ptxas {
            kernels::ptxas_check(ptxas, &ptx, cc, &module.label())
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

#[test]
fn kernels_compile_straight_to_cubins() {
    if let Err(reason) = kernels::nvrtc_status() {
        return missing(&format!("NVRTC is not available ({reason})"));
    }
    for module in kernels::default_modules() {
        let cubin = kernels::compile(&module, Arch::Real(90)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            &cubin[..4],
            b"\x7fELF",
            "{}: a cubin is an ELF image",
            module.label()
        );
    }
}
