//! Disk load: rewrite a 16 MiB scratch file in 1 MiB blocks with an
//! fdatasync after each, so the block layer and its completion interrupts
//! stay busy. The file is removed on every exit path (it is a tempfile).

use irqlab_host::error::{Error, Result};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::atomic::AtomicBool;

const BLOCK: usize = 1 << 20;
const BLOCKS: u64 = 16;

pub fn run(dir: &Path, duration_ns: u64, stop: &AtomicBool) -> Result<super::Done> {
    let mut file = tempfile::tempfile_in(dir).map_err(|e| Error::io(format!("creating a scratch file in {}", dir.display()), e))?;
    let block = vec![0x5au8; BLOCK];
    let deadline = super::deadline(duration_ns);
    let mut written = 0u64;
    let io = |e| Error::io("writing the scratch file", e);
    while super::running(deadline, stop) {
        if written.is_multiple_of(BLOCKS) {
            file.seek(SeekFrom::Start(0)).map_err(io)?;
        }
        file.write_all(&block).map_err(io)?;
        file.sync_data().map_err(io)?;
        written += 1;
    }
    Ok(super::Done::new(written, "MiB written and synced", format!("scratch file in {}", dir.display())))
}
