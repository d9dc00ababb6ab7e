//! The background band at a network device's egress: a two-class strict
//! priority below the device's token bucket, so that at the link's dequeue
//! point the foreground's packets go before the background's. This is the
//! queue half of the idletime dissertation's network scheduler (§5.4: a
//! priority queue at the driver's dequeue point, plus the preemption
//! interval, which the gate keeps). Without it the background's packets
//! already queued when a foreground burst starts (up to its socket buffer,
//! 2.6 ms of a 100 Mbit/s link for 32 KB) go first, and a TCP foreground,
//! which restarts from its initial window after each pause, pays for them.
//!
//! This kernel has no `prio` qdisc; HTB (classes of equal, ample rate and
//! priorities 0 and 1) is the strict priority here. It replaces the token
//! bucket's inner FIFO (through the journal, so that every exit path puts
//! the FIFO back); the watch's cls_bpf program sends the packets of
//! background sockets to the low class ([`crate::monitor::io::IoWatch::attach_band`]).

use irqlab_host::error::Result;
use irqlab_host::journal::{self, Applied, Object, Value};
use serde::Serialize;

/// The band's qdisc handle (`1a:`), and its classes' minors.
const MAJOR: u32 = 0x1a;
const FOREGROUND_MINOR: u32 = 0x10;
const BACKGROUND_MINOR: u32 = 0x20;
/// The classes' rate and ceiling: ten times the links irqlab shapes
/// (100 Mbit/s), so that HTB never holds a packet back and only its
/// priority acts; the token bucket above sets the link's rate.
const CLASS_RATE: &str = "1gbit";

/// The background class (major:minor).
pub const fn background_classid() -> u32 {
    (MAJOR << 16) | BACKGROUND_MINOR
}

/// Where the band goes on `dev`: below its root token bucket (the
/// parent, e.g. `8044:1`). Otherwise why not: a band needs the link's
/// rate set above it, or it would never hold a packet.
pub fn placement(dev: &str) -> Result<std::result::Result<String, String>> {
    let show = journal::tc(&["qdisc", "show", "dev", dev, "root"])?;
    Ok(parent_below_root(&show).ok_or_else(|| {
        let root = show.split_whitespace().nth(1).unwrap_or("none");
        format!(
            "no background band on {dev}: its root qdisc is {root}, not a token bucket (tbf) setting the link's rate, so no queue \
             forms where a priority could act; the gate alone holds the background back"
        )
    }))
}

/// `qdisc tbf 8044: root ...` → `8044:1` (tbf's one class).
fn parent_below_root(show: &str) -> Option<String> {
    let words: Vec<&str> = show.lines().next()?.split_whitespace().collect();
    match words.as_slice() {
        ["qdisc", "tbf", handle, "root", ..] => Some(format!("{handle}1")),
        _ => None,
    }
}

/// What the band did, read from the qdisc's classes at the end.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BandFigures {
    /// Where it was: the device and the token bucket's class it sat in.
    pub dev: String,
    pub parent: String,
    /// Packets and bytes each class sent.
    pub foreground_packets: u64,
    pub foreground_bytes: u64,
    pub background_packets: u64,
    pub background_bytes: u64,
    /// Packets the classifier sent to the background class, read after
    /// the classes' counts.
    pub classified_background: u64,
}

/// The band in force; put back (the token bucket's FIFO) when dropped.
pub struct Band {
    dev: String,
    parent: String,
    qdisc: Applied,
}

