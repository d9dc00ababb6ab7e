//! `irqlab lab fetch`: a known kernel's newest package through apt,
//! unpacked into the cache. Only the cache changes on the host: the
//! package is downloaded (`apt-get download`), never installed.

use crate::cache::{self, Manifest};
use crate::catalog::Known;
use crate::{image, Error, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The newest package of the flavour in apt's lists, with its version.
pub fn resolve(known: &Known) -> Result<(String, String)> {
    let out = run("apt-cache", &["search", "--names-only", &known.search_pattern()], None)?;
    let newest = out
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter_map(|pkg| known.package_number(pkg).map(|n| (n, pkg.to_string())))
        .max()
        .map(|(_, pkg)| pkg)
        .ok_or_else(|| {
            Error::Missing(format!(
                "resolving {}: apt knows no package {} (suite {}): run `make lab-deps` (adds the suite and runs apt-get update)",
                known.name,
                known.search_pattern(),
                known.suite
            ))
        })?;
    let policy = run("apt-cache", &["policy", &newest], None)?;
    let version = policy
        .lines()
        .find_map(|l| l.trim().strip_prefix("Candidate:"))
        .map(|v| v.trim().to_string())
        .filter(|v| v != "(none)")
        .ok_or_else(|| Error::Missing(format!("resolving {}: apt has no candidate version of {newest}", known.name)))?;
    Ok((newest, version))
}

/// Fetches and unpacks the kernel unless the cache already holds the same
/// package version; returns its manifest and directory.
pub fn fetch(known: &Known, progress: &mut dyn FnMut(&str)) -> Result<(Manifest, PathBuf)> {
    let dir = cache::kernel_dir(known);
    progress(&format!("resolving {} through apt", known.name));
    let (package, version) = resolve(known)?;
    if let Some(manifest) = cache::read_manifest(known)? {
        if manifest.package == package && manifest.package_version == version && manifest.image_path(&dir).is_file() {
            progress(&format!("{package} {version} already in {}", dir.display()));
            return Ok((manifest, dir));
        }
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| Error::io("removing", &dir, e))?;
    }
    let download = dir.join("download");
    std::fs::create_dir_all(&download).map_err(|e| Error::io("creating", &download, e))?;
    progress(&format!("downloading {package} {version}"));
    run("apt-get", &["download", "-q", &format!("{package}={version}")], Some(&download))
        .map_err(|e| Error::Missing(format!("downloading {package}: {e} (can the Debian archive be reached?)")))?;
    let deb = single_file(&download, ".deb")?;
    let root = dir.join("root");
    progress(&format!("unpacking into {}", root.display()));
    run("dpkg-deb", &["-x", &deb.to_string_lossy(), &root.to_string_lossy()], None)?;
    std::fs::remove_dir_all(&download).map_err(|e| Error::io("removing", &download, e))?;
    let image_path = find_vmlinuz(&root.join("boot"))?;
    let info = image::inspect(&image_path)?;
    // virtme-ng runs depmod itself when modules.dep is missing; doing it
    // here keeps every later boot from repeating it.
    if Path::new(&root.join("lib/modules").join(&info.release)).is_dir() {
        let _ = run("depmod", &["-a", "-b", &root.to_string_lossy(), &info.release], None);
    }
    let manifest = Manifest {
        name: known.name.to_string(),
        package,
        package_version: version,
        release: info.release.clone(),
        version: info.version.clone(),
        image: image_path.strip_prefix(&dir).unwrap_or(&image_path).to_path_buf(),
        fetched_at: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
    };
    cache::write_manifest(&dir, &manifest)?;
    Ok((manifest, dir))
}

fn find_vmlinuz(boot: &Path) -> Result<PathBuf> {
    let entries = std::fs::read_dir(boot).map_err(|e| Error::io("reading", boot, e))?;
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("vmlinuz-")))
        .ok_or_else(|| Error::Failed(format!("{}: the package holds no vmlinuz-*", boot.display())))
}

fn single_file(dir: &Path, suffix: &str) -> Result<PathBuf> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::io("reading", dir, e))?;
    let files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.to_string_lossy().ends_with(suffix)).collect();
    match files.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(Error::Failed(format!("{}: expected one *{suffix} file, found {}", dir.display(), files.len()))),
    }
}

/// Runs a host program, returning its stdout; a missing program is exit 3
/// naming it, a failure carries its last line of stderr.
fn run(program: &str, args: &[&str], cwd: Option<&Path>) -> Result<String> {
    let mut command = Command::new(program);
    command.args(args);
    if let Some(dir) = cwd {
        command.current_dir(dir);
    }
    let out = command.output().map_err(|e| Error::Missing(format!("{program}: {e} (`lab fetch` needs Debian's apt and dpkg)")))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty() && !l.starts_with("W:")).unwrap_or("").trim();
        return Err(Error::Failed(format!("{program} {} failed ({}): {last}", args.join(" "), out.status)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
