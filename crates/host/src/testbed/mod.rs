//! The network testbed: two network namespaces `irqlab-a` and `irqlab-b`,
//! each joined to the root namespace (the machine under test) by a veth
//! pair, with GRO and threaded NAPI on the root side so received packets are
//! processed by a `napi/irqlab-<x>-<id>` kernel thread whose policy can be
//! measured and changed. The stand-in for the papers' "host A / host B".
//!
//! ```no_run
//! use irqlab_host::testbed::{Side, Testbed};
//! let bed = Testbed::up()?;                      // creates it, or joins an existing one
//! let server = bed.root_addr(Side::B);           // address of the root side of the b link
//! let handle = bed.spawn_in(Side::B, move || {   // a thread inside netns irqlab-b
//!     std::net::UdpSocket::bind("0.0.0.0:0").and_then(|s| s.send_to(b"x", (server, 9000)))
//! })?;
//! handle.join().unwrap()?;
//! drop(bed);                                     // removes it, unless still in use or made by `irqlab testbed up`
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Layout (in a private /24 chosen so it does not overlap any route of the
//! root namespace, `10.213.X.0/24` for the first free X):
//!
//! | link | root side | namespace side |
//! |---|---|---|
//! | a | `irqlab-a` `10.213.X.1/30` | `eth0` in `irqlab-a`, `10.213.X.2/30` |
//! | b | `irqlab-b` `10.213.X.5/30` | `eth0` in `irqlab-b`, `10.213.X.6/30` |
//!
//! TSO is off on the namespace side so that veth delivers what the hosts
//! send through the root side's NAPI (and so its kthread), not through
//! `netif_rx` on the sender's CPU.
//!
//! Each namespace's default route points at its root-side address. The root
//! namespace does not forward (no sysctl is changed), so a and b reach the
//! root namespace and not each other.
//!
//! Sharing: every [`Testbed`] guard holds a shared lock on
//! `/run/irqlab/testbed.users`; the guard that drops last removes the
//! testbed, unless `irqlab testbed up` created it to persist (marker file),
//! in which case only `irqlab testbed down` removes it.

mod lock;
mod netlink;
mod subnet;

pub use subnet::choose_subnet;

use crate::error::{Error, Result};
use crate::privilege::{require, Capability};
use std::fs::File;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

/// One of the two peer hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    A,
    B,
}

impl Side {
    pub const BOTH: [Side; 2] = [Side::A, Side::B];

    /// The network namespace's name, `irqlab-a` / `irqlab-b`; also the name
    /// of the root-side veth device.
    pub fn netns(self) -> &'static str {
        match self {
            Side::A => "irqlab-a",
            Side::B => "irqlab-b",
        }
    }

    fn offset(self) -> u8 {
        match self {
            Side::A => 0,
            Side::B => 4,
        }
    }

    /// Parses `a` / `b`.
    pub fn parse(text: &str) -> Option<Side> {
        match text {
            "a" | "A" | "irqlab-a" => Some(Side::A),
            "b" | "B" | "irqlab-b" => Some(Side::B),
            _ => None,
        }
    }
}

/// The name of the device inside each namespace.
pub const NS_DEVICE: &str = "eth0";
const RUN_DIR: &str = "/run/irqlab";
const PERSIST_MARKER: &str = "/run/irqlab/testbed.persistent";
/// Written by `create` once every step is done (removed with the testbed).
const BUILT_MARKER: &str = "/run/irqlab/testbed.built";
const NETNS_DIR: &str = "/run/netns";

