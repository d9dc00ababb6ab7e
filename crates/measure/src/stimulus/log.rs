//! Raw records streamed to a file as they arrive (CSV or JSON lines),
//! flushed at least once a second so a crash loses at most the last second.
//! A stream, not a document: it is appended as the run goes, not written
//! atomically at the end.

use super::socket::{PathKind, StampSource};
use irqlab_host::error::{Error, Result};
use serde::Serialize;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One answered stimulus.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Record {
    pub path: PathKind,
    pub seq: u64,
    /// Send and receive times (CLOCK_REALTIME ns, or the NIC's clock).
    pub tx_ns: u64,
    pub rx_ns: u64,
    pub latency_ns: u64,
    pub timestamps: StampSource,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Csv,
    JsonLines,
}

impl LogFormat {
    /// `.csv` is CSV; anything else (`.jsonl`, `.ndjson`, `.json`, ...) is
    /// JSON lines.
    pub fn from_path(path: &Path) -> LogFormat {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("csv") => LogFormat::Csv,
            _ => LogFormat::JsonLines,
        }
    }
}

pub const FLUSH_EVERY: Duration = Duration::from_secs(1);

pub struct RecordLog {
    path: PathBuf,
    out: BufWriter<File>,
    format: LogFormat,
    last_flush: Instant,
    written: u64,
}

impl RecordLog {
    pub fn create(path: &Path, format: LogFormat) -> Result<RecordLog> {
        let file = File::create(path).map_err(|e| Error::io(format!("creating log {}", path.display()), e))?;
        let mut log = RecordLog {
            path: path.to_path_buf(),
            out: BufWriter::with_capacity(1 << 20, file),
            format,
            last_flush: Instant::now(),
            written: 0,
        };
        if format == LogFormat::Csv {
            log.put(|w| writeln!(w, "path,seq,tx_ns,rx_ns,latency_ns,timestamps"))?;
        }
        Ok(log)
    }

    fn put(&mut self, f: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>) -> Result<()> {
        f(&mut self.out).map_err(|e| Error::io(format!("writing log {}", self.path.display()), e))
    }

    pub fn write(&mut self, r: &Record) -> Result<()> {
        // Formatted by hand into one line buffer: at 200k records a second
        // serde's per-record encoding was a fifth of a CPU; the bytes are
        // the same (`json_line_is_what_serde_writes`).
        let mut line = [0u8; 160];
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            line[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        let mut num = [0u8; 20];
        match self.format {
            LogFormat::Csv => {
                put(r.path.name().as_bytes());
                put(b",");
                put(decimal(r.seq, &mut num));
                put(b",");
                put(decimal(r.tx_ns, &mut num));
                put(b",");
                put(decimal(r.rx_ns, &mut num));
                put(b",");
                put(decimal(r.latency_ns, &mut num));
                put(b",");
                put(r.timestamps.name().as_bytes());
            }
            LogFormat::JsonLines => {
                put(b"{\"path\":\"");
                put(r.path.name().as_bytes());
                put(b"\",\"seq\":");
                put(decimal(r.seq, &mut num));
                put(b",\"tx_ns\":");
                put(decimal(r.tx_ns, &mut num));
                put(b",\"rx_ns\":");
                put(decimal(r.rx_ns, &mut num));
                put(b",\"latency_ns\":");
                put(decimal(r.latency_ns, &mut num));
                put(b",\"timestamps\":\"");
                put(r.timestamps.name().as_bytes());
                put(b"\"}");
            }
        }
        put(b"\n");
        self.put(|w| w.write_all(&line[..at]))?;
        self.written += 1;
        self.flush_if_due()
    }

    /// Flushes when the last flush is a second old; called on every record
    /// and on every idle tick of the collector, so quiet periods flush too.
    pub fn flush_if_due(&mut self) -> Result<()> {
        if self.last_flush.elapsed() >= FLUSH_EVERY {
            self.flush()?;
        }
        Ok(())
    }

    pub fn flush(&mut self) -> Result<()> {
        self.last_flush = Instant::now();
        self.put(|w| w.flush())
    }

    pub fn written(&self) -> u64 {
        self.written
    }
}

/// `v` in decimal, in the tail of `buf`.
fn decimal(mut v: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return &buf[at..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(seq: u64) -> Record {
        Record { path: PathKind::Udp, seq, tx_ns: 100, rx_ns: 250, latency_ns: 150, timestamps: StampSource::Software }
    }

    #[test]
    fn json_line_is_what_serde_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let mut log = RecordLog::create(&path, LogFormat::JsonLines).unwrap();
        let records = [
            rec(0),
            Record { path: PathKind::Icmp, seq: u64::MAX, tx_ns: 0, rx_ns: u64::MAX, latency_ns: 9, timestamps: StampSource::Hardware },
            Record {
                path: PathKind::Udp,
                seq: 10,
                tx_ns: 1_764_106_388_123_456_789,
                rx_ns: 1,
                latency_ns: 0,
                timestamps: StampSource::User,
            },
        ];
        let mut expected = String::new();
        for r in &records {
            log.write(r).unwrap();
            expected += &serde_json::to_string(r).unwrap();
            expected.push('\n');
        }
        log.flush().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
    }

    #[test]
    fn csv_and_json_lines() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("r.csv");
        assert_eq!(LogFormat::from_path(&csv), LogFormat::Csv);
        let mut log = RecordLog::create(&csv, LogFormat::Csv).unwrap();
        log.write(&rec(1)).unwrap();
        log.flush().unwrap();
        assert_eq!(std::fs::read_to_string(&csv).unwrap(), "path,seq,tx_ns,rx_ns,latency_ns,timestamps\nudp,1,100,250,150,software\n");

        let jl = dir.path().join("r.jsonl");
        assert_eq!(LogFormat::from_path(&jl), LogFormat::JsonLines);
        let mut log = RecordLog::create(&jl, LogFormat::JsonLines).unwrap();
        log.write(&rec(2)).unwrap();
        log.flush().unwrap();
        let v: serde_json::Value = serde_json::from_str(std::fs::read_to_string(&jl).unwrap().trim()).unwrap();
        assert_eq!(v["seq"], 2);
        assert_eq!(v["path"], "udp");
        assert_eq!(v["timestamps"], "software");
    }
}
