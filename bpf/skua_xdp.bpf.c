/* SPDX-License-Identifier: Apache-2.0 */
/*
 * skua_xdp: the XDP filter in front of skuad's AF_XDP sockets.
 *
 * It redirects exactly one kind of frame to user space: a well-formed UDP datagram to the
 * configured port (53) and to one of our addresses, carried in Ethernet (optionally with one
 * VLAN tag) over IPv4 without options and unfragmented, or over IPv6 with no extension header.
 * Everything else goes to the kernel stack (XDP_PASS), so ARP, ICMP, NDP, SSH, DNS over TCP,
 * fragments and anything unusual keep working exactly as without this program. Only frames
 * that are broken in a way the kernel would drop anyway are dropped here (XDP_DROP), so that
 * skuad never has to look at them.
 *
 * Each frame bumps SKUA_STAT_SEEN and exactly one outcome counter, so
 * SEEN == sum(all other counters) (per CPU, modulo a racing read).
 *
 * The ABI (map names, config layout, counter indexes) is bpf/skua_xdp_abi.h; the loader is
 * kernel-appliance/xdp/src/bpf.rs. Build: bpf/build.sh; the object is committed.
 *
 * Needs only clang and the linux-libc-dev UAPI headers: the few libbpf conveniences used here
 * (SEC, __uint, __type, helper prototypes) are written out below, so no libbpf-dev is needed.
 */

#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>

#include "skua_xdp_abi.h"

/* --- minimal libbpf-style declarations (bpf_helpers.h / bpf_endian.h) --------------------- */

#define SEC(name) __attribute__((section(name), used))
/* linux/stddef.h defines it as a plain __inline__; the program must be one function. */
#undef __always_inline
#define __always_inline inline __attribute__((always_inline))
/* BTF-defined map attributes: the value is encoded in the type, which clang records in .BTF. */
#define __uint(name, val) int (*name)[val]
#define __type(name, val) __typeof__(val) *name

/* Helpers are called by their UAPI number (enum bpf_func_id in linux/bpf.h). */
static void *(*const bpf_map_lookup_elem)(void *map, const void *key) =
	(void *)BPF_FUNC_map_lookup_elem;
static long (*const bpf_redirect_map)(void *map, __u64 key, __u64 flags) =
	(void *)BPF_FUNC_redirect_map;
static __u64 (*const bpf_xdp_get_buff_len)(struct xdp_md *xdp_md) =
	(void *)BPF_FUNC_xdp_get_buff_len;

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define skua_ntohs(x) __builtin_bswap16(x)
#define skua_htons(x) __builtin_bswap16(x)
#else
#define skua_ntohs(x) (x)
#define skua_htons(x) (x)
#endif

/* --- constants not worth a header --------------------------------------------------------- */

#define ETH_P_8021Q_BE  skua_htons(0x8100) /* IEEE 802.1Q C-tag */
#define ETH_P_8021AD_BE skua_htons(0x88a8) /* IEEE 802.1ad S-tag (QinQ outer tag) */
#define ETH_P_IP_BE     skua_htons(0x0800)
#define ETH_P_IPV6_BE   skua_htons(0x86dd)

/* RFC 791 §3.1: flags (3 bits: reserved, DF, MF) and the 13-bit fragment offset share frag_off. */
#define IP4_MF     0x2000
#define IP4_OFFSET 0x1fff

#define IP4_MIN_HDR 20 /* RFC 791 §3.1: IHL counts 32-bit words, minimum 5 */
#define UDP_HDR     8  /* RFC 768 */

/* RFC 8200 §4 / IANA "IPv6 Extension Header Types": next-header values that are extension
 * headers (as opposed to an upper-layer protocol). */
static __always_inline int ipv6_is_ext_hdr(__u8 nexthdr)
{
	switch (nexthdr) {
	case 0:   /* Hop-by-Hop Options */
	case 43:  /* Routing */
	case 44:  /* Fragment */
	case 50:  /* ESP */
	case 51:  /* AH */
	case 60:  /* Destination Options */
	case 135: /* Mobility */
	case 139: /* HIP */
	case 140: /* Shim6 */
	case 253: /* experimental (RFC 3692) */
	case 254: /* experimental (RFC 3692) */
		return 1;
	default:
		return 0;
	}
}

/* 802.1Q / 802.1ad tag following the MAC addresses: TCI then the encapsulated EtherType. */
struct vlan_tag {
	__be16 tci;
	__be16 encap_proto;
};

/* --- maps (names and value layouts fixed by skua_xdp_abi.h) ------------------------------- */

/* rx queue index -> AF_XDP socket; skuad inserts one socket per queue it serves. */
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, SKUA_XDP_MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} SKUA_MAP_XSKS SEC(".maps");