/// A description of a testbed that is up, for `status` and JSON output.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Layout {
    /// The /24 the testbed's addresses are taken from.
    pub subnet: String,
    pub hosts: Vec<HostLayout>,
    /// Made by `irqlab testbed up`, kept until `irqlab testbed down`.
    pub persistent: bool,
    /// Both hosts exist with their addresses. A testbed whose maker was
    /// killed half-way (SIGKILL runs no clean-up) is not: `hosts` lists
    /// only what exists, and `irqlab testbed down` removes it.
    pub complete: bool,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HostLayout {
    pub side: Side,
    pub netns: String,
    pub root_device: String,
    pub root_addr: Ipv4Addr,
    pub host_addr: Ipv4Addr,
    pub gro: bool,
    pub threaded_napi: bool,
    /// Kernel threads `napi/irqlab-<x>-<id>` of the root-side device.
    pub napi_threads: Vec<NapiThread>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NapiThread {
    pub pid: i32,
    pub comm: String,
}

/// A testbed that is up. Dropping it removes the testbed when this was the
/// last user and it is not persistent.
#[derive(Debug)]
pub struct Testbed {
    base: [u8; 3],
    /// Shared with the exit-time undo action: whoever takes it releases.
    users: std::sync::Arc<std::sync::Mutex<Option<lock::UsersLock>>>,
    _at_exit: crate::cleanup::Registration,
}

impl Testbed {
    /// Brings the testbed up (idempotent: an existing one is joined as is)
    /// and returns a guard. Needs CAP_NET_ADMIN and CAP_SYS_ADMIN.
    pub fn up() -> Result<Testbed> {
        check_prerequisites()?;
        std::fs::create_dir_all(RUN_DIR).map_err(|e| Error::io(format!("creating {RUN_DIR}"), e))?;
        let _setup = lock::SetupLock::acquire()?;
        let mut creating = None;
        let base = match discover()? {
            Some(base) if is_complete(base) => base,
            found => {
                // A half-made testbed (crash, kill -9) is rebuilt.
                if found.is_some() {
                    remove_everything()?;
                }
                // Exiting half-way (a second Ctrl-C) removes what was made.
                let half_made = crate::cleanup::at_exit(|| {
                    let _ = remove_everything();
                });
                let base = choose_subnet()?;
                if let Err(e) = create(base) {
                    let _ = remove_everything();
                    return Err(e);
                }
                creating = Some(half_made);
                base
            }
        };
        let users = std::sync::Arc::new(std::sync::Mutex::new(Some(lock::UsersLock::join()?)));
        let at_exit = {
            let users = users.clone();
            crate::cleanup::at_exit(move || release(&users))
        };
        // From here the guard's own exit action covers it.
        drop(creating);
        Ok(Testbed { base, users, _at_exit: at_exit })
    }

    /// Brings the testbed up for `irqlab testbed up`: it stays after this
    /// process exits, until `irqlab testbed down`.
    pub fn up_persistent() -> Result<Layout> {
        let bed = Testbed::up()?;
        std::fs::write(PERSIST_MARKER, b"irqlab testbed up\n").map_err(|e| Error::io(format!("writing {PERSIST_MARKER}"), e))?;
        bed.layout()
    }

    /// The testbed currently up, or the leftovers of a half-made one
    /// (`complete: false`), if any (no changes made).
    pub fn status() -> Result<Option<Layout>> {
        match discover()? {
            Some(base) => Ok(Some(layout_of(base)?)),
            None => Ok(None),
        }
    }

    /// Removes every namespace and link named `irqlab-*`, the persistence
    /// marker, and nothing else. Idempotent.
    pub fn down() -> Result<()> {
        require_testbed_privilege()?;
        let _ = std::fs::create_dir_all(RUN_DIR);
        let _setup = lock::SetupLock::acquire()?;
        remove_everything()
    }

    /// The /24 in use, e.g. `10.213.0.0`.
    pub fn subnet(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.base[0], self.base[1], self.base[2], 0)
    }

    /// The root namespace's address on `side`'s link: the machine under
    /// test as seen from that host.
    pub fn root_addr(&self, side: Side) -> Ipv4Addr {
        addr(self.base, side.offset() + 1)
    }

    /// The address of host `side` inside its namespace.
    pub fn host_addr(&self, side: Side) -> Ipv4Addr {
        addr(self.base, side.offset() + 2)
    }

    /// Whether `ip` is one of the testbed's own addresses or loopback, the
    /// only places irqlab sends traffic to.
    pub fn allows_target(&self, ip: Ipv4Addr) -> bool {
        ip.is_loopback() || Side::BOTH.iter().any(|&s| ip == self.root_addr(s) || ip == self.host_addr(s))
    }

    /// The full description (devices, flags, NAPI threads).
    pub fn layout(&self) -> Result<Layout> {
        layout_of(self.base)
    }

    /// Runs `work` on a new thread that has joined `side`'s network
    /// namespace (sockets it opens live there). The calling thread's
    /// namespace is untouched.
    pub fn spawn_in<F, T>(&self, side: Side, work: F) -> Result<NsThread<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        spawn_in_netns(side.netns(), work)
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        // An exit on another thread (second Ctrl-C) waits for this.
        let _busy = crate::cleanup::busy();
        release(&self.users);
    }
}

