//! Disk reads that bypass the page cache (O_DIRECT), so every one reaches
//! the device: the idletime experiments' processes. Random reads of one
//! block, `gap` apart, are the dissertation's foreground of intensity i
//! (§6.1.1, random reads of one file-system block); back-to-back
//! sequential reads of large blocks are its greedy background.

use crate::latency::stats::LatencyStats;
use irqlab_host::error::{Error, Result};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// O_DIRECT needs buffers, offsets and sizes aligned to the device's
/// logical block; 4 KiB covers every common one.
pub const ALIGN: u64 = 4096;

#[derive(Debug, Clone, PartialEq)]
pub struct Reads {
    pub file: std::path::PathBuf,
    pub block: u64,
    /// Pause after each read (0: back to back).
    pub gap_ns: u64,
    pub sequential: bool,
    /// The dissertation's foreground intensity i (§6): in each 100 ms
    /// quantum, read back to back for i × 100 ms, then sleep the rest.
    pub intensity: Option<f64>,
}

/// Writes `mib` MiB to `dir/name` and syncs it, so that reads of it reach
/// the device (a file to read for [`Reads`]); returns its path.
pub fn write_data_file(dir: &std::path::Path, name: &str, mib: usize) -> Result<std::path::PathBuf> {
    use std::io::Write;
    let path = dir.join(name);
    let io = |e| Error::io(format!("writing {}", path.display()), e);
    let mut f = std::fs::File::create(&path).map_err(io)?;
    let block: Vec<u8> = (0..1usize << 20).map(|i| (i * 31 % 251) as u8).collect();
    for _ in 0..mib {
        f.write_all(&block).map_err(io)?;
    }
    f.sync_all().map_err(io)?;
    Ok(path)
}

/// A zeroed buffer aligned for O_DIRECT.
struct Aligned {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let layout = std::alloc::Layout::from_size_align(len, ALIGN as usize).expect("block checked");
        // SAFETY: len > 0 (checked by the caller).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory for a {len}-byte read buffer");
        Aligned { ptr, layout }
    }
    fn slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr owns layout.size() bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

impl Reads {
    /// Checks the block size and the file; an error names the flag.
    pub fn check(&self) -> Result<u64> {
        super::Intensity::check(self.intensity)?;
        if self.block == 0 || !self.block.is_multiple_of(ALIGN) || self.block > 64 << 20 {
            return Err(Error::Invalid(format!("--block {}: a multiple of {ALIGN} bytes up to 64 MiB", self.block)));
        }
        let size = std::fs::metadata(&self.file).map_err(|e| Error::Invalid(format!("--file {}: {e}", self.file.display())))?.len();
        if size < self.block {
            return Err(Error::Invalid(format!("--file {}: {size} bytes, smaller than one block ({})", self.file.display(), self.block)));
        }
        Ok(size)
    }

    pub(super) fn run(&self, duration_ns: u64, stop: &AtomicBool) -> Result<super::Done> {
        let size = self.check()?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&self.file)
            .map_err(|e| Error::io(format!("opening {} with O_DIRECT", self.file.display()), e))?;
        let blocks = size / self.block;
        let mut buf = Aligned::new(self.block as usize);
        let mut latency = LatencyStats::new();
        // A fixed seed per process id: different processes read different blocks.
        let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(u64::from(std::process::id()));
        let deadline = super::deadline(duration_ns);
        let start = std::time::Instant::now();
        let pacing = self.intensity.map(super::Intensity::starting_now);
        let (mut reads, mut next) = (0u64, 0u64);
        while super::running(deadline, stop) {
            let block = if self.sequential {
                let b = next;
                next = (next + 1) % blocks;
                b
            } else {
                rand::Rng::gen_range(&mut rng, 0..blocks)
            };
            let t = std::time::Instant::now();
            file.read_exact_at(buf.slice(), block * self.block).map_err(|e| Error::io(format!("reading {}", self.file.display()), e))?;
            latency.record(t.elapsed().as_nanos() as u64);
            reads += 1;
            if self.gap_ns > 0 {
                std::thread::sleep(Duration::from_nanos(self.gap_ns));
            }
            if let Some(p) = &pacing {
                p.pace();
            }
        }
        let secs = start.elapsed().as_secs_f64().max(1e-9);
        let ms = |v: Option<u64>| v.map_or("-".to_string(), |ns| format!("{:.3} ms", ns as f64 / 1e6));
        let detail = format!(
            "{} reads of {} bytes from {}{}, {:.0}/s, {:.2} MB/s; per read p50 {}, p99 {}",
            if self.sequential { "sequential" } else { "random" },
            self.block,
            self.file.display(),
            self.intensity.map_or(String::new(), |i| format!(" at intensity {:.0}%", i * 100.0)),
            reads as f64 / secs,
            (reads * self.block) as f64 / secs / 1e6,
            ms(latency.quantile_ns(0.5)),
            ms(latency.quantile_ns(0.99))
        );
        Ok(super::Done::new(reads, "reads", detail))
    }
}
