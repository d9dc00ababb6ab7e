//! A simplified BSD TCP: enough of FreeBSD 4.x's sender and receiver for
//! the dissertation's network experiments (§6.2, §6.3) to show how
//! foreground TCP depends on its round-trip time.
//!
//! Sender: slow start and congestion avoidance, restart from a small window
//! after an idle period longer than the RTO, fast retransmit on three
//! duplicate ACKs (cwnd halved, no window inflation), RTO with Jacobson's
//! estimator whose smoothed RTT cannot go below 1.25 ms (10 ms ticks with a
//! scale of 8, §6.2.2.1) plus FreeBSD's 200 ms slop, a local-congestion "quench" (cwnd = 1 segment)
//! when the interface queue refuses a segment (ENOBUFS), and a socket buffer
//! that bounds unacknowledged plus unsent data.
//! Receiver: in-order delivery with an out-of-order store, an immediate ACK
//! for every second segment or for out-of-order data, otherwise a delayed ACK.

use irqlab_analysis::Nanos;
use std::collections::BTreeMap;

/// Maximum segment size on a 1500-byte MTU with timestamps (RFC 1323 on in
/// FreeBSD 4.x): 1500 − 20 (IP) − 32 (TCP + timestamp option).
pub const MSS: u64 = 1448;
/// Socket buffers of the benchmark (§6.2: "increases socket buffers to 128KB").
pub const SOCKET_BUFFER: u64 = 128 * 1024;
/// Smallest smoothed RTT the BSD estimator can hold: 10 ms timer ticks,
/// fixed point with a scale of 8 (§6.2.2.1).
pub const MIN_RTT_ESTIMATE_NS: Nanos = 1_250_000;
/// Initial window after an idle period on a local network (FreeBSD 4.x
/// `net.inet.tcp.local_slowstart_flightsize` = 4).
pub const RESTART_WINDOW_SEGMENTS: u64 = 4;
/// Delayed-ACK timeout, FreeBSD's TCPTV_DELACK = hz/10 = 100 ms.
pub const DELACK_NS: Nanos = 100_000_000;
/// Retransmission timeout before the first RTT sample (TCPTV_RTOBASE, 3 s).
pub const INITIAL_RTO_NS: Nanos = 3_000_000_000;
/// Lower bound of the RTO: FreeBSD's `net.inet.tcp.rexmit_min` (hz/33 ≈ 30 ms).
pub const RTO_MIN_NS: Nanos = 30_000_000;
/// Slop added to every RTO so that a delayed ACK never looks like a loss:
/// FreeBSD's `net.inet.tcp.rexmit_slop` (TCPTV_CPU_VAR = hz/5 = 200 ms).
pub const RTO_SLOP_NS: Nanos = 200_000_000;

/// What an arriving ACK did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckOutcome {
    /// New data acknowledged; `freed` bytes left the socket buffer.
    NewData { freed: u64 },
    /// A duplicate ACK below the threshold.
    Duplicate,
    /// The third duplicate ACK: retransmit the segment at `snd_una` now.
    FastRetransmit,
    /// Old or irrelevant.
    Ignored,
}

#[derive(Debug, Clone)]
pub struct TcpSender {
    pub snd_una: u64,
    pub snd_nxt: u64,
    /// Highest sequence sent so far (snd_nxt can fall back on an RTO).
    pub snd_max: u64,
    /// End of the data the application has written.
    pub sb_end: u64,
    pub cwnd: u64,
    pub ssthresh: u64,
    pub rwnd: u64,
    dupacks: u32,
    srtt_ns: Option<f64>,
    rttvar_ns: f64,
    backoff: u32,
    /// The segment being timed for an RTT sample (Karn: never a retransmission).
    timed: Option<(u64, Nanos)>,
    /// Last time data was sent or acknowledged, for the idle restart.
    last_activity: Nanos,
    pub rto_min_ns: Nanos,
    pub rto_slop_ns: Nanos,
    pub timeouts: u64,
    pub fast_retransmits: u64,
    pub quenches: u64,
}

impl Default for TcpSender {
    fn default() -> Self {
        Self::new()
    }
}

