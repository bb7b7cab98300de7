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
#define SKUA_MAP_DST4   skua_dst4   /* HASH: key = IPv4 destination (network order u32), value = u8 1 */
#define SKUA_MAP_DST6   skua_dst6   /* HASH: key = IPv6 destination (16 bytes), value = u8 1 */
/*
 * skua_dst4/skua_dst6 hold only unicast addresses of the interface (skuad refuses broadcast,
 * multicast and anycast ones when it fills them: skua_xdp::ifaddr::answerable); the program
 * trusts them and answers nothing else.
 */
#define SKUA_MAP_STATS  skua_stats  /* PERCPU_ARRAY: key = enum skua_xdp_stat, value = u64 */
#define SKUA_MAP_ANSWERS skua_answers /* HASH: key = struct skua_answer_key, value = struct skua_answer */
#define SKUA_MAP_ACL     skua_acl     /* LPM_TRIE: key = struct skua_acl_key, value = u8 1 (answer here) */
#define SKUA_MAP_SCRATCH skua_scratch /* PERCPU_ARRAY, 1 entry: struct skua_scratch (program-private) */

#define SKUA_XDP_MAX_QUEUES 256
#define SKUA_XDP_MAX_DESTS  1024
#define SKUA_XDP_MAX_ACL    4096
/* Default size of skua_answers; the loader sets the real one (xdp-answer-cache). */
#define SKUA_XDP_MAX_ANSWERS 65536

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

struct skua_xdp_config {
	__u16 port;   /*!< served UDP destination port, host byte order (53) */
	__u16 flags;  /*!< SKUA_F_* */
	__u32 pad;    /*!< zero */
};

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
