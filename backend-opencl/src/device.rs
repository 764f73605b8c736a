//! Finding OpenCL devices and choosing one.
//!
//! Devices are numbered platform by platform (the *ordinal*). The default choice is, in order:
//! the device named by the environment variable [`DEVICE_ENV_VAR`] (`platform:device`, e.g.
//! `0:1`, or a bare ordinal), else the first GPU, else the first device of any kind.

use crate::error::{cl, no_device, BACKEND};
use opencl3::device::{
    Device, CL_DEVICE_TYPE_ACCELERATOR, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_GPU,
    CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT,
};
use opencl3::platform::get_platforms;
use std::fmt;
use tessera_core::{Error, Result};

/// Environment variable that selects the default device: `platform:device` or an ordinal.
pub const DEVICE_ENV_VAR: &str = "TESSERA_OPENCL_DEVICE";

/// The kind of an OpenCL device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// A graphics processor.
    Gpu,
    /// A CPU (PoCL, Intel's CPU runtime, ...).
    Cpu,
    /// A dedicated accelerator.
    Accelerator,
    /// Anything else.
    Other,
}

/// What the backend needs to know about a device, read once when devices are listed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DeviceInfo {
    /// Position among all devices of all platforms.
    pub ordinal: usize,
    /// Index of the platform.
    pub platform_index: usize,
    /// Index of the device within its platform.
    pub device_index: usize,
    /// Platform name, e.g. `"Portable Computing Language"`.
    pub platform_name: String,
    /// Device name.
    pub name: String,
    /// Vendor name.
    pub vendor: String,
    /// `CL_DEVICE_VERSION`, e.g. `"OpenCL 3.0 PoCL ..."`.
    pub version: String,
    /// `CL_DRIVER_VERSION`.
    pub driver_version: String,
    /// GPU, CPU, ...
    pub kind: DeviceKind,
    /// Whether the device computes in f64 (`cl_khr_fp64`).
    pub has_fp64: bool,
    /// Whether f32 division and square root are correctly rounded on request.
    pub correctly_rounded_div_sqrt: bool,
    /// Compute units.
    pub compute_units: u32,
    /// Largest work-group.
    pub max_work_group_size: usize,
    /// Local memory per work-group, in bytes.
    pub local_mem_bytes: u64,
    /// Global memory, in bytes.
    pub global_mem_bytes: u64,
    /// Largest single buffer, in bytes.
    pub max_alloc_bytes: u64,
    /// Bytes of kernel arguments the device accepts.
    pub max_parameter_bytes: usize,
}

impl fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}:{}] {} ({:?}, {}, {})",
            self.platform_index,
            self.device_index,
            self.name,
            self.kind,
            self.platform_name,
            self.version
        )
    }
}

/// A device found on this machine: its description and its handle.
#[derive(Clone, Debug)]
pub(crate) struct FoundDevice {
    pub(crate) info: DeviceInfo,
    pub(crate) device: Device,
}

/// Every device of every platform, in ordinal order.
///
/// # Errors
/// [`Error::NoDevice`] when the OpenCL loader is missing or no platform is installed (the message
/// says what to install); [`Error::Backend`] when a driver query fails.
pub fn list_devices() -> Result<Vec<DeviceInfo>> {
    Ok(find_devices()?.into_iter().map(|d| d.info).collect())
}

/// [`list_devices`] with the device handles.
pub(crate) fn find_devices() -> Result<Vec<FoundDevice>> {
    let platforms = get_platforms().map_err(cl("list platforms"))?;
    let mut found = Vec::new();
    for (platform_index, platform) in platforms.iter().enumerate() {
        let platform_name = platform.name().unwrap_or_default();
        // A platform without devices reports CL_DEVICE_NOT_FOUND: treat it as empty.
        let ids = platform.get_devices(CL_DEVICE_TYPE_ALL).unwrap_or_default();
        for (device_index, &id) in ids.iter().enumerate() {
            let info = describe(
                Device::new(id),
                found.len(),
                platform_index,
                device_index,
                &platform_name,
            )?;
            found.push(FoundDevice {
                info,
                device: Device::new(id),
            });
        }
    }
    Ok(found)
}