impl TcpSender {
    pub fn new() -> Self {
        TcpSender {
            snd_una: 0,
            snd_nxt: 0,
            snd_max: 0,
            sb_end: 0,
            cwnd: RESTART_WINDOW_SEGMENTS * MSS,
            ssthresh: u64::MAX / 2,
            rwnd: SOCKET_BUFFER,
            dupacks: 0,
            srtt_ns: None,
            rttvar_ns: 0.0,
            backoff: 0,
            timed: None,
            last_activity: 0,
            rto_min_ns: RTO_MIN_NS,
            rto_slop_ns: RTO_SLOP_NS,
            timeouts: 0,
            fast_retransmits: 0,
            quenches: 0,
        }
    }

    /// The connection was opened with connect(2): BSD times the SYN, so
    /// the SYN/SYN-ACK exchange is the first RTT sample and the RTO starts
    /// from it rather than from the 3 s TCPTV_RTOBASE.
    pub fn established(&mut self, handshake_rtt_ns: Nanos) {
        self.rtt_sample(handshake_rtt_ns as f64);
    }

    /// Free space in the socket buffer (written but unacknowledged data counts).
    pub fn sb_space(&self) -> u64 {
        SOCKET_BUFFER.saturating_sub(self.sb_end - self.snd_una)
    }

    /// The application writes up to `bytes`; returns how many fitted.
    pub fn write(&mut self, bytes: u64) -> u64 {
        let n = bytes.min(self.sb_space());
        self.sb_end += n;
        n
    }

    pub fn outstanding(&self) -> u64 {
        self.snd_max - self.snd_una
    }

    /// The next segment the window and the data allow, if any.
    pub fn next_segment(&self) -> Option<(u64, u64)> {
        let window_end = self.snd_una + self.cwnd.min(self.rwnd);
        let end = window_end.min(self.sb_end);
        if self.snd_nxt >= end {
            return None;
        }
        Some((self.snd_nxt, (end - self.snd_nxt).min(MSS)))
    }

    /// Before sending after an idle period longer than the RTO, shrink the
    /// window back to the restart window (BSD's idle restart).
    pub fn maybe_restart_after_idle(&mut self, now: Nanos) {
        if self.outstanding() == 0 && now.saturating_sub(self.last_activity) >= self.rto_ns() {
            self.cwnd = self.cwnd.min(RESTART_WINDOW_SEGMENTS * MSS);
        }
    }

    /// A segment `(seq, len)` went to the interface queue at `now`.
    pub fn on_sent(&mut self, now: Nanos, seq: u64, len: u64) {
        let end = seq + len;
        let retransmission = end <= self.snd_max;
        if seq == self.snd_nxt {
            self.snd_nxt = end;
        }
        if end > self.snd_max {
            self.snd_max = end;
        }
        if self.timed.is_none() && !retransmission {
            self.timed = Some((seq, now));
        }
        if retransmission {
            // Karn: a retransmission invalidates the running sample.
            if matches!(self.timed, Some((s, _)) if s < end) {
                self.timed = None;
            }
        }
        self.last_activity = now;
    }

    /// The interface queue refused a segment (ENOBUFS): FreeBSD 4.x calls
    /// tcp_quench, cutting cwnd to one segment.
    pub fn quench(&mut self) {
        self.quenches += 1;
        self.cwnd = MSS;
    }

    fn rtt_sample(&mut self, sample: f64) {
        match self.srtt_ns {
            None => {
                self.srtt_ns = Some(sample);
                self.rttvar_ns = sample / 2.0;
            }
            Some(srtt) => {
                let err = sample - srtt;
                self.srtt_ns = Some(srtt + err / 8.0);
                self.rttvar_ns += (err.abs() - self.rttvar_ns) / 4.0;
            }
        }
    }

    /// The smoothed RTT as BSD holds it: never below 1.25 ms.
    pub fn srtt_estimate_ns(&self) -> Option<f64> {
        self.srtt_ns.map(|s| s.max(MIN_RTT_ESTIMATE_NS as f64))
    }

    /// Retransmission timeout: srtt + 4·rttvar on the 1.25 ms-floored
    /// estimate, at least `rto_min`, plus the slop, doubled per consecutive
    /// timeout.
    pub fn rto_ns(&self) -> Nanos {
        let base = match self.srtt_estimate_ns() {
            None => INITIAL_RTO_NS as f64,
            Some(s) => (s + 4.0 * self.rttvar_ns).max(self.rto_min_ns as f64) + self.rto_slop_ns as f64,
        };
        (base * (1u64 << self.backoff.min(6)) as f64).min(64e9) as Nanos
    }