impl Band {
    /// Replaces the FIFO below `parent` on `dev` with the band's HTB and
    /// its two classes (journalled). The classifier is attached by the caller.
    pub fn install(dev: &str, parent: &str) -> Result<Band> {
        let qdisc = journal::apply(
            Object::ChildQdisc { dev: dev.into(), parent: parent.into() },
            Value::Text { text: format!("handle {MAJOR:x}: htb default {FOREGROUND_MINOR:x}") },
        )?;
        for (minor, prio) in [(FOREGROUND_MINOR, 0), (BACKGROUND_MINOR, 1)] {
            let classid = format!("{MAJOR:x}:{minor:x}");
            let parent_handle = format!("{MAJOR:x}:");
            journal::tc(&[
                "class",
                "add",
                "dev",
                dev,
                "parent",
                &parent_handle,
                "classid",
                &classid,
                "htb",
                "rate",
                CLASS_RATE,
                "ceil",
                CLASS_RATE,
                "burst",
                "15k",
                "cburst",
                "15k",
                "quantum",
                "1514",
                "prio",
                &prio.to_string(),
            ])?;
        }
        Ok(Band { dev: dev.into(), parent: parent.into(), qdisc })
    }

    /// The classes' counts so far (`classified_background` is the caller's).
    pub fn figures(&self) -> Result<BandFigures> {
        // tc prints no JSON for HTB's classes.
        let show = journal::tc(&["-s", "class", "show", "dev", &self.dev])?;
        let counts = |minor: u32| sent_by_class(&show, &format!("{MAJOR:x}:{minor:x}")).unwrap_or((0, 0));
        let ((fb, fp), (bb, bp)) = (counts(FOREGROUND_MINOR), counts(BACKGROUND_MINOR));
        Ok(BandFigures {
            dev: self.dev.clone(),
            parent: self.parent.clone(),
            foreground_packets: fp,
            foreground_bytes: fb,
            background_packets: bp,
            background_bytes: bb,
            classified_background: 0,
        })
    }

    /// Puts the token bucket's FIFO back now.
    pub fn remove(self) -> Result<()> {
        self.qdisc.restore().map(|_| ())
    }
}

/// (bytes, packets) sent by class `classid` in `tc -s class show`:
/// the "Sent N bytes M pkt" line after its "class htb CLASSID" line.
fn sent_by_class(show: &str, classid: &str) -> Option<(u64, u64)> {
    let mut lines = show.lines().skip_while(|l| l.split_whitespace().nth(2) != Some(classid));
    lines.next()?;
    let sent: Vec<&str> = lines.find(|l| l.trim_start().starts_with("Sent "))?.split_whitespace().collect();
    match sent.as_slice() {
        ["Sent", bytes, "bytes", packets, "pkt", ..] => Some((bytes.parse().ok()?, packets.parse().ok()?)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_band_goes_below_a_root_token_bucket_only() {
        assert_eq!(parent_below_root("qdisc tbf 8044: root refcnt 3 rate 100Mbit burst 3000b lat 200ms \n").as_deref(), Some("8044:1"));
        assert_eq!(parent_below_root("qdisc noqueue 0: root refcnt 2 \n"), None);
        assert_eq!(parent_below_root("qdisc htb 1: root refcnt 2 r2q 10 default 0x10\n"), None);
        assert_eq!(parent_below_root(""), None);
        assert_eq!(background_classid(), 0x001a_0020);
    }

    #[test]
    fn class_counts_are_read_from_tc_text() {
        let show = "class tbf 8045:1 parent 8045: leaf 1a: \n Sent 900 bytes 9 pkt (dropped 0, overlimits 0 requeues 0) \n\
                    class htb 1a:10 root prio 0 rate 1Gbit ceil 1Gbit burst 15Kb cburst 15Kb \n \
                    Sent 1472000 bytes 1000 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n\
                    class htb 1a:20 root prio 1 rate 1Gbit ceil 1Gbit burst 15Kb cburst 15Kb \n \
                    Sent 2944 bytes 2 pkt (dropped 0, overlimits 0 requeues 0) \n";
        assert_eq!(sent_by_class(show, "1a:10"), Some((1_472_000, 1000)));
        assert_eq!(sent_by_class(show, "1a:20"), Some((2944, 2)));
        assert_eq!(sent_by_class(show, "1a:30"), None);
    }
}
