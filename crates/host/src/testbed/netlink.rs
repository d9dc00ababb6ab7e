//! The few network operations the testbed needs: `ip` for namespaces,
//! links and addresses (iproute2 is the reference tool for them), the
//! ethtool ioctl for GRO, sysfs for threaded NAPI.

use crate::error::{Error, Result};
use std::net::Ipv4Addr;
use std::process::Command;

/// Runs `ip <args>`; a non-zero exit becomes an error carrying its stderr.
pub fn ip(args: &[&str]) -> Result<String> {
    let out = Command::new("ip").args(args).output().map_err(|e| Error::io("running `ip` (iproute2)", e))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(Error::Failed(format!("`ip {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim())))
    }
}

/// The first IPv4 address of a root-namespace device, `None` if the device
/// does not exist or has none.
pub fn root_ipv4(dev: &str) -> Result<Option<Ipv4Addr>> {
    if !std::path::Path::new("/sys/class/net").join(dev).exists() {
        return Ok(None);
    }
    let out = ip(&["-4", "-o", "addr", "show", "dev", dev])?;
    Ok(parse_first_inet(&out))
}

fn parse_first_inet(text: &str) -> Option<Ipv4Addr> {
    let mut words = text.split_whitespace();
    while let Some(w) = words.next() {
        if w == "inet" {
            return words.next()?.split('/').next()?.parse().ok();
        }
    }
    None
}

pub fn netns_exists(name: &str) -> bool {
    std::path::Path::new("/run/netns").join(name).exists()
}

/// Root-namespace links whose name starts with `prefix`.
pub fn links_named(prefix: &str) -> Result<Vec<String>> {
    let dir = std::fs::read_dir("/sys/class/net").map_err(|e| Error::io("reading /sys/class/net", e))?;
    Ok(dir.flatten().filter_map(|e| e.file_name().into_string().ok()).filter(|n| n.starts_with(prefix)).collect())
}

/// Named network namespaces (`/run/netns/*`) whose name starts with `prefix`.
pub fn netns_named(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .map(|dir| dir.flatten().filter_map(|e| e.file_name().into_string().ok()).filter(|n| n.starts_with(prefix)).collect())
        .unwrap_or_default()
}

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GTSO: u32 = 0x1e;
const ETHTOOL_STSO: u32 = 0x1f;
const ETHTOOL_GGRO: u32 = 0x2b;
const ETHTOOL_SGRO: u32 = 0x2c;

#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

#[repr(C)]
struct IfreqData {
    name: [u8; libc::IFNAMSIZ],
    data: *mut EthtoolValue,
    _pad: [u8; 16],
}

fn ethtool_value(dev: &str, cmd: u32, data: u32) -> Result<u32> {
    if dev.len() >= libc::IFNAMSIZ {
        return Err(Error::Invalid(format!("device name `{dev}` is too long")));
    }
    let mut value = EthtoolValue { cmd, data };
    let mut req = IfreqData { name: [0; libc::IFNAMSIZ], data: &mut value, _pad: [0; 16] };
    req.name[..dev.len()].copy_from_slice(dev.as_bytes());
    // SAFETY: a datagram socket only used for this ioctl and closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(Error::io("socket for the ethtool ioctl", std::io::Error::last_os_error()));
    }
    // SAFETY: `req` points at a live ethtool_value as SIOCETHTOOL expects.
    let rc = unsafe { libc::ioctl(fd, SIOCETHTOOL as _, &mut req) };
    let err = std::io::Error::last_os_error();
    // SAFETY: closing the socket opened above.
    unsafe { libc::close(fd) };
    if rc < 0 {
        return Err(Error::io(format!("ethtool ioctl on {dev}"), err));
    }
    Ok(value.data)
}

/// Generic receive offload on a root-namespace device.
pub fn gro(dev: &str) -> Result<bool> {
    ethtool_value(dev, ETHTOOL_GGRO, 0).map(|v| v != 0)
}

pub fn set_gro(dev: &str, on: bool) -> Result<()> {
    ethtool_value(dev, ETHTOOL_SGRO, on as u32)?;
    if gro(dev)? != on {
        return Err(Error::MissingKernelFeature {
            feature: "GRO on veth".into(),
            detail: format!("the kernel did not switch GRO on {dev}"),
        });
    }
    Ok(())
}

/// TCP segmentation offload (all TSO flavours) on a device of the calling
/// thread's namespace.
pub fn set_tso(dev: &str, on: bool) -> Result<()> {
    ethtool_value(dev, ETHTOOL_STSO, on as u32)?;
    if (ethtool_value(dev, ETHTOOL_GTSO, 0)? != 0) != on {
        return Err(Error::Failed(format!("the kernel did not switch TSO on {dev}")));
    }
    Ok(())
}

fn threaded_path(dev: &str) -> std::path::PathBuf {
    std::path::Path::new("/sys/class/net").join(dev).join("threaded")
}

pub fn threaded_napi(dev: &str) -> bool {
    std::fs::read_to_string(threaded_path(dev)).map(|s| s.trim() == "1").unwrap_or(false)
}

pub fn set_threaded_napi(dev: &str, on: bool) -> Result<()> {
    let path = threaded_path(dev);
    if !path.exists() {
        return Err(Error::MissingKernelFeature {
            feature: "threaded NAPI".into(),
            detail: format!("{} does not exist (kernel older than 5.12?)", path.display()),
        });
    }
    std::fs::write(&path, if on { "1" } else { "0" }).map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_first_inet_address() {
        let line = "7: irqlab-a    inet 10.213.0.1/30 scope global irqlab-a\\       valid_lft forever\n";
        assert_eq!(parse_first_inet(line), Some(Ipv4Addr::new(10, 213, 0, 1)));
        assert_eq!(parse_first_inet(""), None);
    }
}