/* The single config record; all-zero (as created) means disabled. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct skua_xdp_config);
} SKUA_MAP_CFG SEC(".maps");

/* Our IPv4 addresses, network byte order. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SKUA_XDP_MAX_DESTS);
	__type(key, __u32);
	__type(value, __u8);
} SKUA_MAP_DST4 SEC(".maps");

/* Our IPv6 addresses. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SKUA_XDP_MAX_DESTS);
	__type(key, struct in6_addr);
	__type(value, __u8);
} SKUA_MAP_DST6 SEC(".maps");

/* Per-CPU so the hot path needs no atomic; user space sums over CPUs. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SKUA_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} SKUA_MAP_STATS SEC(".maps");

/* --- helpers ------------------------------------------------------------------------------ */

/*!
 * \brief Add one to a per-CPU counter.
 * \param stat  counter index, < SKUA_STAT_MAX.
 * \note Plain increment: XDP runs with migration disabled, so the per-CPU slot is ours.
 */
static __always_inline void count(__u32 stat)
{
	__u64 *v = bpf_map_lookup_elem(&SKUA_MAP_STATS, &stat);

	if (v)
		*v += 1;
}

/*! \brief Count \p stat and hand the frame to the kernel stack. */
static __always_inline int pass(__u32 stat)
{
	count(stat);
	return XDP_PASS;
}

/*! \brief Count a malformed frame and drop it. */
static __always_inline int drop_malformed(void)
{
	count(SKUA_STAT_DROP_MALFORMED);
	return XDP_DROP;
}

/*!
 * \brief Bytes in the frame from offset \p l3_off to its end.
 *
 * Length checks compare scalars, never a packet pointer plus a variable: the verifier refuses
 * variable pointer arithmetic unless the loader has CAP_PERFMON (its Spectre v1 sanitation
 * covers only stack and map-value pointers), and pointer subtraction needs it too. The program
 * is loaded without BPF_F_XDP_HAS_FRAGS, so the frame is linear and the helper returns
 * data_end - data (kernel >= 5.18).
 * \note The caller has proven the frame is longer than \p l3_off.
 */
static __always_inline __u32 bytes_from(struct xdp_md *ctx, __u32 l3_off)
{
	return (__u32)bpf_xdp_get_buff_len(ctx) - l3_off;
}

/*!
 * \brief Final UDP check shared by both IP versions, then redirect.
 * \param udp       UDP header; the caller has proven its 8 bytes are inside the frame.
 * \param ip_avail  bytes the IP layer says it carries after its header (IPv4 total length
 *                  minus 20, IPv6 payload length); the caller has checked it against the
 *                  frame length, so checking the UDP length against it covers the frame too.
 * \return XDP_DROP or the result of bpf_redirect_map().
 */
static __always_inline int udp_to_xsk(struct xdp_md *ctx, const struct udphdr *udp,
				      __u32 ip_avail)
{
	__u32 ulen = skua_ntohs(udp->len);

	/*
	 * RFC 768: Length counts header and data, so it is at least 8, and it must fit in what
	 * the IP header says it carries. A UDP length shorter than the IP payload is legal (the
	 * kernel trims the rest in udp_rcv()); skuad must use the UDP length. Zero (RFC 2675
	 * jumbograms) needs a hop-by-hop header, which never reaches here.
	 */
	if (ulen < UDP_HDR || ulen > ip_avail)
		return drop_malformed();

	count(SKUA_STAT_REDIRECTED);
	/*
	 * The fallback action (XDP_PASS in the low bits of flags, kernel >= 5.3) applies when no
	 * socket sits at this queue index: the query then goes up the kernel stack instead of
	 * vanishing, and a kernel-socket listener can still answer it.
	 */
	return bpf_redirect_map(&SKUA_MAP_XSKS, ctx->rx_queue_index, XDP_PASS);
}

/* --- the program -------------------------------------------------------------------------- */

