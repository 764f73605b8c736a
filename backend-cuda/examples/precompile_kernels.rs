//! Compiles the CUDA backend's kernels ahead of time with NVRTC, for a GPU machine without
//! NVRTC: point `TESSERA_CUDA_KERNELS` at the folder there.
//!
//! ```text
//! cargo run --release -p tessera-cuda --example precompile_kernels -- OUT_DIR [ARCH,...]
//! ```
//! `ARCH` is `sm_XY` (a cubin for exactly that GPU generation) or `compute_XY` (PTX the driver
//! compiles for that generation or newer); the default is `sm_80,sm_86,sm_89,sm_90,compute_80`.

use std::path::PathBuf;
use std::process::ExitCode;
use tessera_cuda::kernels::{self, Arch};

/// The architectures compiled when none are given.
const DEFAULT_ARCHS: &str = "sm_80,sm_86,sm_89,sm_90,compute_80";

/// Parses `sm_90` or `compute_80`.
fn parse_arch(text: &str) -> Result<Arch, String> {
    let number = |digits: &str| {
        digits
            .parse::<u32>()
            .map_err(|_| format!("`{text}` is not sm_XY or compute_XY"))
    };
    match (text.strip_prefix("sm_"), text.strip_prefix("compute_")) {
        (Some(cc), _) => number(cc).map(Arch::Real),
        (_, Some(cc)) => number(cc).map(Arch::Virtual),
        _ => Err(format!("`{text}` is not sm_XY or compute_XY")),
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next().map(PathBuf::from) else {
        eprintln!("usage: precompile_kernels OUT_DIR [ARCH,...]  (default {DEFAULT_ARCHS})");
        return ExitCode::FAILURE;
    };
    let list = args.next().unwrap_or_else(|| DEFAULT_ARCHS.to_string());
    let archs: Result<Vec<Arch>, String> = list.split(',').map(|a| parse_arch(a.trim())).collect();
    let archs = match archs {
        Ok(archs) => archs,
        Err(e) => {
            eprintln!("precompile_kernels: {e}");
            return ExitCode::FAILURE;
        }
    };
    match kernels::nvrtc_status() {
        Ok(((major, minor), library)) => {
            eprintln!("NVRTC {major}.{minor} from {}", library.display())
        }
        Err(reason) => {
            eprintln!("precompile_kernels: NVRTC is not available: {reason}");
            return ExitCode::FAILURE;
        }
    }
    match kernels::precompile(&dir, &archs) {
        Ok(files) => {
            let bytes: u64 = files
                .iter()
                .filter_map(|f| f.metadata().ok())
                .map(|m| m.len())
                .sum();
            println!(
                "{} kernel images ({:.1} MiB) in {}",
                files.len(),
                bytes as f64 / (1024.0 * 1024.0),
                dir.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("precompile_kernels: {e}");
            ExitCode::FAILURE
        }
    }
}
