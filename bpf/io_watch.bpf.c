// SPDX-License-Identifier: GPL-2.0
//
// The block requests of two classes of processes on one disk, issued and
// completed, for the live idletime controller (`irqlab control idletime
// --resource disk`); or (`--resource net`) their packets through one
// network device's egress, queued and handed to the driver (the programs
// at the end; user space loads one half). User space names the processes of each class by tgid
// (`classes`); a bio is classed in the context that queues it
// (block_bio_queue runs in the submitter), because the request it ends up
// in may be issued later from a kworker (an I/O scheduler's dispatch) and
// completes in interrupt context. The request is found again by its first
// bio at issue, and by its address at completion. Tracepoints only (this
// kernel has no kprobes).

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "io_watch.h"

char LICENSE[] SEC("license") = "GPL";

// The disk watched, by its major and first minor (a partition's bios
// count for its disk). Set before loading.
const volatile __u32 disk_major;
const volatile __u32 disk_minor;

// Events the ring could not take (user space fell behind).
volatile __u64 lost_events;


struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, IO_WATCH_PROCESSES);
	__type(key, __u32);
	__type(value, __u8);
} classes SEC(".maps");

struct bio_class {
	__u64 sector; // set at issue
	__u32 tgid;
	__u32 bytes; // a packet's length (a request's is read at completion)
	__u8 class;
};

// Bios queued by a classed process, until their request is issued. LRU: a
// bio merged into another's request is never looked up, and ages out.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct bio_class);
} bios SEC(".maps");

// Issued requests of classed processes, until they complete. Not an LRU
// map: an LRU map may evict an entry before it is full (its free lists are
// per CPU), and a request it forgot would never complete in user space's
// eyes (seen: about 1 in 800 foreground requests).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct bio_class);
} requests SEC(".maps");

#define EVENTS_RING_BYTES (1 << 20)

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, EVENTS_RING_BYTES);
} events SEC(".maps");

// The ring's record type, named in BTF so that the skeleton generates it
// for user space (types::io_watch_event).
struct io_watch_event io_watch_event_btf;

// User space is woken only by a foreground request issued at least
// `wake_gap_ns` (the preemption interval) after the foreground's previous
// one: then the interval may have run out and the gate be open, so it must
// close now. Every other event waits in the ring for the reader's own
// timer (it wakes at the interval's end, and every interval while the
// gate is closed). On a small machine a wake-up per request took the
// foreground's own CPU time (20-40% of its throughput here).
// But a reader asleep through a long open gate (70 ms of every 100 in the
// live test) lets a flooding background fill the ring: an issue and a
// completion per packet, ~500k records a second on a veth, fill 1 MiB in
// ~50 ms (CI lost 117k and 159k records so, 2026-11-29). So the reader is
// also woken whenever the ring holds half its size.
const volatile __u64 wake_gap_ns;
volatile __u64 last_fg_issue_ns;

static __always_inline __u64 wakeup(struct bio_class *c, __u8 kind, __u64 now)
{
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= EVENTS_RING_BYTES / 2)
		return BPF_RB_FORCE_WAKEUP;
	if (c->class != IO_FOREGROUND || kind != IO_ISSUE)
		return BPF_RB_NO_WAKEUP;
	__u64 last = last_fg_issue_ns;
	last_fg_issue_ns = now;
	return now - last >= wake_gap_ns ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

static __always_inline void emit(struct bio_class *c, __u32 bytes, __u8 kind)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 flags = wakeup(c, kind, now);
	struct io_watch_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		__sync_fetch_and_add(&lost_events, 1);
		return;
	}
	e->ts_ns = now;
	e->sector = c->sector;
	e->bytes = bytes;
	e->tgid = c->tgid;
	e->class = c->class;
	e->kind = kind;
	bpf_ringbuf_submit(e, flags);
}

