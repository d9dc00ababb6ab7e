//! Choosing the testbed's private /24 so it overlaps no route of the root
//! namespace (a clash would make the machine's own traffic disappear into
//! the testbed).

use crate::error::{Error, Result};

/// A route of the root namespace: destination and netmask, host order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub dest: u32,
    pub mask: u32,
}

/// Parses `/proc/net/route` (little-endian hex fields). The default route
/// (mask 0) overlaps everything and is skipped: it is a fallback, not a
/// claim on the address space.
pub fn parse_routes(text: &str) -> Vec<Route> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let dest = u32::from_str_radix(f.get(1)?, 16).ok()?;
            let mask = u32::from_str_radix(f.get(7)?, 16).ok()?;
            // The kernel prints the raw network-order word as a
            // little-endian number: its little-endian bytes are the octets.
            let octets = |v: u32| u32::from_be_bytes(v.to_le_bytes());
            Some(Route { dest: octets(dest), mask: octets(mask) })
        })
        .filter(|r| r.mask != 0)
        .collect()
}

fn overlaps(a: Route, b: Route) -> bool {
    let common = a.mask & b.mask;
    a.dest & common == b.dest & common
}

/// The first `10.213.X.0/24` (X = 0..=255) overlapping none of `routes`.
pub fn first_free(routes: &[Route]) -> Option<[u8; 3]> {
    (0..=255u8).map(|x| [10, 213, x]).find(|b| {
        let candidate = Route { dest: u32::from_be_bytes([b[0], b[1], b[2], 0]), mask: 0xffff_ff00 };
        !routes.iter().any(|&r| overlaps(candidate, r))
    })
}

/// A /24 for a new testbed that clashes with no route of this machine.
pub fn choose_subnet() -> Result<[u8; 3]> {
    let text = std::fs::read_to_string("/proc/net/route").map_err(|e| Error::io("reading /proc/net/route", e))?;
    first_free(&parse_routes(&text))
        .ok_or_else(|| Error::Failed("every 10.213.X.0/24 overlaps an existing route; no room for the testbed".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTES: &str = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
eth1\t0000D50A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n";

    #[test]
    fn parses_little_endian_routes_and_skips_default() {
        let routes = parse_routes(ROUTES);
        assert_eq!(routes.len(), 2);
        assert_eq!(routes[0], Route { dest: u32::from_be_bytes([192, 0, 2, 0]), mask: 0xffff_ff00 });
        assert_eq!(routes[1], Route { dest: u32::from_be_bytes([10, 213, 0, 0]), mask: 0xffff_0000 });
    }

    #[test]
    fn skips_clashing_subnets() {
        assert_eq!(first_free(&[]), Some([10, 213, 0]));
        let taken = [
            Route { dest: u32::from_be_bytes([10, 213, 0, 0]), mask: 0xffff_ff00 },
            Route { dest: u32::from_be_bytes([10, 213, 1, 128]), mask: 0xffff_ff80 },
        ];
        assert_eq!(first_free(&taken), Some([10, 213, 2]));
        // A /16 covering all candidates leaves nothing.
        assert_eq!(first_free(&parse_routes(ROUTES)), None);
    }
}