SEC("xdp")
int skua_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	const struct skua_xdp_config *cfg;
	struct ethhdr *eth = data;
	__u32 l3_off;
	__be16 proto;
	void *l3;
	__u32 key = 0;

	count(SKUA_STAT_SEEN);

	cfg = bpf_map_lookup_elem(&SKUA_MAP_CFG, &key);
	if (!cfg || !(cfg->flags & SKUA_F_ENABLED))
		return pass(SKUA_STAT_PASS_DISABLED);

	/* A runt too short for its L2 header cannot be ours; the kernel discards it. */
	if ((void *)(eth + 1) > data_end)
		return pass(SKUA_STAT_PASS_NOT_IP);
	proto = eth->h_proto;
	l3 = eth + 1;
	l3_off = sizeof(*eth);

	/*
	 * One VLAN tag, as seen when the NIC does not strip it (rxvlan off, or the tag is an
	 * S-tag). skuad answers through the same frame, so it keeps the tag. A second tag
	 * (QinQ) is left to the kernel: rare, and not worth a second parse path.
	 */
	if (proto == ETH_P_8021Q_BE || proto == ETH_P_8021AD_BE) {
		struct vlan_tag *vlan = l3;

		if ((void *)(vlan + 1) > data_end)
			return pass(SKUA_STAT_PASS_NOT_IP);
		proto = vlan->encap_proto;
		l3 = vlan + 1;
		l3_off += sizeof(*vlan);
		if (proto == ETH_P_8021Q_BE || proto == ETH_P_8021AD_BE)
			return pass(SKUA_STAT_PASS_NOT_IP);
	}

	if (proto == ETH_P_IP_BE) {
		struct iphdr *ip = l3;
		struct udphdr *udp;
		__u32 tot_len;

		/*
		 * RFC 791 §3.1. A header cut short, a version other than 4 or an IHL below 5
		 * (the header cannot be shorter than 20 bytes) is garbage that ip_rcv_core()
		 * drops too; dropping it here spares the stack.
		 */
		if ((void *)(ip + 1) > data_end)
			return drop_malformed();
		if (ip->version != 4 || ip->ihl < 5)
			return drop_malformed();
		/* Options are legal but rare in DNS traffic; the kernel handles them. */
		if (ip->ihl > 5)
			return pass(SKUA_STAT_PASS_IP_OPTIONS);
		/*
		 * RFC 791 §3.2: any fragment (MF set or offset non-zero) needs reassembly,
		 * which is the kernel's job; skuad sees only whole datagrams. DF is fine.
		 */
		if (ip->frag_off & skua_htons(IP4_MF | IP4_OFFSET))
			return pass(SKUA_STAT_PASS_FRAGMENT);
		if (ip->protocol != IPPROTO_UDP)
			return pass(SKUA_STAT_PASS_NOT_UDP);

		udp = (void *)(ip + 1);
		/* It claims UDP but the header is missing: udp_rcv() would drop it. */
		if ((void *)(udp + 1) > data_end)
			return drop_malformed();
		if (udp->dest != skua_htons(cfg->port))
			return pass(SKUA_STAT_PASS_OTHER_PORT);
		if (!(cfg->flags & SKUA_F_ANY_V4) && !bpf_map_lookup_elem(&SKUA_MAP_DST4, &ip->daddr))
			return pass(SKUA_STAT_PASS_OTHER_DEST);

		/*
		 * RFC 791 §3.1: Total Length covers header and data. It must hold the UDP
		 * header and must not exceed the frame (a longer frame is Ethernet padding,
		 * which is fine: the UDP length below is what counts).
		 */
		tot_len = skua_ntohs(ip->tot_len);
		if (tot_len < IP4_MIN_HDR + UDP_HDR || tot_len > bytes_from(ctx, l3_off))
			return drop_malformed();
		return udp_to_xsk(ctx, udp, tot_len - IP4_MIN_HDR);
	}

	if (proto == ETH_P_IPV6_BE) {
		struct ipv6hdr *ip6 = l3;
		struct udphdr *udp;
		__u32 payload_len;

		/* RFC 8200 §3: fixed 40-byte header; a short or non-v6 one is dropped by ipv6_rcv(). */
		if ((void *)(ip6 + 1) > data_end)
			return drop_malformed();
		if (ip6->version != 6)
			return drop_malformed();
		/*
		 * RFC 8200 §4: extension headers chain through Next Header. Walking them
		 * needs a bounded loop and buys nothing for DNS; the kernel handles them.
		 */
		if (ip6->nexthdr != IPPROTO_UDP)
			return pass(ipv6_is_ext_hdr(ip6->nexthdr) ? SKUA_STAT_PASS_IPV6_EXT
								   : SKUA_STAT_PASS_NOT_UDP);

		udp = (void *)(ip6 + 1);
		if ((void *)(udp + 1) > data_end)
			return drop_malformed();
		if (udp->dest != skua_htons(cfg->port))
			return pass(SKUA_STAT_PASS_OTHER_PORT);
		if (!(cfg->flags & SKUA_F_ANY_V6) && !bpf_map_lookup_elem(&SKUA_MAP_DST6, &ip6->daddr))
			return pass(SKUA_STAT_PASS_OTHER_DEST);

		/* RFC 8200 §3: Payload Length counts everything after the fixed header. */
		payload_len = skua_ntohs(ip6->payload_len);
		if (payload_len > bytes_from(ctx, l3_off) - sizeof(*ip6))
			return drop_malformed();
		return udp_to_xsk(ctx, udp, payload_len);
	}

	return pass(SKUA_STAT_PASS_NOT_IP);
}

/*
 * The kernel asks for a licence string. Nothing here calls a GPL-only helper, so the project's
 * own licence is used.
 */
char _license[] SEC("license") = "Apache-2.0";