SEC("tp_btf/block_bio_queue")
int BPF_PROG(on_bio_queue, struct bio *bio)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u8 *class = bpf_map_lookup_elem(&classes, &tgid);

	if (!class)
		return 0;
	struct gendisk *disk = BPF_CORE_READ(bio, bi_bdev, bd_disk);
	if (!disk || BPF_CORE_READ(disk, major) != disk_major || BPF_CORE_READ(disk, first_minor) != disk_minor)
		return 0;
	struct bio_class c = { .sector = 0, .tgid = tgid, .bytes = 0, .class = *class };
	__u64 key = (__u64)bio;
	bpf_map_update_elem(&bios, &key, &c, BPF_ANY);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(on_rq_issue, struct request *rq)
{
	__u64 bio = (__u64)BPF_CORE_READ(rq, bio);
	struct bio_class *c = bpf_map_lookup_elem(&bios, &bio);

	if (!c)
		return 0;
	struct bio_class copy = *c;
	copy.sector = BPF_CORE_READ(rq, __sector);
	bpf_map_delete_elem(&bios, &bio);
	__u64 key = (__u64)rq;
	// Still here from an earlier request in this struct request: that
	// one's completion ran no program (seen on this VM's 6.18 kernel for
	// about 1 in 2,000 requests, more while other BPF programs trace
	// interrupts). It is reported completed now.
	struct bio_class *stale = bpf_map_lookup_elem(&requests, &key);
	if (stale) {
		struct bio_class old = *stale;
		emit(&old, 0, IO_COMPLETE_INFERRED);
	}
	bpf_map_update_elem(&requests, &key, &copy, BPF_ANY);
	emit(&copy, BPF_CORE_READ(rq, __data_len), IO_ISSUE);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(on_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	__u64 key = (__u64)rq;
	struct bio_class *c = bpf_map_lookup_elem(&requests, &key);

	if (!c)
		return 0;
	// A partial completion leaves the rest of the request in flight.
	__u32 left = BPF_CORE_READ(rq, __data_len);
	if (nr_bytes < left)
		return 0;
	struct bio_class copy = *c;
	bpf_map_delete_elem(&requests, &key);
	emit(&copy, left, IO_COMPLETE);
	return 0;
}

// ---- The network half: packets through one device's egress. ----
//
// A packet is "issued" when it is queued for the device (net_dev_queue,
// before the qdisc: a token bucket there is the link's bottleneck, its
// queue the device's) and "complete" when the device's driver takes it
// (net_dev_start_xmit), or when it is dropped on the way (kfree_skb).

// The device watched; 0 for the disk half.
const volatile __u32 net_ifindex;

// Sockets by class, learned when a classed process sends on one (in its
// own context: sock_send_length runs at the end of each sendmsg), so that
// packets the kernel sends for it later from another context (TCP's ACK
// clock, a softirq, where the current task is anyone's) keep their class.
// LRU: a closed socket ages out.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u8);
} sockets SEC(".maps");

// Queued packets of classed sockets, until the driver takes them. Not an
// LRU map, as `requests`.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct bio_class);
} packets SEC(".maps");

SEC("tp_btf/net_dev_queue")
int BPF_PROG(on_net_queue, struct sk_buff *skb)
{
	if (BPF_CORE_READ(skb, dev, ifindex) != net_ifindex)
		return 0;
	__u64 sk = (__u64)BPF_CORE_READ(skb, sk);
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u8 *class = sk ? bpf_map_lookup_elem(&sockets, &sk) : 0;

	// A socket not sent on yet (the first datagram, a TCP SYN): the
	// queueing process's class, as that is its own context.
	if (!class) {
		class = bpf_map_lookup_elem(&classes, &tgid);
		// Learned now, so that the band's classifier (below), which
		// runs next in the qdisc, knows this first packet's socket.
		if (class && sk) {
			__u8 learned = *class;
			bpf_map_update_elem(&sockets, &sk, &learned, BPF_ANY);
		}
	}
	if (!class)
		return 0;
	__u64 key = (__u64)skb;
	struct bio_class c = { .sector = key, .tgid = tgid, .bytes = BPF_CORE_READ(skb, len), .class = *class };
	// Still here: that packet left by a way no program saw.
	struct bio_class *stale = bpf_map_lookup_elem(&packets, &key);
	if (stale) {
		struct bio_class old = *stale;
		emit(&old, old.bytes, IO_COMPLETE_INFERRED);
	}
	bpf_map_update_elem(&packets, &key, &c, BPF_ANY);
	emit(&c, c.bytes, IO_ISSUE);
	return 0;
}

// Reports a queued packet gone (if it is ours); whether it was.
static __always_inline bool packet_left(__u64 key, __u8 kind)
{
	struct bio_class *c = bpf_map_lookup_elem(&packets, &key);

	if (!c)
		return false;
	struct bio_class copy = *c;
	bpf_map_delete_elem(&packets, &key);
	emit(&copy, copy.bytes, kind);
	return true;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(on_sock_send, struct sock *sk, int ret, int flags)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u8 *class = bpf_map_lookup_elem(&classes, &tgid);

	if (!class || !sk)
		return 0;
	__u64 key = (__u64)sk;
	__u8 *known = bpf_map_lookup_elem(&sockets, &key);
	if (!known || *known != *class) {
		__u8 learned = *class;
		bpf_map_update_elem(&sockets, &key, &learned, BPF_ANY);
	}
	return 0;
}

