//! What a stimulus carries: a 32-byte payload that the ICMP echo reply and
//! the UDP responder send back unchanged, so a reply is matched to its
//! stimulus by sequence number without the target keeping any state.

/// Marks irqlab's stimuli among other traffic on the same socket.
pub const MAGIC: [u8; 4] = *b"IRQS";
pub const PAYLOAD_LEN: usize = 32;
pub const ICMP_HEADER_LEN: usize = 8;
pub const ICMP_ECHO_REQUEST: u8 = 8;
pub const ICMP_ECHO_REPLY: u8 = 0;

/// The payload of one stimulus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Payload {
    /// Random per run, so a late reply from an earlier run is not taken
    /// for one of this run's.
    pub run_id: u32,
    pub seq: u64,
    /// CLOCK_REALTIME just before the send, from user space: the fallback
    /// when the kernel's transmit timestamp does not come back.
    pub user_tx_ns: u64,
}

impl Payload {
    pub fn encode(&self) -> [u8; PAYLOAD_LEN] {
        let mut b = [0u8; PAYLOAD_LEN];
        b[0..4].copy_from_slice(&MAGIC);
        b[4..8].copy_from_slice(&self.run_id.to_le_bytes());
        b[8..16].copy_from_slice(&self.seq.to_le_bytes());
        b[16..24].copy_from_slice(&self.user_tx_ns.to_le_bytes());
        b
    }

    /// Decodes a payload at the start of `bytes`.
    pub fn decode(bytes: &[u8]) -> Option<Payload> {
        let b = bytes.get(..PAYLOAD_LEN)?;
        if b[0..4] != MAGIC {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        Some(Payload { run_id: u32_at(4), seq: u64_at(8), user_tx_ns: u64_at(16) })
    }

    /// Decodes the payload at the end of a whole packet (as the socket
    /// error queue returns a sent packet, headers included).
    pub fn decode_tail(packet: &[u8]) -> Option<Payload> {
        packet.len().checked_sub(PAYLOAD_LEN).and_then(|at| Payload::decode(&packet[at..]))
    }
}

/// An ICMP echo request carrying `payload`.
pub fn icmp_echo_request(id: u16, payload: &Payload) -> [u8; ICMP_HEADER_LEN + PAYLOAD_LEN] {
    let mut p = [0u8; ICMP_HEADER_LEN + PAYLOAD_LEN];
    p[0] = ICMP_ECHO_REQUEST;
    p[4..6].copy_from_slice(&id.to_be_bytes());
    p[6..8].copy_from_slice(&(payload.seq as u16).to_be_bytes());
    p[ICMP_HEADER_LEN..].copy_from_slice(&payload.encode());
    let sum = internet_checksum(&p);
    p[2..4].copy_from_slice(&sum.to_be_bytes());
    p
}

/// The payload of an ICMP echo reply with identifier `id`, from a packet
/// read on a raw IPv4 socket (IP header first).
pub fn parse_icmp_echo_reply(packet: &[u8], id: u16) -> Option<Payload> {
    let ihl = (*packet.first()? & 0x0f) as usize * 4;
    let icmp = packet.get(ihl..)?;
    if icmp.len() < ICMP_HEADER_LEN + PAYLOAD_LEN || icmp[0] != ICMP_ECHO_REPLY {
        return None;
    }
    if u16::from_be_bytes([icmp[4], icmp[5]]) != id {
        return None;
    }
    Payload::decode(&icmp[ICMP_HEADER_LEN..])
}

/// RFC 1071 one's-complement sum.
pub fn internet_checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for chunk in bytes.chunks(2) {
        let word = if chunk.len() == 2 { u16::from_be_bytes([chunk[0], chunk[1]]) } else { u16::from_be_bytes([chunk[0], 0]) };
        sum += word as u32;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Payload = Payload { run_id: 0xdead_beef, seq: 123_456_789_012, user_tx_ns: 42 };

    #[test]
    fn payload_round_trips_and_rejects_foreign_bytes() {
        assert_eq!(Payload::decode(&P.encode()), Some(P));
        assert_eq!(Payload::decode(&[0u8; PAYLOAD_LEN]), None);
        assert_eq!(Payload::decode(&P.encode()[..10]), None);
        let mut packet = vec![0xaa; 60];
        packet.extend_from_slice(&P.encode());
        assert_eq!(Payload::decode_tail(&packet), Some(P));
    }

    #[test]
    fn echo_request_checksums_to_zero() {
        let req = icmp_echo_request(7, &P);
        assert_eq!(internet_checksum(&req), 0);
        assert_eq!(req[0], ICMP_ECHO_REQUEST);
    }

    #[test]
    fn reply_is_matched_by_identifier() {
        let mut reply = vec![0x45u8];
        reply.extend_from_slice(&[0; 19]);
        let mut icmp = icmp_echo_request(7, &P).to_vec();
        icmp[0] = ICMP_ECHO_REPLY;
        reply.extend_from_slice(&icmp);
        assert_eq!(parse_icmp_echo_reply(&reply, 7), Some(P));
        assert_eq!(parse_icmp_echo_reply(&reply, 8), None);
        reply[20] = ICMP_ECHO_REQUEST;
        assert_eq!(parse_icmp_echo_reply(&reply, 7), None);
    }
}