    pub fn on_ack(&mut self, now: Nanos, ack: u64) -> AckOutcome {
        if ack > self.snd_max {
            return AckOutcome::Ignored;
        }
        if ack > self.snd_una {
            let freed = ack - self.snd_una;
            self.snd_una = ack;
            if self.snd_nxt < ack {
                self.snd_nxt = ack;
            }
            self.dupacks = 0;
            self.backoff = 0;
            if let Some((seq, sent)) = self.timed {
                if ack > seq {
                    self.rtt_sample((now - sent) as f64);
                    self.timed = None;
                }
            }
            if self.cwnd < self.ssthresh {
                self.cwnd += MSS; // slow start
            } else {
                self.cwnd += (MSS * MSS / self.cwnd).max(1); // congestion avoidance
            }
            self.cwnd = self.cwnd.min(4 * SOCKET_BUFFER);
            self.last_activity = now;
            return AckOutcome::NewData { freed };
        }
        if ack == self.snd_una && self.outstanding() > 0 {
            self.dupacks += 1;
            if self.dupacks == 3 {
                self.ssthresh = (self.cwnd.min(self.rwnd) / 2).max(2 * MSS);
                self.cwnd = self.ssthresh;
                self.fast_retransmits += 1;
                return AckOutcome::FastRetransmit;
            }
            return AckOutcome::Duplicate;
        }
        AckOutcome::Ignored
    }

    /// The retransmission timer fired: go back to snd_una with one segment.
    pub fn on_timeout(&mut self) {
        self.ssthresh = (self.cwnd.min(self.rwnd) / 2).max(2 * MSS);
        self.cwnd = MSS;
        self.snd_nxt = self.snd_una;
        self.dupacks = 0;
        self.timed = None;
        self.backoff += 1;
        self.timeouts += 1;
    }
}

/// What the receiver does about an arriving segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckAction {
    /// Send an ACK for `rcv_nxt` now.
    Now(u64),
    /// Arm the delayed-ACK timer (if not armed).
    Delay,
}

#[derive(Debug, Clone, Default)]
pub struct TcpReceiver {
    pub rcv_nxt: u64,
    out_of_order: BTreeMap<u64, u64>,
    unacked_segments: u32,
}

impl TcpReceiver {
    /// A data segment arrived; returns the bytes delivered in order to the
    /// application and what to do about the ACK.
    pub fn on_data(&mut self, seq: u64, len: u64) -> (u64, AckAction) {
        if seq > self.rcv_nxt {
            self.out_of_order.insert(seq, len);
            return (0, AckAction::Now(self.rcv_nxt)); // duplicate ACK
        }
        if seq + len <= self.rcv_nxt {
            return (0, AckAction::Now(self.rcv_nxt)); // old data
        }
        let before = self.rcv_nxt;
        self.rcv_nxt = seq + len;
        let mut filled_hole = false;
        while let Some((&s, &l)) = self.out_of_order.iter().next() {
            if s > self.rcv_nxt {
                break;
            }
            self.out_of_order.remove(&s);
            self.rcv_nxt = self.rcv_nxt.max(s + l);
            filled_hole = true;
        }
        let delivered = self.rcv_nxt - before;
        self.unacked_segments += 1;
        if filled_hole || self.unacked_segments >= 2 {
            self.unacked_segments = 0;
            (delivered, AckAction::Now(self.rcv_nxt))
        } else {
            (delivered, AckAction::Delay)
        }
    }

    /// The delayed-ACK timer fired: ACK if anything is unacknowledged.
    pub fn on_delack(&mut self) -> Option<u64> {
        if self.unacked_segments > 0 {
            self.unacked_segments = 0;
            Some(self.rcv_nxt)
        } else {
            None
        }
    }

