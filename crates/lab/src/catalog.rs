//! The kernels `irqlab lab` knows by name, and kernel images given by path.
//!
//! Each name stands for the newest Debian package of its flavour that apt's
//! lists hold (bookworm for 6.1, bookworm-backports for 6.12); the exact
//! package and version fetched are recorded in the cache's manifest and in
//! every run's `lab` block.

use crate::image::Preemption;
use crate::{Error, Result};
use std::path::PathBuf;

/// A Debian kernel flavour: its packages are named
/// `PREFIX<n>SUFFIX` with `<n>` a number (the ABI or the patch level).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known {
    pub name: &'static str,
    pub prefix: &'static str,
    pub suffix: &'static str,
    /// The Debian suite that carries it (what the install step adds).
    pub suite: &'static str,
    pub preemption: Preemption,
}

pub const KNOWN: &[Known] = &[
    Known {
        name: "debian:6.1",
        prefix: "linux-image-6.1.0-",
        suffix: "-amd64-unsigned",
        suite: "bookworm",
        preemption: Preemption::Dynamic,
    },
    Known {
        name: "debian:6.1-rt",
        prefix: "linux-image-6.1.0-",
        suffix: "-rt-amd64-unsigned",
        suite: "bookworm",
        preemption: Preemption::Rt,
    },
    Known {
        name: "debian:6.12",
        prefix: "linux-image-6.12.",
        suffix: "+deb12-amd64-unsigned",
        suite: "bookworm-backports",
        preemption: Preemption::Dynamic,
    },
    Known {
        name: "debian:6.12-rt",
        prefix: "linux-image-6.12.",
        suffix: "+deb12-rt-amd64-unsigned",
        suite: "bookworm-backports",
        preemption: Preemption::Rt,
    },
];

impl Known {
    /// The number `<n>` of a package of this flavour, or None for any
    /// other package (another flavour's suffix ends in this one's, so the
    /// middle must be digits only).
    pub fn package_number(&self, package: &str) -> Option<u64> {
        let middle = package.strip_prefix(self.prefix)?.strip_suffix(self.suffix)?;
        if middle.is_empty() || !middle.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        middle.parse().ok()
    }

    /// The apt-cache search pattern for this flavour's packages.
    pub fn search_pattern(&self) -> String {
        format!("^{}[0-9]+{}$", regex_escape(self.prefix), regex_escape(self.suffix))
    }

    /// Directory name in the cache (`debian-6.1-rt`).
    pub fn slug(&self) -> String {
        self.name.replace(':', "-")
    }
}

fn regex_escape(text: &str) -> String {
    text.chars().fold(String::new(), |mut out, c| {
        if ".+*?()[]{}^$|\\".contains(c) {
            out.push('\\');
        }
        out.push(c);
        out
    })
}

/// What `--kernel` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelSpec {
    Known(Known),
    /// A kernel image (bzImage) on this machine; its modules are looked up
    /// in `lib/modules/RELEASE` above it, as virtme-ng does.
    Path(PathBuf),
}

impl KernelSpec {
    /// A known name, or a path to a file; anything else is a usage error
    /// naming the known kernels.
    pub fn parse(text: &str) -> Result<Self> {
        if let Some(known) = KNOWN.iter().find(|k| k.name == text) {
            return Ok(KernelSpec::Known(*known));
        }
        let path = PathBuf::from(text);
        if !text.contains(':') && path.is_file() {
            return Ok(KernelSpec::Path(path));
        }
        let names: Vec<&str> = KNOWN.iter().map(|k| k.name).collect();
        let what = if path.exists() { "not a file" } else { "no such kernel" };
        Err(Error::Usage(format!(
            "--kernel '{text}': {what}; known kernels: {}, or the path of a kernel image (bzImage)",
            names.join(", ")
        )))
    }

    pub fn label(&self) -> String {
        match self {
            KernelSpec::Known(k) => k.name.to_string(),
            KernelSpec::Path(p) => p.display().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(name: &str) -> Known {
        *KNOWN.iter().find(|k| k.name == name).unwrap()
    }

    #[test]
    fn a_flavour_takes_only_its_own_packages() {
        let rt = known("debian:6.1-rt");
        let generic = known("debian:6.1");
        assert_eq!(rt.package_number("linux-image-6.1.0-56-rt-amd64-unsigned"), Some(56));
        assert_eq!(generic.package_number("linux-image-6.1.0-56-rt-amd64-unsigned"), None);
        assert_eq!(generic.package_number("linux-image-6.1.0-56-cloud-amd64-unsigned"), None);
        assert_eq!(generic.package_number("linux-image-6.1.0-56-amd64-unsigned"), Some(56));
        assert_eq!(known("debian:6.12-rt").package_number("linux-image-6.12.117+deb12-rt-amd64-unsigned"), Some(117));
        assert_eq!(known("debian:6.12").package_number("linux-image-6.12.117+deb12-rt-amd64-unsigned"), None);
    }

    #[test]
    fn the_search_pattern_escapes_the_package_name() {
        assert_eq!(known("debian:6.12-rt").search_pattern(), "^linux-image-6\\.12\\.[0-9]+\\+deb12-rt-amd64-unsigned$");
    }

    #[test]
    fn an_unknown_name_is_a_usage_error_naming_the_known_ones() {
        let err = KernelSpec::parse("debian:5.10").unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let text = err.to_string();
        for k in KNOWN {
            assert!(text.contains(k.name), "{text}");
        }
        assert!(matches!(KernelSpec::parse("debian:6.12-rt"), Ok(KernelSpec::Known(k)) if k.name == "debian:6.12-rt"));
        assert_eq!(KernelSpec::parse("/").unwrap_err().exit_code(), 2);
    }
}
