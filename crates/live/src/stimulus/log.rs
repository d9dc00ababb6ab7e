//! Raw records streamed to a file as they arrive (CSV or JSON lines),
//! flushed at least once a second so a crash loses at most the last second.
//! A stream, not a document: it is appended as the run goes, not written
//! atomically at the end.

use super::socket::{PathKind, StampSource};
use crate::error::{Error, Result};
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
        let mut log = RecordLog { path: path.to_path_buf(), out: BufWriter::new(file), format, last_flush: Instant::now(), written: 0 };
        if format == LogFormat::Csv {
            log.put(|w| writeln!(w, "path,seq,tx_ns,rx_ns,latency_ns,timestamps"))?;
        }
        Ok(log)
    }

    fn put(&mut self, f: impl FnOnce(&mut BufWriter<File>) -> std::io::Result<()>) -> Result<()> {
        f(&mut self.out).map_err(|e| Error::io(format!("writing log {}", self.path.display()), e))
    }

    pub fn write(&mut self, r: &Record) -> Result<()> {
        match self.format {
            LogFormat::Csv => {
                let source = serde_json::to_value(r.timestamps).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
                self.put(|w| writeln!(w, "{},{},{},{},{},{}", r.path.name(), r.seq, r.tx_ns, r.rx_ns, r.latency_ns, source))?
            }
            LogFormat::JsonLines => {
                let line = serde_json::to_string(r).map_err(|e| Error::Failed(format!("encoding a record: {e}")))?;
                self.put(|w| writeln!(w, "{line}"))?
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(seq: u64) -> Record {
        Record { path: PathKind::Udp, seq, tx_ns: 100, rx_ns: 250, latency_ns: 150, timestamps: StampSource::Software }
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
