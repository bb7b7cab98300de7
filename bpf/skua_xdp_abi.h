/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ABI between the XDP program (bpf/skua_xdp.bpf.c) and skuad (kernel-appliance/xdp/src/abi.rs,
 * which mirrors every item here with #[repr(C)] and size/offset asserts). Change both together.
 */
#ifndef SKUA_XDP_ABI_H
#define SKUA_XDP_ABI_H

#include <linux/types.h>

/* Map names, as found in the object's BTF .maps section. */
#define SKUA_MAP_XSKS   skua_xsks   /* XSKMAP: key = rx queue index (u32), value = AF_XDP socket fd */
#define SKUA_MAP_CFG    skua_cfg    /* ARRAY, 1 entry: struct skua_xdp_config */
#define SKUA_MAP_DST4   skua_dst4   /* HASH: key = IPv4 destination (network order u32), value = struct skua_dest */
#define SKUA_MAP_DST6   skua_dst6   /* HASH: key = IPv6 destination (16 bytes), value = struct skua_dest */
/*
 * skua_dst4/skua_dst6 hold only unicast addresses of the interface (skuad refuses broadcast,
 * multicast and anycast ones when it fills them: skua_xdp::ifaddr::answerable); the program
 * trusts them and answers nothing else.
 */
#define SKUA_MAP_STATS  skua_stats  /* PERCPU_ARRAY: key = enum skua_xdp_stat, value = u64 */
#define SKUA_MAP_ANSWERS skua_answers /* HASH: key = struct skua_answer_key, value = struct skua_answer */
#define SKUA_MAP_ACL     skua_acl     /* LPM_TRIE: key = struct skua_acl_key, value = u8 SKUA_ACL_* bits */
#define SKUA_MAP_SCRATCH skua_scratch /* PERCPU_ARRAY, 1 entry: struct skua_scratch (program-private) */
#define SKUA_MAP_CACHE_INDEX skua_cache_index /* HASH: key = struct skua_answer_key, value = struct skua_cache_ref */
#define SKUA_MAP_CACHE_SLOTS skua_cache_slots /* ARRAY: key = slot (u32), value = struct skua_cached */

#define SKUA_XDP_MAX_QUEUES 256
#define SKUA_XDP_MAX_DESTS  1024
#define SKUA_XDP_MAX_ACL    4096
/* Default size of skua_answers; the loader sets the real one (--xdp-answers). */
#define SKUA_XDP_MAX_ANSWERS 65536
/* Default size of skua_cache_index and skua_cache_slots; the loader sets the real ones
 * (--xdp-cache-answers; slots = entries + entries / 4, see struct skua_cached). */
#define SKUA_XDP_MAX_CACHED 16384
#define SKUA_XDP_CACHE_SLOTS (SKUA_XDP_MAX_CACHED + SKUA_XDP_MAX_CACHED / 4)

/*
 * Precompiled answers (SKUA_F_ANSWER): the reply to a query for (name, qtype, class IN) is
 *   header:   ID and the RD and CD bits from the query, the rest from skua_answer.flags;
 *             QDCOUNT 1, AN/NS/ARCOUNT from skua_answer (+1 AR when the query has EDNS);
 *   question: the query's, as sent (case kept);
 *   records:  skua_answer.tail, copied as is (compression pointers into the question);
 *   OPT:      when the query has one: root, type 41, class = skua_answer.edns_size,
 *             TTL 0 with DO echoed, RDLEN 0.
 * skuad inserts only answers it has checked to be rendered exactly so by the engine, and
 * whose whole reply (with OPT) fits 512 bytes, so no client size limit ever truncates them.
 */
#define SKUA_ANSWER_NAME_MAX 64   /* wire length of the name, root label included */
#define SKUA_ANSWER_TAIL_MAX 496  /* 512 - header - shortest question - OPT, rounded to 8 */
#define SKUA_ANSWER_MSG_MAX  512  /* longest query and reply handled in the program */

/* skua_xdp_config.flags */
#define SKUA_F_ENABLED  0x0001 /*!< redirect at all (off = XDP_PASS everything) */
/*
 * 0x0002 and 0x0004 were SKUA_F_ANY_V4 / SKUA_F_ANY_V6 ("any destination is ours", for
 * wildcard listeners). They made the program answer broadcast, multicast and other hosts'
 * addresses; skuad now fills skua_dst4/skua_dst6 with the interface's unicast addresses
 * instead. The bits are left unused.
 */
#define SKUA_F_ANSWER   0x0008 /*!< answer from skua_answers with XDP_TX (clients allowed by skua_acl) */
#define SKUA_F_TX_REDIRECT 0x0010 /*!< send those answers with bpf_redirect(ingress ifindex), not XDP_TX */
#define SKUA_F_CACHE    0x0020 /*!< answer from the resolver's cached answers too (skua_cache_index) */

/*
 * skua_dst4/skua_dst6 values. A service address of the ha: clause is answered only under the
 * host agent's lease: lease_until_ns is its expiry on the kernel's monotonic clock
 * (bpf_ktime_get_ns()), renewed by skuad at every renewal; after it the program passes the
 * query to the kernel. Every other address has 0 (always ours).
 */
struct skua_dest {
	__u64 lease_until_ns;
};

struct skua_xdp_config {
	__u16 port;   /*!< served UDP destination port, host byte order (53) */
	__u16 flags;  /*!< SKUA_F_* */
	__u32 pad;    /*!< zero */
	/*!
	 * CLOCK_MONOTONIC in ns (bpf_ktime_get_ns()'s clock) at skuad's second 0: the program's
	 * "now" in skuad's seconds is (bpf_ktime_get_ns() - clock_origin_ns) / 1e9, exactly the
	 * clock the resolver's cache counts expiries in. The difference is taken modulo 2^64:
	 * skuad's origin is never after the kernel's clock, but a test may set an origin
	 * "before boot" (wrapped) to put the program at any second on a machine just started;
	 * a second that does not fit 32 bits answers nothing from the cache.
	 */
	__u64 clock_origin_ns;
};

/*
 * skua_acl values: a bit set. A client gets a local answer when bit 0 is set, a cached answer
 * to a query with RD when bit 1 is set, without RD when bit 2 is set (the engine's rule:
 * cached answers need RD unless the client may snoop).
 */
#define SKUA_ACL_LOCAL     0x01
#define SKUA_ACL_CACHED_RD 0x02
#define SKUA_ACL_CACHED    0x04

enum skua_xdp_stat {
	SKUA_STAT_SEEN = 0,          /*!< frames the program looked at */
	SKUA_STAT_REDIRECTED,        /*!< UDP to our port and address: sent to the XSK (or PASS if no socket on that queue) */
	SKUA_STAT_PASS_NOT_IP,       /*!< ARP, LLDP, ... */
	SKUA_STAT_PASS_NOT_UDP,      /*!< TCP (incl. DNS over TCP), ICMP, ... */
	SKUA_STAT_PASS_OTHER_PORT,   /*!< UDP to another port */
	SKUA_STAT_PASS_OTHER_DEST,   /*!< UDP to our port but not to one of our unicast addresses: another address, or an Ethernet group (broadcast/multicast) destination */
	SKUA_STAT_PASS_FRAGMENT,     /*!< IPv4 fragments: reassembly is the kernel's job */
	SKUA_STAT_PASS_IP_OPTIONS,   /*!< IPv4 with options (IHL > 5) */
	SKUA_STAT_PASS_IPV6_EXT,     /*!< IPv6 with extension headers */
	SKUA_STAT_PASS_DISABLED,     /*!< SKUA_F_ENABLED clear */
	SKUA_STAT_DROP_MALFORMED,    /*!< to our port but truncated / inconsistent lengths / IHL < 5 */
	SKUA_STAT_ANSWERED,          /*!< answered in the program from skua_answers (XDP_TX or redirect) */
	SKUA_STAT_PASS_BAD_SOURCE,   /*!< UDP to our port and address from a source that cannot be answered: group source MAC, unspecified/broadcast/multicast source IP */
	SKUA_STAT_ANSWERED_CACHED,   /*!< answered in the program from the resolver's cached answers (skua_cache_slots) */
	SKUA_STAT_PASS_NO_LEASE,     /*!< to a service address whose lease (skua_dest.lease_until_ns) is over: the kernel sockets, which check the lease too, drop it */
	SKUA_STAT_MAX
};

/* skua_answers key: the query name lower-cased, in wire form, zero padded. */
struct skua_answer_key {
	__u16 qtype;                          /*!< host byte order */
	__u8 name_len;                        /*!< wire length, root label included */
	__u8 pad;                             /*!< zero */
	__u8 name[SKUA_ANSWER_NAME_MAX];      /*!< lower-cased wire name, zero padded */
};

/* skua_answers value. */
struct skua_answer {
	__u16 flags;                          /*!< reply flags before RD/CD are copied (QR, AA, RA, RCODE) */
	__u16 ancount;                        /*!< host byte order */
	__u16 nscount;
	__u16 arcount;                        /*!< without the OPT record */
	__u16 tail_len;                       /*!< bytes of tail used */
	__u16 edns_size;                      /*!< UDP payload size in our OPT record */
	__u16 tail_csum;                      /*!< RFC 1071 sum of tail, memory order, from an even offset */
	__u16 pad;                            /*!< zero */
	__u8 tail[SKUA_ANSWER_TAIL_MAX];      /*!< answer, authority, additional sections */
};

/*
 * Cached answers (SKUA_F_CACHE): answers of the resolver's cache, pushed by skuad for names
 * asked often. The recipe is skua_answer's, plus TTLs counting down: each record's TTL is
 * ttl_exp[i] - now, written at tail offset ttl_off[i] (the tail holds zeros there), with now
 * in skuad's seconds (skua_xdp_config.clock_origin_ns). From valid_until on (the answer's
 * expiry, or its prefetch point) the program leaves the query to the engine.
 *
 * Publication without reuse hazards: skua_cache_index maps a key to a slot of the
 * preallocated array skua_cache_slots. skuad writes a recipe into a free slot, then points
 * the index at it; a slot whose reference was removed or replaced is rewritten only seconds
 * later (an XDP run lasts microseconds). A reader that still holds a reused index element
 * finds another key's slot: the key echoed in the slot must equal the query's, or it is a
 * miss.
 */
#define SKUA_CACHED_TTLS 16 /* records with a TTL per cached answer, at most */

struct skua_cache_ref {
	__u32 slot;                           /*!< index into skua_cache_slots */
};

struct skua_cached {
	struct skua_answer_key key;           /*!< the key this slot answers (checked) */
	__u32 valid_until;                    /*!< skuad's second from which it is not used */
	__u16 flags;                          /*!< as skua_answer */
	__u16 ancount;
	__u16 nscount;
	__u16 arcount;
	__u16 tail_len;
	__u16 edns_size;
	__u8 nttl;                            /*!< entries of ttl_off/ttl_exp used */
	__u8 pad[3];                          /*!< zero */
	__u16 ttl_off[SKUA_CACHED_TTLS];      /*!< TTL field offsets in tail; unused: SKUA_CACHED_NO_TTL */
	__u32 ttl_exp[SKUA_CACHED_TTLS];      /*!< expiries (skuad's seconds), each >= valid_until */
	__u8 tail[SKUA_ANSWER_TAIL_MAX];      /*!< records, TTL fields zero */
};

/* ttl_off of an unused entry: lands in the work buffer past any reply, so the program can
 * patch all SKUA_CACHED_TTLS entries without a branch per record. */
#define SKUA_CACHED_NO_TTL 800

/* skua_acl key: client prefixes in IPv6 form, IPv4 as ::ffff:a.b.c.d (RFC 4291 §2.5.5.2). */
struct skua_acl_key {
	__u32 prefixlen;                      /*!< 0..128 */
	__u8 addr[16];
};

/* Per-CPU work area of the answer path (too big for the 512-byte BPF stack). */
struct skua_scratch {
	struct skua_answer_key key;           /*!< the lookup key being built */
	struct skua_acl_key acl;              /*!< the client, as an LPM key */
	__u8 pseudo[40];                      /*!< UDP pseudo-header (RFC 768 / RFC 8200 §8.1) */
	__u8 opt[12];                         /*!< the reply's OPT record, zero padded */
	__u32 spill;                          /*!< see answer() in skua_xdp.bpf.c */
	__u8 buf[1024];                       /*!< the frame up to the end of the UDP datagram, then the reply's start */
};

#endif
