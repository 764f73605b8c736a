//! The error half of the contract on the default OpenCL device: every method called directly
//! with bad operands must return `Err` (or report it at the next `synchronize`). Alone in its
//! test binary: a bad index is reported through the device-wide error flag, which any other
//! test of the same process would read (and take as its own) in parallel. Skips with a printed
//! reason when no OpenCL device exists.

mod common;

use tessera_conformance::suite::{assert_family, Capabilities, Family};

#[test]
fn the_error_half_of_the_contract() {
    let dev = device_or_skip!();
    let capabilities = Capabilities::declared_by(&dev);
    let config = tessera_conformance::runner::RunConfig::from_env();
    assert_family(&dev, Family::Errors, &capabilities, &config);
}