/// Reads the properties of one device.
fn describe(
    device: Device,
    ordinal: usize,
    platform_index: usize,
    device_index: usize,
    platform_name: &str,
) -> Result<DeviceInfo> {
    let q = cl("query device");
    let device_type = device.dev_type().map_err(&q)?;
    let kind = if device_type & CL_DEVICE_TYPE_GPU != 0 {
        DeviceKind::Gpu
    } else if device_type & CL_DEVICE_TYPE_CPU != 0 {
        DeviceKind::Cpu
    } else if device_type & CL_DEVICE_TYPE_ACCELERATOR != 0 {
        DeviceKind::Accelerator
    } else {
        DeviceKind::Other
    };
    let extensions = device.extensions().unwrap_or_default();
    let has_fp64 = extensions.split_whitespace().any(|e| e == "cl_khr_fp64")
        && device.double_fp_config().unwrap_or(0) != 0;
    Ok(DeviceInfo {
        ordinal,
        platform_index,
        device_index,
        platform_name: platform_name.to_string(),
        name: device.name().map_err(&q)?.trim().to_string(),
        vendor: device.vendor().unwrap_or_default().trim().to_string(),
        version: device.version().unwrap_or_default().trim().to_string(),
        driver_version: device
            .driver_version()
            .unwrap_or_default()
            .trim()
            .to_string(),
        kind,
        has_fp64,
        correctly_rounded_div_sqrt: device.single_fp_config().unwrap_or(0)
            & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT
            != 0,
        compute_units: device.max_compute_units().map_err(&q)?,
        max_work_group_size: device.max_work_group_size().map_err(&q)?,
        local_mem_bytes: device.local_mem_size().map_err(&q)?,
        global_mem_bytes: device.global_mem_size().map_err(&q)?,
        max_alloc_bytes: device.max_mem_alloc_size().map_err(&q)?,
        max_parameter_bytes: device.max_parameter_size().map_err(&q)?,
    })
}

/// How a caller designates a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceSelector {
    /// [`DEVICE_ENV_VAR`] if set, else the first GPU, else the first device.
    Default,
    /// Position among all devices (see [`DeviceInfo::ordinal`]).
    Ordinal(usize),
    /// Platform index and device index within it.
    PlatformDevice(usize, usize),
}

impl DeviceSelector {
    /// Parses `"p:d"` or `"n"` (the syntax of [`DEVICE_ENV_VAR`]).
    pub fn parse(text: &str) -> Result<Self> {
        let bad = || Error::InvalidArgument {
            op: "opencl device",
            msg: format!("`{text}` is not `platform:device` or a device number"),
        };
        let text = text.trim();
        match text.split_once(':') {
            Some((p, d)) => Ok(DeviceSelector::PlatformDevice(
                p.trim().parse().map_err(|_| bad())?,
                d.trim().parse().map_err(|_| bad())?,
            )),
            None => Ok(DeviceSelector::Ordinal(text.parse().map_err(|_| bad())?)),
        }
    }

    /// Picks a device among `devices`.
    pub(crate) fn choose(self, devices: &[FoundDevice]) -> Result<FoundDevice> {
        if devices.is_empty() {
            return Err(no_device("the OpenCL platforms list no device"));
        }
        let listing = || {
            devices
                .iter()
                .map(|d| d.info.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let missing = |what: String| Error::NoDevice {
            backend: BACKEND,
            reason: format!("no OpenCL device {what}; available: {}", listing()),
        };
        match self {
            DeviceSelector::Default => match std::env::var(DEVICE_ENV_VAR) {
                Ok(text) if !text.trim().is_empty() => {
                    DeviceSelector::parse(&text)?.choose(devices)
                }
                _ => Ok(devices
                    .iter()
                    .find(|d| d.info.kind == DeviceKind::Gpu)
                    .unwrap_or(&devices[0])
                    .clone()),
            },
            DeviceSelector::Ordinal(n) => devices
                .get(n)
                .cloned()
                .ok_or_else(|| missing(format!("number {n}"))),
            DeviceSelector::PlatformDevice(p, d) => devices
                .iter()
                .find(|x| x.info.platform_index == p && x.info.device_index == d)
                .cloned()
                .ok_or_else(|| missing(format!("{p}:{d}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_parse_both_syntaxes() {
        assert_eq!(
            DeviceSelector::parse("1:2").unwrap(),
            DeviceSelector::PlatformDevice(1, 2)
        );
        assert_eq!(
            DeviceSelector::parse(" 3 ").unwrap(),
            DeviceSelector::Ordinal(3)
        );
        assert!(DeviceSelector::parse("gpu").is_err());
        assert!(DeviceSelector::parse("1:x").is_err());
    }

    #[test]
    fn choosing_among_no_devices_says_what_to_install() {
        let err = DeviceSelector::Ordinal(0).choose(&[]).unwrap_err();
        assert!(
            matches!(&err, Error::NoDevice { reason, .. } if reason.contains("pocl-opencl-icd")),
            "{err}"
        );
    }
}
