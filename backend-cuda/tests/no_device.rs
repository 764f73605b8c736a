//! Without a CUDA driver or device (the link stub answers), the backend gives a typed error
//! saying so; with one, it opens. Either way the test binary starts: that is the link stub's job.

use tessera_core::Error;
use tessera_cuda::{device_count, Cuda};

#[test]
fn opening_a_device_gives_no_device_or_a_working_device() {
    match Cuda::new(0) {
        Err(Error::NoDevice { backend, reason }) => {
            assert_eq!(backend, "cuda");
            assert!(
                reason.contains("CUDA") && reason.contains("install the NVIDIA driver"),
                "{reason}"
            );
            let count = device_count();
            assert!(
                matches!(count, Err(Error::NoDevice { .. })) || count == Ok(0),
                "{count:?}"
            );
            eprintln!("no CUDA device here, as expected on this machine: {reason}");
        }
        Err(other) => panic!("expected NoDevice or a device, got {other}"),
        Ok(dev) => {
            assert!(device_count().unwrap() >= 1);
            assert!(!dev.device_name().is_empty());
            eprintln!("CUDA device 0: {}", dev.device_name());
        }
    }
}

#[test]
fn an_ordinal_past_the_last_device_is_no_device() {
    let err = Cuda::new(1 << 20).unwrap_err();
    assert!(
        matches!(
            err,
            Error::NoDevice {
                backend: "cuda",
                ..
            }
        ),
        "{err}"
    );
}
