//! What an x86 kernel image (bzImage) says of itself: its boot-protocol
//! header (Documentation/arch/x86/boot.rst) holds a pointer to the version
//! string `uname -v` shows, which names the release and the preemption
//! model (`SMP PREEMPT_RT`, `SMP PREEMPT_DYNAMIC`).

use crate::{Error, Result};
use serde::Serialize;
use std::path::Path;

/// Offsets of the boot protocol's real-mode header.
const BOOT_FLAG: usize = 0x1fe; // 0xaa55
const HEADER_MAGIC: usize = 0x202; // "HdrS"
const KERNEL_VERSION: usize = 0x20e; // u16, string at 0x200 + value

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ImageInfo {
    /// `uname -r` of the kernel (the first word of the version string).
    pub release: String,
    /// The whole version string, as `uname -v` and `/proc/version` show it.
    pub version: String,
    pub preemption: Preemption,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Preemption {
    /// PREEMPT_RT: threaded interrupts and sleeping spinlocks.
    Rt,
    /// PREEMPT_DYNAMIC: none/voluntary/full chosen at boot.
    Dynamic,
    /// CONFIG_PREEMPT (full) without the dynamic switch.
    Full,
    /// No preemption word in the version string (none or voluntary).
    Voluntary,
}

impl Preemption {
    pub fn label(self) -> &'static str {
        match self {
            Preemption::Rt => "PREEMPT_RT",
            Preemption::Dynamic => "PREEMPT_DYNAMIC",
            Preemption::Full => "PREEMPT",
            Preemption::Voluntary => "voluntary/none",
        }
    }

    fn from_version(version: &str) -> Self {
        let words: Vec<&str> = version.split_whitespace().collect();
        if words.contains(&"PREEMPT_RT") {
            Preemption::Rt
        } else if words.contains(&"PREEMPT_DYNAMIC") {
            Preemption::Dynamic
        } else if words.contains(&"PREEMPT") {
            Preemption::Full
        } else {
            Preemption::Voluntary
        }
    }
}

/// Reads the image's header; a file that is not an x86 bzImage is a usage
/// error naming the file and what was missing.
pub fn inspect(path: &Path) -> Result<ImageInfo> {
    let bytes = std::fs::read(path).map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
    parse(&bytes).map_err(|why| Error::Usage(format!("{}: not a kernel image ({why})", path.display())))
}

/// The header parse on the image's bytes (separate for unit tests).
pub fn parse(bytes: &[u8]) -> std::result::Result<ImageInfo, &'static str> {
    if bytes.len() < 0x210 {
        return Err("shorter than a boot sector and header");
    }
    if bytes[BOOT_FLAG..BOOT_FLAG + 2] != [0x55, 0xaa] {
        return Err("no boot flag 0xAA55");
    }
    if &bytes[HEADER_MAGIC..HEADER_MAGIC + 4] != b"HdrS" {
        return Err("no \"HdrS\" boot-protocol header");
    }
    let pointer = u16::from_le_bytes([bytes[KERNEL_VERSION], bytes[KERNEL_VERSION + 1]]) as usize;
    let start = 0x200 + pointer;
    let end = bytes.get(start..).and_then(|rest| rest.iter().position(|&b| b == 0)).ok_or("no version string")? + start;
    let version = std::str::from_utf8(&bytes[start..end]).map_err(|_| "version string is not text")?.to_string();
    let release = version.split_whitespace().next().ok_or("empty version string")?.to_string();
    Ok(ImageInfo { preemption: Preemption::from_version(&version), release, version })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(version: &str) -> Vec<u8> {
        let mut bytes = vec![0u8; 0x400];
        bytes[BOOT_FLAG..BOOT_FLAG + 2].copy_from_slice(&[0x55, 0xaa]);
        bytes[HEADER_MAGIC..HEADER_MAGIC + 4].copy_from_slice(b"HdrS");
        bytes[KERNEL_VERSION..KERNEL_VERSION + 2].copy_from_slice(&0x100u16.to_le_bytes());
        bytes[0x300..0x300 + version.len()].copy_from_slice(version.as_bytes());
        bytes
    }

    #[test]
    fn reads_release_and_preemption_from_the_header() {
        let info = parse(&image("6.1.0-56-rt-amd64 (debian-kernel@lists.debian.org) #1 SMP PREEMPT_RT Debian 6.1.192-2")).unwrap();
        assert_eq!(info.release, "6.1.0-56-rt-amd64");
        assert_eq!(info.preemption, Preemption::Rt);
        let info = parse(&image("6.12.117+deb12-amd64 (x) #1 SMP PREEMPT_DYNAMIC Debian")).unwrap();
        assert_eq!(info.preemption, Preemption::Dynamic);
    }

    #[test]
    fn refuses_what_is_not_a_bzimage() {
        assert_eq!(parse(b"#!/bin/sh\necho hi\n"), Err("shorter than a boot sector and header"));
        let mut bytes = image("6.1");
        bytes[HEADER_MAGIC] = b'X';
        assert_eq!(parse(&bytes), Err("no \"HdrS\" boot-protocol header"));
        bytes = image("6.1");
        bytes[BOOT_FLAG] = 0;
        assert_eq!(parse(&bytes), Err("no boot flag 0xAA55"));
    }
}
