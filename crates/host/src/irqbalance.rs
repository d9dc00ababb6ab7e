//! irqbalance, through its own run-time socket (irqbalance 1.7 and later:
//! `/run/irqbalance/irqbalance<PID>.sock`, root only). irqbalance moves
//! every IRQ it has not been told to leave alone at each pass (every 10 s);
//! an IRQ on its banned list it never touches. So irqlab, to keep an IRQ
//! where it put it while irqbalance runs, adds the IRQ to that list for
//! the hold (`journal::Object::IrqbalanceBans`) and gives the list back
//! after. The protocol (irqbalance.c, `sock_handle`): `setup` answers
//! `SLEEP n [IRQ n LOAD n DIFF n CLASS n ]... BANNED mask`, the IRQs being
//! the banned list; `settings ban irqs N M ...` (or `NONE`) replaces it.

use crate::error::{Error, Result};
use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

/// Where irqbalance puts its socket (`SOCKET_TMPFS`).
const SOCKET_DIR: &str = "/run/irqbalance";

/// A running irqbalance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Daemon {
    pub pid: i32,
}

/// The irqbalance processes running now (by their name).
pub fn running() -> Vec<Daemon> {
    crate::machine::processes_named("irqbalance").into_iter().map(|pid| Daemon { pid }).collect()
}

impl Daemon {
    pub fn socket(&self) -> PathBuf {
        PathBuf::from(format!("{SOCKET_DIR}/irqbalance{}.sock", self.pid))
    }

    /// Whether it listens where irqlab can tell it what to leave alone.
    pub fn has_socket(&self) -> bool {
        self.socket().exists()
    }

    /// One request, the whole answer (irqbalance closes after it).
    fn ask(&self, request: &str) -> Result<String> {
        let path = self.socket();
        let io = |e| Error::io(format!("irqbalance's socket {}", path.display()), e);
        let mut stream = UnixStream::connect(&path).map_err(io)?;
        stream.set_read_timeout(Some(std::time::Duration::from_secs(2))).map_err(io)?;
        // irqbalance reads one message and serves it only when it carries
        // root's credentials (SCM_CREDENTIALS, as irqbalance-ui sends them).
        use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags, UnixAddr, UnixCredentials};
        use std::os::fd::AsRawFd;
        let creds = UnixCredentials::new();
        let iov = [std::io::IoSlice::new(request.as_bytes())];
        sendmsg::<UnixAddr>(stream.as_raw_fd(), &iov, &[ControlMessage::ScmCredentials(&creds)], MsgFlags::empty(), None)
            .map_err(|e| io(std::io::Error::from(e)))?;
        let mut answer = String::new();
        match stream.read_to_string(&mut answer) {
            Ok(_) => Ok(answer),
            // A request with no answer (`settings`) is closed without one.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(answer),
            Err(e) => Err(io(e)),
        }
    }

    /// The IRQs on its banned list (given with `--banirq` or through the
    /// socket), in order.
    pub fn banned(&self) -> Result<Vec<u32>> {
        let answer = self.ask("setup")?;
        if !answer.starts_with("SLEEP") {
            return Err(Error::Failed(format!(
                "irqbalance (pid {}) did not answer `setup` (only root may ask; answer: `{}`)",
                self.pid,
                answer.trim()
            )));
        }
        Ok(parse_irqs(&answer))
    }

    /// The IRQs it balances now (its `stats`: each topology object with
    /// the IRQs placed on it), sorted.
    pub fn balanced(&self) -> Result<Vec<u32>> {
        Ok(parse_irqs(&self.ask("stats")?))
    }

    /// Replaces its banned list (irqbalance rescans at its next pass and
    /// leaves these IRQs where they are from then on).
    pub fn set_banned(&self, irqs: &[u32]) -> Result<()> {
        let list = if irqs.is_empty() { "NONE".to_string() } else { irqs.iter().map(u32::to_string).collect::<Vec<_>>().join(" ") };
        self.ask(&format!("settings ban irqs {list}"))?;
        // Read back: an irqbalance that took nothing (not root, an older
        // protocol) must not look as if it had.
        let now = self.banned()?;
        if now != sorted(irqs) {
            return Err(Error::Failed(format!(
                "irqbalance (pid {}) was asked to leave IRQs {} alone and reports {}",
                self.pid,
                format_irqs(irqs),
                format_irqs(&now)
            )));
        }
        Ok(())
    }
}

fn sorted(irqs: &[u32]) -> Vec<u32> {
    let mut v = irqs.to_vec();
    v.sort_unstable();
    v.dedup();
    v
}

/// `1 2 38`, or `none`.
pub fn format_irqs(irqs: &[u32]) -> String {
    if irqs.is_empty() {
        "none".into()
    } else {
        irqs.iter().map(u32::to_string).collect::<Vec<_>>().join(" ")
    }
}

/// The IRQ numbers of a `setup` or `stats` answer (each `IRQ n`), sorted.
pub fn parse_irqs(answer: &str) -> Vec<u32> {
    let words: Vec<&str> = answer.split_whitespace().collect();
    let irqs: Vec<u32> = words.windows(2).filter(|w| w[0] == "IRQ").filter_map(|w| w[1].parse().ok()).collect();
    sorted(&irqs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_banned_list_is_read_from_setups_answer() {
        // As irqbalance 1.9.2 formats it: SLEEP, each banned IRQ, BANNED mask.
        let answer = "SLEEP 10 IRQ 38 LOAD 0 DIFF 0 CLASS 4 IRQ 24 LOAD 12 DIFF 3 CLASS 0 BANNED 00000000";
        assert_eq!(parse_irqs(answer), vec![24, 38]);
        assert_eq!(parse_irqs("SLEEP 10 BANNED 00000000"), Vec::<u32>::new());
        assert_eq!(format_irqs(&[24, 38]), "24 38");
        assert_eq!(format_irqs(&[]), "none");
    }
}
