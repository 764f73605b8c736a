//! Device discovery and selection, and the typed error of a machine without OpenCL.

mod common;

use std::process::Command;
use tessera_core::{Backend, Error};
use tessera_opencl::{list_devices, DeviceSelector, OpenCl, DEVICE_ENV_VAR};

/// Set in the child process of `no_platform_gives_an_install_hint`.
const CHILD_VAR: &str = "TESSERA_OPENCL_TEST_CHILD";

#[test]
fn devices_are_listed_and_selected_by_position() {
    let dev = device_or_skip!();
    let devices = list_devices().unwrap();
    assert!(!devices.is_empty());
    for (i, d) in devices.iter().enumerate() {
        assert_eq!(d.ordinal, i);
    }
    let info = dev.info().clone();
    let same = OpenCl::from_platform_device(info.platform_index, info.device_index).unwrap();
    assert_eq!(same.device(), dev.device());
    assert_eq!(
        OpenCl::from_ordinal(info.ordinal).unwrap().device(),
        dev.device()
    );
    let err = OpenCl::from_ordinal(devices.len()).unwrap_err();
    assert!(
        matches!(&err, Error::NoDevice { reason, .. } if reason.contains("available")),
        "{err}"
    );
    assert_eq!(
        DeviceSelector::parse(&format!("{}:{}", info.platform_index, info.device_index)).unwrap(),
        DeviceSelector::PlatformDevice(info.platform_index, info.device_index)
    );
}

/// Runs this test binary again with `env` set, running only `test`, and returns its output.
fn rerun(test: &str, env: &[(&str, &str)]) -> String {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_VAR, "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "child failed: {out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn no_platform_gives_an_install_hint() {
    if std::env::var_os(CHILD_VAR).is_some() {
        // Child: the ICD loader was pointed at an empty vendor folder.
        let err = OpenCl::new().unwrap_err();
        assert!(
            matches!(&err, Error::NoDevice { backend: "opencl", reason } if reason.contains("pocl-opencl-icd")),
            "{err}"
        );
        eprintln!("child saw: {err}");
        return;
    }
    let empty = std::env::temp_dir().join(format!("tessera-no-icd-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    // ocl-icd reads OCL_ICD_VENDORS; with no vendor file there is no platform. Other loaders
    // may ignore it, in which case the child finds the real devices and the message differs.
    let stderr = rerun(
        "no_platform_gives_an_install_hint",
        &[("OCL_ICD_VENDORS", empty.to_str().unwrap())],
    );
    let _ = std::fs::remove_dir(&empty);
    assert!(stderr.contains("child saw"), "{stderr}");
}

#[test]
fn the_environment_variable_picks_the_default_device() {
    if std::env::var_os(CHILD_VAR).is_some() {
        let dev = OpenCl::new().unwrap();
        eprintln!("child chose ordinal {}", dev.info().ordinal);
        return;
    }
    if common::device().is_none() {
        return;
    }
    let last = list_devices().unwrap().len() - 1;
    let stderr = rerun(
        "the_environment_variable_picks_the_default_device",
        &[(DEVICE_ENV_VAR, &last.to_string())],
    );
    assert!(
        stderr.contains(&format!("child chose ordinal {last}")),
        "{stderr}"
    );
}