/// Gives up this guard's share; the last user removes the testbed unless
/// `irqlab testbed up` made it to persist.
fn release(users: &std::sync::Mutex<Option<lock::UsersLock>>) {
    let Some(users) = users.lock().unwrap_or_else(|p| p.into_inner()).take() else { return };
    // Serialise with `up()` so a newcomer cannot join a testbed that is
    // being removed.
    let Ok(_setup) = lock::SetupLock::acquire() else { return };
    if users.last_user() && !Path::new(PERSIST_MARKER).exists() {
        let _ = remove_everything();
    }
}

/// A testbed nobody holds and nobody asked to keep: what a killed run left
/// (half-made by a killed `testbed up`, or made by a run that was killed
/// while using it). None while one is being made or removed, in use, or
/// kept by `irqlab testbed up`. Shown by the control journal
/// (`control status`, `doctor`) and removed by `control revert`.
pub fn abandoned() -> Option<Layout> {
    let _setup = lock::SetupLock::try_inspect()?;
    let layout = layout_of(discover().ok()??).ok()?;
    let kept = layout.complete && Path::new(PERSIST_MARKER).exists();
    (!kept && !lock::in_use()).then_some(layout)
}

/// Whether a [`Testbed`] guard in any process holds the testbed now.
pub fn in_use() -> bool {
    lock::in_use()
}

/// A thread running inside a network namespace; see [`spawn_in_netns`].
#[derive(Debug)]
pub struct NsThread<T>(std::thread::JoinHandle<Option<T>>);

impl<T> NsThread<T> {
    /// Waits for the thread and returns what its work returned (`Err` if
    /// the work panicked).
    pub fn join(self) -> std::thread::Result<T> {
        // `None` only comes from a thread whose setns failed, and such a
        // thread is never handed out.
        self.0.join().map(|v| v.expect("work ran after a successful setns"))
    }

    pub fn is_finished(&self) -> bool {
        self.0.is_finished()
    }
}

/// Runs `work` on a new thread inside the named network namespace
/// (`/run/netns/<name>`, as made by `ip netns add`). Sockets opened by
/// `work` live in that namespace; the caller's thread is untouched.
pub fn spawn_in_netns<F, T>(netns: &str, work: F) -> Result<NsThread<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let path = PathBuf::from(NETNS_DIR).join(netns);
    let ns = File::open(&path).map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    let (tx, rx) = std::sync::mpsc::channel();
    let handle = std::thread::Builder::new()
        .name(format!("in-{netns}"))
        .spawn(move || {
            let joined = nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET);
            drop(ns);
            let ok = joined.is_ok();
            let _ = tx.send(joined);
            // Never run work in the wrong namespace.
            ok.then(work)
        })
        .map_err(|e| Error::io("spawning a thread", e))?;
    match rx.recv() {
        Ok(Ok(())) => Ok(NsThread(handle)),
        Ok(Err(errno)) => Err(Error::sys(format!("setns into {netns}"), errno)),
        Err(_) => Err(Error::Failed(format!("thread for {netns} died before joining it"))),
    }
}

fn require_testbed_privilege() -> Result<()> {
    require(&[Capability::NetAdmin, Capability::SysAdmin], "create network namespaces and veth devices for the testbed")
}

/// What bringing the testbed up needs: the privileges and iproute2's `ip`
/// (exit 3 naming the first missing one).
pub fn check_prerequisites() -> Result<()> {
    require_testbed_privilege()?;
    crate::privilege::require_program("ip")
}

fn addr(base: [u8; 3], last: u8) -> Ipv4Addr {
    Ipv4Addr::new(base[0], base[1], base[2], last)
}

/// Finds the /24 of an existing testbed from the root-side device of a.
fn discover() -> Result<Option<[u8; 3]>> {
    for side in Side::BOTH {
        if let Some(ip) = netlink::root_ipv4(side.netns())? {
            let o = ip.octets();
            return Ok(Some([o[0], o[1], o[2]]));
        }
    }
    if netlink::netns_exists(Side::A.netns()) || netlink::netns_exists(Side::B.netns()) {
        // Namespaces without addressed links: half-made.
        return Ok(Some([0, 0, 0]));
    }
    Ok(None)
}

