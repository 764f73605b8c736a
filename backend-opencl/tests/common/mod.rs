//! The device shared by the tests of one test binary, or a printed reason to skip.

use std::sync::OnceLock;
use tessera_opencl::{GemmEngine, OpenCl};

/// The default OpenCL device, opened once per test binary (programs are built once per device
/// and process, so sharing it keeps the suite fast). `None`, after printing why, when this
/// machine has no OpenCL runtime or device: the calling test then passes without checking.
pub fn device() -> Option<OpenCl> {
    static DEVICE: OnceLock<Option<OpenCl>> = OnceLock::new();
    DEVICE
        .get_or_init(|| match OpenCl::new() {
            Ok(dev) => {
                eprintln!(
                    "testing on {:?}; matrix products: {}",
                    dev.driver().device_info(),
                    dev.driver().gemm_route(dev.options().engine)
                );
                Some(dev)
            }
            Err(e) => {
                eprintln!("skipping OpenCL tests: {e}");
                None
            }
        })
        .clone()
}

/// Binds the shared device or returns from the test after printing why it is skipped.
#[macro_export]
macro_rules! device_or_skip {
    () => {
        match common::device() {
            Some(dev) => dev,
            None => {
                eprintln!("skipped: no OpenCL device");
                return;
            }
        }
    };
}

/// The shared device once per GEMM route, labelled: the tiled kernel, then CLBlast when it
/// loads (otherwise printing why that route is skipped; `TESSERA_REQUIRE_CLBLAST=1`, set by CI,
/// makes a missing CLBlast a failure). Empty without a device.
#[allow(dead_code)] // Not every test binary runs products.
pub fn gemm_routes() -> Vec<(&'static str, OpenCl)> {
    let Some(dev) = device() else {
        return Vec::new();
    };
    let mut routes = vec![("tiled", dev.with_gemm(GemmEngine::Tiled))];
    match dev.driver().clblast_library() {
        Ok(_) => routes.push(("clblast", dev.with_gemm(GemmEngine::Blas))),
        Err(reason) if std::env::var_os("TESSERA_REQUIRE_CLBLAST").is_some() => {
            panic!("TESSERA_REQUIRE_CLBLAST is set but {reason}")
        }
        Err(reason) => eprintln!("skipped the clblast route: {reason}"),
    }
    routes
}
