//! Sets `cfg(tessera_avx512)` when the compiler has stable AVX-512 intrinsics (Rust 1.89 and
//! later), so the crate keeps building on its minimum supported Rust version without them: the
//! AVX-512 GEMM kernels are then left out and the AVX2 or portable ones are used instead.

use std::process::Command;

/// The first Rust release whose `core::arch` AVX-512 intrinsics and `avx512f` target feature
/// are stable.
const AVX512_STABLE_MINOR: u32 = 89;

fn main() {
    println!("cargo:rustc-check-cfg=cfg(tessera_avx512)");
    println!("cargo:rerun-if-env-changed=RUSTC");
    println!("cargo:rerun-if-changed=build.rs");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok());
    // "rustc 1.95.0 (59807616e 2026-04-14)" -> 95
    let minor = version.as_deref().and_then(|v| {
        let number = v.split_whitespace().nth(1)?;
        let mut parts = number.split('.');
        let major: u32 = parts.next()?.parse().ok()?;
        let minor: u32 = parts.next()?.parse().ok()?;
        Some(if major > 1 { u32::MAX } else { minor })
    });
    if minor.is_some_and(|m| m >= AVX512_STABLE_MINOR) {
        println!("cargo:rustc-cfg=tessera_avx512");
    }
}