    /// Called when an ACK was sent for another reason.
    pub fn acked(&mut self) {
        self.unacked_segments = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send_all(s: &mut TcpSender, now: Nanos) -> Vec<(u64, u64)> {
        let mut v = vec![];
        while let Some((seq, len)) = s.next_segment() {
            s.on_sent(now, seq, len);
            v.push((seq, len));
        }
        v
    }

    #[test]
    fn slow_start_then_congestion_avoidance() {
        let mut s = TcpSender::new();
        s.write(SOCKET_BUFFER);
        assert_eq!(send_all(&mut s, 0).len(), 4); // restart window of 4 segments
        s.on_ack(1_000_000, 2 * MSS);
        assert_eq!(s.cwnd, 5 * MSS); // +1 MSS per ACK in slow start
        s.ssthresh = 5 * MSS;
        s.on_ack(1_100_000, 4 * MSS);
        assert_eq!(s.cwnd, 5 * MSS + MSS / 5); // +MSS²/cwnd in avoidance
    }

    #[test]
    fn three_duplicate_acks_fast_retransmit_and_halve() {
        let mut s = TcpSender::new();
        s.cwnd = 20 * MSS;
        s.write(SOCKET_BUFFER);
        send_all(&mut s, 0);
        s.on_ack(1, MSS);
        assert_eq!(s.on_ack(2, MSS), AckOutcome::Duplicate);
        assert_eq!(s.on_ack(3, MSS), AckOutcome::Duplicate);
        assert_eq!(s.on_ack(4, MSS), AckOutcome::FastRetransmit);
        assert_eq!(s.ssthresh, 21 * MSS / 2);
        assert_eq!(s.cwnd, s.ssthresh);
    }

    #[test]
    fn rtt_estimate_floors_at_1_25ms_and_rto_backs_off() {
        let mut s = TcpSender::new();
        s.rto_min_ns = 0;
        s.rto_slop_ns = 0;
        assert_eq!(s.rto_ns(), INITIAL_RTO_NS);
        s.write(10 * MSS);
        send_all(&mut s, 0);
        s.on_ack(100_000, 2 * MSS); // a 0.1 ms sample on a LAN
        assert_eq!(s.srtt_estimate_ns(), Some(1_250_000.0));
        assert_eq!(s.rto_ns(), 1_250_000 + 200_000); // 1.25 ms + 4 × 0.05 ms
        s.on_timeout();
        assert_eq!(s.rto_ns(), 2 * 1_450_000);
        assert_eq!(s.cwnd, MSS);
        assert_eq!(s.snd_nxt, s.snd_una);
        s.rto_min_ns = RTO_MIN_NS;
        s.rto_slop_ns = RTO_SLOP_NS;
        assert_eq!(s.rto_ns(), 2 * (RTO_MIN_NS + RTO_SLOP_NS));
    }

    #[test]
    fn handshake_sample_replaces_the_3s_initial_rto() {
        let mut s = TcpSender::new();
        assert_eq!(s.rto_ns(), INITIAL_RTO_NS);
        s.established(60_000); // a 60 µs LAN round trip
        assert_eq!(s.srtt_estimate_ns(), Some(MIN_RTT_ESTIMATE_NS as f64));
        assert_eq!(s.rto_ns(), RTO_MIN_NS + RTO_SLOP_NS);
    }

    #[test]
    fn socket_buffer_bounds_writes_and_quench_shrinks_window() {
        let mut s = TcpSender::new();
        assert_eq!(s.write(200_000), SOCKET_BUFFER);
        assert_eq!(s.sb_space(), 0);
        send_all(&mut s, 0);
        s.on_ack(10, MSS);
        assert_eq!(s.sb_space(), MSS);
        s.quench();
        assert_eq!(s.cwnd, MSS);
    }

    #[test]
    fn idle_restart_shrinks_window() {
        let mut s = TcpSender::new();
        s.cwnd = 40 * MSS;
        s.maybe_restart_after_idle(10 * INITIAL_RTO_NS);
        assert_eq!(s.cwnd, RESTART_WINDOW_SEGMENTS * MSS);
    }

    #[test]
    fn receiver_delays_every_other_ack_and_dupacks_out_of_order() {
        let mut r = TcpReceiver::default();
        assert_eq!(r.on_data(0, MSS), (MSS, AckAction::Delay));
        assert_eq!(r.on_data(MSS, MSS), (MSS, AckAction::Now(2 * MSS)));
        assert_eq!(r.on_data(3 * MSS, MSS), (0, AckAction::Now(2 * MSS)));
        assert_eq!(r.on_data(2 * MSS, MSS), (2 * MSS, AckAction::Now(4 * MSS)));
        assert_eq!(r.on_data(4 * MSS, MSS), (MSS, AckAction::Delay));
        assert_eq!(r.on_delack(), Some(5 * MSS));
        assert_eq!(r.on_delack(), None);
    }
}