/// Both hosts exist with their addresses, and `create` got to its end (its
/// marker: a `testbed up` killed during the last steps left links that were
/// addressed but without GRO, threaded NAPI or TSO off; those settings
/// themselves are not checked, since a user may change them on purpose).
fn is_complete(base: [u8; 3]) -> bool {
    Path::new(BUILT_MARKER).exists()
        && Side::BOTH
            .iter()
            .all(|&s| netlink::netns_exists(s.netns()) && netlink::root_ipv4(s.netns()).ok().flatten() == Some(addr(base, s.offset() + 1)))
}

fn create(base: [u8; 3]) -> Result<()> {
    for side in Side::BOTH {
        let ns = side.netns();
        let root = format!("{}/30", addr(base, side.offset() + 1));
        let host = format!("{}/30", addr(base, side.offset() + 2));
        let gateway = addr(base, side.offset() + 1).to_string();
        netlink::ip(&["netns", "add", ns])?;
        netlink::ip(&["link", "add", ns, "type", "veth", "peer", "name", NS_DEVICE, "netns", ns])?;
        netlink::ip(&["addr", "add", &root, "dev", ns])?;
        netlink::ip(&["link", "set", ns, "up"])?;
        netlink::ip(&["-n", ns, "link", "set", "lo", "up"])?;
        netlink::ip(&["-n", ns, "addr", "add", &host, "dev", NS_DEVICE])?;
        netlink::ip(&["-n", ns, "link", "set", NS_DEVICE, "up"])?;
        netlink::ip(&["-n", ns, "route", "add", "default", "via", &gateway])?;
        // GRO on the root side gives veth a NAPI instance for the packets
        // it receives; threaded NAPI moves its polling into a kthread.
        netlink::set_gro(ns, true)?;
        netlink::set_threaded_napi(ns, true)?;
        // veth hands a packet to the receiver's NAPI only when the sending
        // device has no TSO (or the receiver forwards GRO'd UDP); otherwise
        // it goes through netif_rx on the sender's CPU and the NAPI thread
        // never runs (drivers/net/veth.c, veth_skb_is_eligible_for_gro).
        spawn_in_netns(ns, || netlink::set_tso(NS_DEVICE, false))?
            .join()
            .map_err(|_| Error::Failed(format!("switching TSO off in {ns} panicked")))??;
    }
    std::fs::write(BUILT_MARKER, b"").map_err(|e| Error::io(format!("writing {BUILT_MARKER}"), e))
}

fn remove_everything() -> Result<()> {
    let mut first_error = None;
    for link in netlink::links_named("irqlab-")? {
        if let Err(e) = netlink::ip(&["link", "del", &link]) {
            first_error.get_or_insert(e);
        }
    }
    for ns in netlink::netns_named("irqlab-") {
        if let Err(e) = netlink::ip(&["netns", "del", &ns]) {
            first_error.get_or_insert(e);
        }
    }
    let _ = std::fs::remove_file(PERSIST_MARKER);
    let _ = std::fs::remove_file(BUILT_MARKER);
    first_error.map_or(Ok(()), Err)
}

fn layout_of(base: [u8; 3]) -> Result<Layout> {
    let mut hosts = Vec::new();
    for side in Side::BOTH {
        let dev = side.netns();
        if !netlink::netns_exists(dev) {
            continue;
        }
        hosts.push(HostLayout {
            side,
            netns: dev.to_string(),
            root_device: dev.to_string(),
            root_addr: addr(base, side.offset() + 1),
            host_addr: addr(base, side.offset() + 2),
            gro: netlink::gro(dev).unwrap_or(false),
            threaded_napi: netlink::threaded_napi(dev),
            napi_threads: napi_threads(dev),
        });
    }
    Ok(Layout {
        subnet: format!("{}/24", addr(base, 0)),
        hosts,
        persistent: Path::new(PERSIST_MARKER).exists(),
        complete: is_complete(base),
    })
}

/// The `napi/<dev>-<id>` kernel threads of a device, by the rule of
/// `napi:DEV` (`journal::threads::is_napi_of`), lowest pid first. A
/// kthread is a process of its own: only processes are read.
pub fn napi_threads(dev: &str) -> Vec<NapiThread> {
    crate::procs::pids()
        .into_iter()
        .filter_map(|pid| Some(NapiThread { pid, comm: crate::procs::comm(pid)? }))
        .filter(|t| crate::journal::threads::is_napi_of(&t.comm, dev))
        .collect()
}
