//! The device shared by the tests of one test binary, or a printed reason to skip.

use std::sync::OnceLock;
use tessera_opencl::OpenCl;

/// The default OpenCL device, opened once per test binary (programs are built once per device
/// and process, so sharing it keeps the suite fast). `None`, after printing why, when this
/// machine has no OpenCL runtime or device: the calling test then passes without checking.
pub fn device() -> Option<OpenCl> {
    static DEVICE: OnceLock<Option<OpenCl>> = OnceLock::new();
    DEVICE
        .get_or_init(|| match OpenCl::new() {
            Ok(dev) => {
                eprintln!("testing on {:?}", dev.info());
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