// GSO packets a qdisc cut into segments (tbf does, for a packet longer
// than its burst), by socket: one request of the socket, issued when the
// packet is cut and complete when its driver has taken the last segment
// (`bytes` counts the segments still queued). The segments are new
// sk_buffs no program saw queued; TCP's keep their socket.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct bio_class);
} segmented SEC(".maps");

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(on_net_xmit, const struct sk_buff *skb, const struct net_device *dev)
{
	if (packet_left((__u64)skb, IO_COMPLETE))
		return 0;
	__u64 sk = (__u64)BPF_CORE_READ(skb, sk);
	struct bio_class *s = sk ? bpf_map_lookup_elem(&segmented, &sk) : 0;
	if (!s)
		return 0;
	// The driver's queue takes one segment at a time: no atomics needed.
	if (s->bytes > 1) {
		s->bytes -= 1;
		return 0;
	}
	struct bio_class done = *s;
	bpf_map_delete_elem(&segmented, &sk);
	emit(&done, 0, IO_COMPLETE);
	return 0;
}

// A queued packet freed without a drop and before its driver took it: a
// qdisc cut it into segments (see `segmented`), or it left some other way.
SEC("tp_btf/consume_skb")
int BPF_PROG(on_skb_consume, struct sk_buff *skb)
{
	__u64 key = (__u64)skb;
	struct bio_class *c = bpf_map_lookup_elem(&packets, &key);

	if (!c)
		return 0;
	struct bio_class orig = *c;
	bpf_map_delete_elem(&packets, &key);
	__u64 sk = (__u64)BPF_CORE_READ(skb, sk);
	struct skb_shared_info *shinfo = (struct skb_shared_info *)(BPF_CORE_READ(skb, head) + BPF_CORE_READ(skb, end));
	__u32 segs = BPF_CORE_READ(shinfo, gso_segs);
	if (sk && segs > 1) {
		struct bio_class *s = bpf_map_lookup_elem(&segmented, &sk);
		if (s) {
			__sync_fetch_and_add(&s->bytes, segs);
		} else {
			// Issued before the original completes, so the class never
			// looks idle in between.
			struct bio_class n = orig;
			n.sector = sk | 1;
			n.bytes = segs;
			bpf_map_update_elem(&segmented, &sk, &n, BPF_NOEXIST);
			emit(&n, 0, IO_ISSUE);
		}
	}
	emit(&orig, orig.bytes, IO_COMPLETE);
	return 0;
}

SEC("tp_btf/kfree_skb")
int BPF_PROG(on_skb_drop, struct sk_buff *skb)
{
	packet_left((__u64)skb, IO_DROPPED);
	return 0;
}

// ---- The background band: the class of each background packet. ----
//
// `irqlab control idletime --resource net` puts a two-class strict
// priority (an HTB qdisc) below the device's token bucket: the idletime
// dissertation's network scheduler takes the foreground's packets first at
// the dequeue point (§5.4), so the background's packets already queued do
// not delay a foreground burst. This program runs at every socket's IP
// egress (attached to the cgroup v2 root; the link goes with the watch)
// and gives the packets of sockets the watch knows as background, bound
// for the watched device, the low class as their priority: HTB takes a
// packet whose skb->priority names one of its leaf classes straight to
// it. (A cls_bpf filter in direct-action mode, the only mode libbpf
// attaches, can return a class's minor only, which HTB does not take.)

// The background class (major:minor), set before loading.
const volatile __u32 band_classid;
// Packets given the background class.
volatile __u64 band_background_packets;

SEC("cgroup_skb/egress")
int band_classify(struct __sk_buff *skb)
{
	if (skb->ifindex != net_ifindex)
		return 1;
	struct bpf_sock *sk = skb->sk;

	if (!sk)
		return 1;
	// The socket's address, as the tracepoints above key it (the pointer
	// is the kernel's struct sock; reading it as a number needs
	// CAP_PERFMON, which the watch has).
	__u64 key = (__u64)sk;
	__u8 *class = bpf_map_lookup_elem(&sockets, &key);

	if (class && *class == IO_BACKGROUND) {
		skb->priority = band_classid;
		__sync_fetch_and_add(&band_background_packets, 1);
	}
	return 1;
}
