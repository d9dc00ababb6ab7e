//! Which device `--resource net[:DEV]` means: a network device of this
//! namespace by name, or by default the one the default route leaves by.
//! Its egress is the resource: the packets queued for it, up to its
//! driver (a token-bucket qdisc there makes it the link's bottleneck).

use irqlab_host::error::{Error, Result};
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NetDevice {
    pub name: String,
    pub ifindex: u32,
}

/// The device named `name`, or (None) the default route's. A name that
/// is no device here is an error naming it and the devices there are (exit 2).
pub fn resolve(name: Option<&str>) -> Result<NetDevice> {
    let name = match name {
        Some(n) => n.to_string(),
        None => default_route_device()?,
    };
    let dir = Path::new("/sys/class/net").join(&name);
    if name.contains('/') || name.is_empty() || !dir.exists() {
        let mut known: Vec<String> = std::fs::read_dir("/sys/class/net")
            .map(|d| d.flatten().filter_map(|e| e.file_name().to_str().map(String::from)).collect())
            .unwrap_or_default();
        known.sort();
        return Err(Error::Invalid(format!("--resource net:{name}: no network device {name} here (devices: {})", known.join(", "))));
    }
    let text = std::fs::read_to_string(dir.join("ifindex")).map_err(|e| Error::io(format!("reading {}/ifindex", dir.display()), e))?;
    let ifindex = text.trim().parse().map_err(|_| Error::Failed(format!("{}/ifindex: unreadable `{}`", dir.display(), text.trim())))?;
    Ok(NetDevice { name, ifindex })
}

/// The device of the IPv4 default route (`/proc/net/route`).
fn default_route_device() -> Result<String> {
    let table = std::fs::read_to_string("/proc/net/route").map_err(|e| Error::io("reading /proc/net/route", e))?;
    default_in(&table)
        .ok_or_else(|| Error::Invalid("--resource net: this namespace has no default route; name the device (net:DEV)".into()))
}

fn default_in(table: &str) -> Option<String> {
    table.lines().skip(1).find_map(|line| {
        let mut f = line.split_whitespace();
        let (dev, dest) = (f.next()?, f.next()?);
        (dest == "00000000").then(|| dev.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_device_is_named() {
        let e = resolve(Some("nosuchdev0")).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("net:nosuchdev0: no network device nosuchdev0"), "{e}");
        assert_eq!(resolve(Some("lo")).unwrap().ifindex, 1);
    }

    #[test]
    fn the_default_route_is_found() {
        let table = "Iface\tDestination\tGateway\n\
                     eth1\t0000A8C0\t00000000\n\
                     eth0\t00000000\t0101A8C0\n";
        assert_eq!(default_in(table).as_deref(), Some("eth0"));
        assert_eq!(default_in("Iface\tDestination\n"), None);
    }
}
