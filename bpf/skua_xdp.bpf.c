/* SPDX-License-Identifier: Apache-2.0 */
/*
 * skua_xdp: the XDP filter in front of skuad's AF_XDP sockets, which also answers the
 * queries skuad has precompiled (SKUA_F_ANSWER, see answer()) with XDP_TX.
 *
 * It redirects exactly one kind of frame to user space: a well-formed UDP datagram to the
 * configured port (53) and to one of our unicast addresses (skua_dst4/skua_dst6), in an
 * Ethernet frame to a unicast MAC (optionally with one VLAN tag), from a unicast MAC and a
 * source address a reply can go to (not_unicast_source() below), over IPv4 without options
 * and unfragmented, or over IPv6 with no extension header.
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
static long (*const bpf_redirect)(__u32 ifindex, __u64 flags) = (void *)BPF_FUNC_redirect;
static __u64 (*const bpf_xdp_get_buff_len)(struct xdp_md *xdp_md) =
	(void *)BPF_FUNC_xdp_get_buff_len;
static long (*const bpf_xdp_load_bytes)(struct xdp_md *xdp_md, __u32 offset, void *buf,
					__u32 len) = (void *)BPF_FUNC_xdp_load_bytes;
static long (*const bpf_xdp_store_bytes)(struct xdp_md *xdp_md, __u32 offset, void *buf,
					 __u32 len) = (void *)BPF_FUNC_xdp_store_bytes;
static long (*const bpf_xdp_adjust_tail)(struct xdp_md *xdp_md, int delta) =
	(void *)BPF_FUNC_xdp_adjust_tail;
static __u64 (*const bpf_ktime_get_ns)(void) = (void *)BPF_FUNC_ktime_get_ns;
static __s64 (*const bpf_csum_diff)(__be32 *from, __u32 from_size, __be32 *to, __u32 to_size,
				    __wsum seed) = (void *)BPF_FUNC_csum_diff;

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

/* Our unicast IPv4 addresses, network byte order (never broadcast or multicast ones). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SKUA_XDP_MAX_DESTS);
	__type(key, __u32);
	__type(value, struct skua_dest);
} SKUA_MAP_DST4 SEC(".maps");

/* Our unicast IPv6 addresses (never multicast ones), link-local included. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SKUA_XDP_MAX_DESTS);
	__type(key, struct in6_addr);
	__type(value, struct skua_dest);
} SKUA_MAP_DST6 SEC(".maps");

/* Precompiled answers, filled by skuad from its engine (see skua_xdp_abi.h). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SKUA_XDP_MAX_ANSWERS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct skua_answer_key);
	__type(value, struct skua_answer);
} SKUA_MAP_ANSWERS SEC(".maps");

/*
 * Clients whose most specific access-control rule lets them get a precompiled answer
 * (allow, allow_snoop, deny_non_local, refuse_non_local). The longest-prefix match of an
 * LPM trie is the engine's "most specific rule wins"; skuad inserts every rule, with 0 for
 * the other actions, so a more specific refuse inside an allowed block wins here too.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, SKUA_XDP_MAX_ACL);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct skua_acl_key);
	__type(value, __u8);
} SKUA_MAP_ACL SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct skua_scratch);
} SKUA_MAP_SCRATCH SEC(".maps");

/* The resolver's cached answers (SKUA_F_CACHE): key -> slot, and the slots. See skua_xdp_abi.h. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SKUA_XDP_MAX_CACHED);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct skua_answer_key);
	__type(value, struct skua_cache_ref);
} SKUA_MAP_CACHE_INDEX SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SKUA_XDP_CACHE_SLOTS);
	__type(key, __u32);
	__type(value, struct skua_cached);
} SKUA_MAP_CACHE_SLOTS SEC(".maps");

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
/*
 * A service address under the host agent's lease whose lease is over (docs/ha.md): not ours
 * to answer now, another node may be. The kernel sockets, which check the same lease,
 * drop the query.
 */
static __always_inline int lease_over(const struct skua_dest *dest)
{
	return dest->lease_until_ns && bpf_ktime_get_ns() >= dest->lease_until_ns;
}

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
 * \brief True when a query from this source must not be answered: the reply, the same frame
 *        turned around, would go to a group or unspecified address.
 *
 * The same test as skua-fastpath's handle_frame() (Drop::NotUnicastSource, with its
 * never_unicast()), which must never be asked to answer what the program would not:
 * - an Ethernet source with the group bit (the I/G bit, bit 0 of the first octet): never a
 *   valid source (IEEE 802);
 * - IPv4: 0.0.0.0, and everything from 224.0.0.0 up: multicast 224/4 (RFC 1112), 240/4 and
 *   the limited broadcast 255.255.255.255 (RFC 919). RFC 1122 §3.2.1.3: a source is never a
 *   broadcast or multicast address, and 0.0.0.0 only while a host learns its address;
 * - IPv6: :: and multicast ff00::/8 (RFC 4291 §2.7: never a source; §2.5.2: :: only before
 *   an address is assigned).
 * \param saddr  the IPv4 source (network order), or NULL for IPv6.
 * \param saddr6 the IPv6 source, or NULL for IPv4.
 */
static __always_inline int not_unicast_source(const struct ethhdr *eth, const __u8 *saddr,
					      const struct in6_addr *saddr6)
{
	if (eth->h_source[0] & 1)
		return 1;
	if (saddr)
		return saddr[0] >= 224 || (saddr[0] | saddr[1] | saddr[2] | saddr[3]) == 0;
	return saddr6->s6_addr[0] == 0xff ||
	       (saddr6->s6_addr32[0] | saddr6->s6_addr32[1] | saddr6->s6_addr32[2] |
		saddr6->s6_addr32[3]) == 0;
}

/* --- answers in the program (SKUA_F_ANSWER) ----------------------------------------------- */

#define MISS (-1)
#define CACHED_ANSWER 0x100 /* or-ed into answer()'s verdict for a cached answer */
/* Where the records start in s->buf, at most: frame headers (64) + UDP + DNS header + name + type/class. */
#define HEAD_MAX (64 + UDP_HDR + 12 + SKUA_ANSWER_NAME_MAX + 4)
#define B(i) (s->buf[(i) & 1023]) /* a byte of the work buffer; the mask bounds the index */

/*! \brief Folds a ones' complement sum (RFC 1071) to 16 bits, in memory order. */
static __always_inline __u16 csum_fold32(__u64 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)sum;
}

/*! \brief The same 16-bit sum as seen from an odd offset (RFC 1071 §2(B): byte swap). */
static __always_inline __u16 csum_swap(__u16 c)
{
	return (__u16)((c >> 8) | (c << 8));
}

/*!
 * \brief Ones' complement sum of s->buf[off..off+len), len <= 520, added to \p seed.
 *
 * The bytes after len up to the next multiple of 4 are zeroed first (bpf_csum_diff takes
 * whole 32-bit words); the sum is in memory order, which RFC 1071 §2(B) makes equivalent
 * as long as \p off is the even start of the summed block. One helper call covers at most
 * 512 bytes, hence the second one. Returns 0 on a helper error (the caller's check fails).
 */
static __always_inline __u64 buf_sum(struct skua_scratch *s, __u32 off, __u32 len, __u64 seed)
{
	__u32 r4 = (len + 3) & ~3u;
	__u64 n;
	__s64 sum;

	B(off + len) = 0;
	B(off + len + 1) = 0;
	B(off + len + 2) = 0;
	if (off > 64)
		return 0;
	/*
	 * Sizes go to the helper in the very register that was checked: kernel 6.1's verifier
	 * does not carry a bound across a 32-bit register copy, which clang may insert between
	 * a check and the call (seen with len up to 520, a cached answer's whole reply).
	 */
	if (r4 > 512) {
		sum = bpf_csum_diff(0, 0, (__be32 *)(s->buf + off), 512, (__wsum)seed);
		if (sum < 0)
			return 0;
		n = r4 - 512;
		asm volatile("" : "+r"(n));
		if (n > 8)
			return 0;
		sum = bpf_csum_diff(0, 0, (__be32 *)(s->buf + off + 512), n, (__wsum)sum);
	} else {
		n = r4;
		asm volatile("" : "+r"(n));
		if (n > 512)
			return 0;
		sum = bpf_csum_diff(0, 0, (__be32 *)(s->buf + off), n, (__wsum)seed);
	}
	return sum < 0 ? 0 : (__u64)sum;
}

/*!
 * \brief Unfolded ones' complement sum of \p n32 32-bit words at \p p (4-byte aligned), in
 *        memory order: adding 32-bit words and folding later gives the same 16-bit sum.
 *        No helper call for the small fixed blocks (pseudo-header, OPT record).
 */
static __always_inline __u64 words_sum(const __u8 *p, int n32)
{
	const __u32 *w = (const __u32 *)p;
	__u64 sum = 0;
	int i;

#pragma clang loop unroll(full)
	for (i = 0; i < n32; i++)
		sum += w[i];
	return sum;
}

/*! \brief Ones' complement sum of the IPv4 header (no options) at s->buf[l3..l3+20). */
static __always_inline __u16 ip4_sum(struct skua_scratch *s, __u32 l3)
{
	__u64 sum = 0;
	int i;

	for (i = 0; i < 20; i += 2)
		sum += (__u16)B(l3 + i) | ((__u16)B(l3 + i + 1) << 8);
	return csum_fold32(sum);
}

/*
 * Swaps of adjacent fields (MACs, addresses, ports) by words. The offsets are fixed per
 * path (Ethernet header with or without a tag, IPv4 or IPv6), so no index mask is needed.
 */
static __always_inline void swap32(__u8 *a, __u8 *b)
{
	__u32 t = *(__u32 *)a;

	*(__u32 *)a = *(__u32 *)b;
	*(__u32 *)b = t;
}

static __always_inline void swap16(__u8 *a, __u8 *b)
{
	__u16 t = *(__u16 *)a;

	*(__u16 *)a = *(__u16 *)b;
	*(__u16 *)b = t;
}

static __always_inline void swap64(__u8 *a, __u8 *b)
{
	__u64 t = *(__u64 *)a;

	*(__u64 *)a = *(__u64 *)b;
	*(__u64 *)b = t;
}

/*!
 * \brief Answers the query from skua_answers in place and returns XDP_TX (or a redirect to
 *        the ingress device), or returns MISS: the caller then redirects to the AF_XDP
 *        socket, where the engine decides.
 *
 * The frame has passed every check of the redirect path; \p ulen is its UDP length, already
 * checked against the IP length. Whatever this function declines (bad checksums, unusual
 * headers or flags, EDNS other than version 0 with at most one option, names longer than
 * SKUA_ANSWER_NAME_MAX, names or types not in the map, clients without an allowing rule)
 * goes to the engine, which is the reference: every reply produced here is byte for byte
 * the one skua-fastpath would build (kernel-appliance/xdp/tests/answers_bpf.rs proves it on
 * crafted frames).
 *
 * The frame is read with one bpf_xdp_load_bytes into a per-CPU buffer (no variable-offset
 * packet pointer is needed), the reply's headers and question are rewritten there, and the
 * frame gets three writes: headers + question, the precompiled records (straight from the
 * map value), the OPT record. The UDP checksum is summed from the parts (the records' sum is
 * precompiled) instead of re-reading the reply. Nothing is written before every check passed.
 */
static __attribute__((noinline)) int answer(struct xdp_md *ctx, __u32 l3_off, int v6,
					     __u32 ulen, __u16 cfg_flags)
{
	const struct skua_answer *a;
	const struct skua_cached *cached = 0;
	const struct skua_xdp_config *cfg;
	const struct skua_cache_ref *ref;
	const __u8 *allowed;
	struct skua_scratch *s;
	__u32 zero = 0;
	__u32 u = l3_off + (v6 ? 40 : 20); /* UDP header, in the frame and in s->buf */
	__u32 d = u + UDP_HDR;             /* DNS message */
	__u32 pos, qlen, qend, ar, edns = 0, dnssec_ok = 0, i;
	__u32 tail_len, new_ulen, head, old_len, now = 0, slot, want;
	__u16 field, qflags, flags, c, tc, oc;
	__u16 r_flags, r_an, r_ns, r_ar, r_edns;
	__u64 sum, t;

	if (ulen < UDP_HDR + 17 || ulen > UDP_HDR + SKUA_ANSWER_MSG_MAX)
		return MISS;
	s = bpf_map_lookup_elem(&SKUA_MAP_SCRATCH, &zero);
	if (!s)
		return MISS;
	if (u > 64 || bpf_xdp_load_bytes(ctx, 0, s->buf, u + ulen))
		return MISS;

	/* RFC 791 §3.1: a wrong header checksum is the engine's path to count and drop. */
	if (!v6 && ip4_sum(s, l3_off) != 0xffff)
		return MISS;

	/* RFC 768 / RFC 8200 §8.1 pseudo-header, in the layout each one sums over. */
	if (v6) {
		__builtin_memcpy(s->pseudo, s->buf + l3_off + 8, 32);
		s->pseudo[32] = 0;
		s->pseudo[33] = 0;
		s->pseudo[34] = ulen >> 8;
		s->pseudo[35] = ulen & 0xff;
		s->pseudo[36] = 0;
		s->pseudo[37] = 0;
		s->pseudo[38] = 0;
		s->pseudo[39] = IPPROTO_UDP;
	} else {
		__builtin_memcpy(s->pseudo, s->buf + l3_off + 12, 8);
		s->pseudo[8] = 0;
		s->pseudo[9] = IPPROTO_UDP;
		s->pseudo[10] = ulen >> 8;
		s->pseudo[11] = ulen & 0xff;
	}
	/*
	 * The UDP checksum, with skua-fastpath's rules: zero means "none" over IPv4 only; a
	 * field holding just the folded pseudo-header sum is a local sender's CHECKSUM_PARTIAL.
	 */
	field = (__u16)B(u + 6) | ((__u16)B(u + 7) << 8);
	if (field == 0) {
		if (v6)
			return MISS;
	} else {
		__u64 p = v6 ? words_sum(s->pseudo, 10) : words_sum(s->pseudo, 3);

		if (csum_fold32(buf_sum(s, u, ulen, csum_fold32(p))) != 0xffff &&
		    field != csum_fold32(p))
			return MISS;
	}

	/* RFC 1035 §4.1.1: a plain query (QR 0, opcode QUERY, TC 0), one question, no
	 * answer or authority records, at most one additional (the OPT). */
	if (B(d + 2) & 0xfa)
		return MISS;
	if (B(d + 4) != 0 || B(d + 5) != 1 ||
	    B(d + 6) | B(d + 7) | B(d + 8) | B(d + 9) | B(d + 10))
		return MISS;
	ar = B(d + 11);
	if (ar > 1)
		return MISS;

	/* The name: uncompressed labels, at most SKUA_ANSWER_NAME_MAX bytes. */
	pos = d + 12;
#pragma clang loop unroll(disable)
	for (i = 0; i < SKUA_ANSWER_NAME_MAX / 2 + 1; i++) {
		__u8 len = B(pos);

		if (len == 0)
			break;
		if (len > 63)
			return MISS;
		pos += len + 1;
		if (pos >= d + 12 + SKUA_ANSWER_NAME_MAX)
			return MISS;
	}
	if (B(pos) != 0)
		return MISS;
	/*
	 * The loop leaves by a different iteration for every name length, and the verifier
	 * would walk the rest of the program once per exit. A round trip through map memory
	 * (opaque to it) makes all exits the same state, so it walks the rest once.
	 */
	*(volatile __u32 *)&s->spill = pos + 1 - (d + 12);
	qlen = *(volatile __u32 *)&s->spill;
	if (qlen < 1 || qlen > SKUA_ANSWER_NAME_MAX)
		return MISS;
	qend = d + 12 + qlen;
	if (qend + 4 > d + ulen - UDP_HDR)
		return MISS;
	/* Class IN only (the map holds IN answers). */
	if (B(qend + 2) != 0 || B(qend + 3) != 1)
		return MISS;

	/*
	 * RFC 6891 §6.1: a root-owned OPT, version 0. Its options are ignored, as by the
	 * engine; none or one (a client cookie, say) is handled here, more go to the engine.
	 */
	if (ar) {
		__u32 p = qend + 4, rdlen, end = d + ulen - UDP_HDR;

		if (p + 11 > end)
			return MISS;
		if (B(p) != 0 || B(p + 1) != 0 || B(p + 2) != 41 || B(p + 6) != 0)
			return MISS;
		rdlen = ((__u32)B(p + 9) << 8) | B(p + 10);
		if (p + 11 + rdlen > end)
			return MISS;
		if (rdlen != 0 &&
		    (rdlen < 4 || 4 + (((__u32)B(p + 13) << 8) | B(p + 14)) != rdlen))
			return MISS;
		edns = 1;
		dnssec_ok = B(p + 7) & 0x80;
	}

	/*
	 * The key: the name lower-cased 8 bytes at a time (ASCII letters only: bytes >= 0x80
	 * and length bytes, all <= 63, are left alone), zero past its end.
	 */
	s->key.qtype = ((__u16)B(qend) << 8) | B(qend + 1);
	s->key.name_len = qlen;
	s->key.pad = 0;
#pragma clang loop unroll(full)
	for (i = 0; i < SKUA_ANSWER_NAME_MAX / 8; i++) {
		__u64 x = *(__u64 *)&s->buf[d + 12 + i * 8];
		__u64 h = x & 0x7f7f7f7f7f7f7f7fULL;
		__u64 ge_a = h + 0x3f3f3f3f3f3f3f3fULL; /* high bit set where byte >= 'A' */
		__u64 gt_z = h + 0x2525252525252525ULL; /* high bit set where byte > 'Z' */
		__u64 upper = (ge_a ^ gt_z) & ~x & 0x8080808080808080ULL;
		__u32 keep = qlen > i * 8 ? qlen - i * 8 : 0;
		__u64 mask = keep >= 8 ? ~0ULL : (1ULL << (keep * 8)) - 1;

		*(__u64 *)&s->key.name[i * 8] = (x | (upper >> 2)) & mask;
	}
	a = bpf_map_lookup_elem(&SKUA_MAP_ANSWERS, &s->key);
	if (a) {
		want = SKUA_ACL_LOCAL;
		r_flags = a->flags;
		r_an = a->ancount;
		r_ns = a->nscount;
		r_ar = a->arcount;
		r_edns = a->edns_size;
		tail_len = a->tail_len;
	} else {
		/*
		 * Not local data: a cached answer, if skuad pushed one for this key, it is
		 * still the slot's (the echoed key), and skuad's clock has not reached its
		 * valid_until (expiry or prefetch point: from then on the engine decides).
		 */
		__u32 diff = 0;

		if (!(cfg_flags & SKUA_F_CACHE))
			return MISS;
		ref = bpf_map_lookup_elem(&SKUA_MAP_CACHE_INDEX, &s->key);
		if (!ref)
			return MISS;
		slot = ref->slot;
		cached = bpf_map_lookup_elem(&SKUA_MAP_CACHE_SLOTS, &slot);
		if (!cached)
			return MISS;
#pragma clang loop unroll(full)
		for (i = 0; i < sizeof(struct skua_answer_key) / 4; i++)
			diff |= ((const __u32 *)&cached->key)[i] ^ ((const __u32 *)&s->key)[i];
		if (diff)
			return MISS;
		cfg = bpf_map_lookup_elem(&SKUA_MAP_CFG, &zero);
		if (!cfg)
			return MISS;
		/* Modulo 2^64 (the ABI header says why); a second count that does not fit
		 * 32 bits is no time skuad ever pushed an answer for. */
		t = (bpf_ktime_get_ns() - cfg->clock_origin_ns) / 1000000000ULL;
		if (t > 0xffffffffULL)
			return MISS;
		now = t;
		if (now >= cached->valid_until)
			return MISS;
		/* RFC 1035 §4.1.1 RD (bit 0 of the flags' first byte): the engine answers from
		 * the cache without it only for clients that may snoop (allow_snoop). */
		want = (B(d + 2) & 1) ? SKUA_ACL_CACHED_RD : SKUA_ACL_CACHED;
		r_flags = cached->flags;
		r_an = cached->ancount;
		r_ns = cached->nscount;
		r_ar = cached->arcount;
		r_edns = cached->edns_size;
		tail_len = cached->tail_len;
	}

	/* The client's most specific access-control rule must allow this kind of answer. */
	s->acl.prefixlen = 128;
	if (v6) {
		__builtin_memcpy(s->acl.addr, s->buf + l3_off + 8, 16);
	} else {
		__builtin_memset(s->acl.addr, 0, 10);
		s->acl.addr[10] = 0xff;
		s->acl.addr[11] = 0xff;
		__builtin_memcpy(s->acl.addr + 12, s->buf + l3_off + 12, 4);
	}
	allowed = bpf_map_lookup_elem(&SKUA_MAP_ACL, &s->acl);
	if (!allowed || !(*allowed & want))
		return MISS;

	if (tail_len > SKUA_ANSWER_TAIL_MAX)
		return MISS;
	head = qend + 4; /* where the records start, in the frame and in s->buf */
	new_ulen = head - u + tail_len + (edns ? 11 : 0);
	if (new_ulen > UDP_HDR + SKUA_ANSWER_MSG_MAX)
		return MISS;

	/* --- the reply's headers in s->buf, before the (kept) question --- */
	swap32(s->buf, s->buf + 6); /* MACs: back where it came from */
	swap16(s->buf + 4, s->buf + 10);
	if (v6) {
		swap64(s->buf + l3_off + 8, s->buf + l3_off + 24);
		swap64(s->buf + l3_off + 16, s->buf + l3_off + 32);
		B(l3_off + 4) = new_ulen >> 8;
		B(l3_off + 5) = new_ulen & 0xff;
		B(l3_off + 7) = 64; /* hop limit, as skua-fastpath */
	} else {
		__u32 total = 20 + new_ulen;

		swap32(s->buf + l3_off + 12, s->buf + l3_off + 16);
		B(l3_off + 2) = total >> 8;
		B(l3_off + 3) = total & 0xff;
		B(l3_off + 6) = 0; /* no fragment flags (DF clear), as skua-fastpath */
		B(l3_off + 7) = 0;
		B(l3_off + 8) = 64;
		B(l3_off + 10) = 0;
		B(l3_off + 11) = 0;
		c = ~ip4_sum(s, l3_off);
		B(l3_off + 10) = c & 0xff;
		B(l3_off + 11) = c >> 8;
	}
	swap16(s->buf + u, s->buf + u + 2);
	B(u + 4) = new_ulen >> 8;
	B(u + 5) = new_ulen & 0xff;
	B(u + 6) = 0;
	B(u + 7) = 0;
	/* RFC 1035 §4.1.1: ID kept; RD copied (and CD, RFC 4035 §3.2.2); the rest is ours. */
	qflags = ((__u16)B(d + 2) << 8) | B(d + 3);
	flags = r_flags | (qflags & 0x0110);
	B(d + 2) = flags >> 8;
	B(d + 3) = flags & 0xff;
	B(d + 6) = r_an >> 8;
	B(d + 7) = r_an & 0xff;
	B(d + 8) = r_ns >> 8;
	B(d + 9) = r_ns & 0xff;
	B(d + 10) = (r_ar + edns) >> 8;
	B(d + 11) = (r_ar + edns) & 0xff;
	/* RFC 6891 §6.1.2-3: our payload size, no extended RCODE, version 0, DO echoed. */
	s->opt[0] = 0;
	s->opt[1] = 0;
	s->opt[2] = 41;
	s->opt[3] = r_edns >> 8;
	s->opt[4] = r_edns & 0xff;
	s->opt[5] = 0;
	s->opt[6] = 0;
	s->opt[7] = dnssec_ok ? 0x80 : 0;
	s->opt[8] = 0;
	s->opt[9] = 0;
	s->opt[10] = 0;
	s->opt[11] = 0;

	/*
	 * RFC 768 checksum of the reply from its parts: pseudo-header, headers and question
	 * (summed here), records (summed at compile time from an even offset), OPT. A part
	 * that starts at an odd offset contributes its sum byte-swapped (RFC 1071 §2(B)).
	 */
	if (v6) {
		s->pseudo[34] = new_ulen >> 8;
		s->pseudo[35] = new_ulen & 0xff;
	} else {
		s->pseudo[10] = new_ulen >> 8;
		s->pseudo[11] = new_ulen & 0xff;
	}
	if (cached) {
		/*
		 * A cached answer: the records are copied into s->buf after the question, each
		 * TTL written there (its expiry minus now, the engine's patch_ttls), the OPT
		 * record after them, and the reply summed and written in one piece. Every
		 * SKUA_CACHED_TTLS entry is patched: unused ones point past any reply.
		 */
		__u64 h = head, m;
		__u32 ttl, p;

		/* Bounded in the register used below (see buf_sum). */
		asm volatile("" : "+r"(h));
		if (h > HEAD_MAX)
			return MISS;
#pragma clang loop unroll(full)
		for (i = 0; i < SKUA_ANSWER_TAIL_MAX / 8; i++)
			*(__u64 *)(s->buf + h + i * 8) = *(const __u64 *)(cached->tail + i * 8);
#pragma clang loop unroll(full)
		for (i = 0; i < SKUA_CACHED_TTLS; i++) {
			/* skuad pushes only answers whose every expiry is >= valid_until > now. */
			ttl = cached->ttl_exp[i] - now;
			p = h + cached->ttl_off[i];
			B(p) = ttl >> 24;
			B(p + 1) = (ttl >> 16) & 0xff;
			B(p + 2) = (ttl >> 8) & 0xff;
			B(p + 3) = ttl & 0xff;
		}
		if (edns) {
			p = h + tail_len;
#pragma clang loop unroll(full)
			for (i = 0; i < 11; i++)
				B(p + i) = s->opt[i];
		}
		{
			__u64 ps = v6 ? words_sum(s->pseudo, 10) : words_sum(s->pseudo, 3);

			sum = buf_sum(s, u, new_ulen, csum_fold32(ps));
		}
		c = ~csum_fold32(sum);
		if (c == 0)
			c = 0xffff; /* RFC 768 */
		B(u + 6) = c & 0xff;
		B(u + 7) = c >> 8;
		old_len = (__u32)bpf_xdp_get_buff_len(ctx);
		if (bpf_xdp_adjust_tail(ctx, (int)(u + new_ulen) - (int)old_len))
			return MISS;
		/* As for the records of a local answer: a size the 6.1 verifier can bound. */
		m = u + new_ulen - 1;
		asm volatile("" : "+r"(m));
		if (m >= 64 + UDP_HDR + SKUA_ANSWER_MSG_MAX)
			return XDP_DROP;
		if (bpf_xdp_store_bytes(ctx, 0, s->buf, m + 1))
			return XDP_DROP;
		if (cfg_flags & SKUA_F_TX_REDIRECT)
			return bpf_redirect(ctx->ingress_ifindex, 0) | CACHED_ANSWER;
		return XDP_TX | CACHED_ANSWER;
	}
	{
		__u64 p = v6 ? words_sum(s->pseudo, 10) : words_sum(s->pseudo, 3);

		sum = buf_sum(s, u, head - u, csum_fold32(p));
	}
	tc = a ? a->tail_csum : 0;
	sum += ((head - u) & 1) ? csum_swap(tc) : tc;
	if (edns) {
		oc = csum_fold32(words_sum(s->opt, 3));
		sum += ((head - u + tail_len) & 1) ? csum_swap(oc) : oc;
	}
	c = ~csum_fold32(sum);
	if (c == 0)
		c = 0xffff; /* RFC 768: a computed zero is sent as all ones */
	B(u + 6) = c & 0xff;
	B(u + 7) = c >> 8;

	/* --- the frame: resize, then write; nothing was touched before this point --- */
	old_len = (__u32)bpf_xdp_get_buff_len(ctx);
	if (bpf_xdp_adjust_tail(ctx, (int)(u + new_ulen) - (int)old_len))
		return MISS;
	/* From here on the frame is the reply or is dropped (a failure cannot happen: the
	 * frame was sized for every write below). */
	if (head > 64 + UDP_HDR + 12 + SKUA_ANSWER_NAME_MAX + 4 ||
	    bpf_xdp_store_bytes(ctx, 0, s->buf, head))
		return XDP_DROP;
	if (tail_len) {
		/*
		 * The helper wants a size the verifier can prove to be 1..496. Kernel 6.1's
		 * verifier loses that across clang's register choices, so the size is rebuilt
		 * from a checked n - 1 that clang cannot fold back.
		 */
		__u64 m = tail_len - 1;

		asm volatile("" : "+r"(m));
		if (m >= SKUA_ANSWER_TAIL_MAX)
			return XDP_DROP;
		if (!a || bpf_xdp_store_bytes(ctx, head, (void *)a->tail, m + 1))
			return XDP_DROP;
	}
	if (edns && bpf_xdp_store_bytes(ctx, head + tail_len, s->opt, 11))
		return XDP_DROP;
	/*
	 * A native-mode veth delivers XDP_TX frames to its peer without waking the peer's NAPI
	 * unless the peer runs an XDP program itself (veth_xdp_flush()), so the reply could sit
	 * there until the next packet. A redirect to the ingress device goes through
	 * ndo_xdp_xmit with a flush, which wakes it: skuad sets SKUA_F_TX_REDIRECT on veth.
	 */
	if (cfg_flags & SKUA_F_TX_REDIRECT)
		return bpf_redirect(ctx->ingress_ifindex, 0);
	return XDP_TX;
}

#undef B

/*!
 * \brief Final UDP check shared by both IP versions, then answer or redirect.
 * \param udp       UDP header; the caller has proven its 8 bytes are inside the frame.
 * \param ip_avail  bytes the IP layer says it carries after its header (IPv4 total length
 *                  minus 20, IPv6 payload length); the caller has checked it against the
 *                  frame length, so checking the UDP length against it covers the frame too.
 * \return XDP_DROP or the result of bpf_redirect_map().
 */
static __always_inline int udp_to_xsk(struct xdp_md *ctx, const struct udphdr *udp,
				      __u32 ip_avail, const struct skua_xdp_config *cfg,
				      __u32 l3_off, int v6)
{
	__u32 ulen = skua_ntohs(udp->len);
	int verdict;

	/*
	 * RFC 768: Length counts header and data, so it is at least 8, and it must fit in what
	 * the IP header says it carries. A UDP length shorter than the IP payload is legal (the
	 * kernel trims the rest in udp_rcv()); skuad must use the UDP length. Zero (RFC 2675
	 * jumbograms) needs a hop-by-hop header, which never reaches here.
	 */
	if (ulen < UDP_HDR || ulen > ip_avail)
		return drop_malformed();

	if (cfg->flags & SKUA_F_ANSWER) {
		verdict = answer(ctx, l3_off, v6, ulen, cfg->flags);
		if (verdict != MISS) {
			int cached = verdict & CACHED_ANSWER;

			verdict &= ~CACHED_ANSWER;
			count(verdict == XDP_DROP ? SKUA_STAT_DROP_MALFORMED
			      : cached            ? SKUA_STAT_ANSWERED_CACHED
						  : SKUA_STAT_ANSWERED);
			return verdict;
		}
	}
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
	int group;

	count(SKUA_STAT_SEEN);

	cfg = bpf_map_lookup_elem(&SKUA_MAP_CFG, &key);
	if (!cfg || !(cfg->flags & SKUA_F_ENABLED))
		return pass(SKUA_STAT_PASS_DISABLED);

	/* A runt too short for its L2 header cannot be ours; the kernel discards it. */
	if ((void *)(eth + 1) > data_end)
		return pass(SKUA_STAT_PASS_NOT_IP);
	/*
	 * An Ethernet group destination (the I/G bit, bit 0 of the first octet: broadcast or
	 * multicast) is never answered here, whatever the IP destination: a unicast datagram
	 * in a link-layer broadcast should be discarded (RFC 1122 §3.3.6), and IP broadcast
	 * and multicast (RFC 919, RFC 922, RFC 1112, RFC 4291 §2.7) are the kernel's, whose
	 * sockets never reply from such an address. Checked below, with the destination
	 * address, so that it counts as pass_other_dest and other traffic keeps its counters.
	 */
	group = eth->h_dest[0] & 1;
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
		const struct skua_dest *dest;
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
		/*
		 * Ours: a unicast address of the interface. skuad puts nothing else in the map
		 * (no broadcast or multicast address, even for a wildcard listener).
		 */
		if (group)
			return pass(SKUA_STAT_PASS_OTHER_DEST);
		dest = bpf_map_lookup_elem(&SKUA_MAP_DST4, &ip->daddr);
		if (!dest)
			return pass(SKUA_STAT_PASS_OTHER_DEST);
		if (lease_over(dest))
			return pass(SKUA_STAT_PASS_NO_LEASE);
		/*
		 * Ours, but from a source no reply may go to: the kernel's (it drops most of
		 * these as martians), never the XSK's or the answer path's.
		 */
		if (not_unicast_source(eth, (const __u8 *)&ip->saddr, 0))
			return pass(SKUA_STAT_PASS_BAD_SOURCE);

		/*
		 * RFC 791 §3.1: Total Length covers header and data. It must hold the UDP
		 * header and must not exceed the frame (a longer frame is Ethernet padding,
		 * which is fine: the UDP length below is what counts).
		 */
		tot_len = skua_ntohs(ip->tot_len);
		if (tot_len < IP4_MIN_HDR + UDP_HDR || tot_len > bytes_from(ctx, l3_off))
			return drop_malformed();
		return udp_to_xsk(ctx, udp, tot_len - IP4_MIN_HDR, cfg, l3_off, 0);
	}

	if (proto == ETH_P_IPV6_BE) {
		struct ipv6hdr *ip6 = l3;
		const struct skua_dest *dest;
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
		if (group)
			return pass(SKUA_STAT_PASS_OTHER_DEST);
		dest = bpf_map_lookup_elem(&SKUA_MAP_DST6, &ip6->daddr);
		if (!dest)
			return pass(SKUA_STAT_PASS_OTHER_DEST);
		if (lease_over(dest))
			return pass(SKUA_STAT_PASS_NO_LEASE);
		if (not_unicast_source(eth, 0, &ip6->saddr))
			return pass(SKUA_STAT_PASS_BAD_SOURCE);

		/* RFC 8200 §3: Payload Length counts everything after the fixed header. */
		payload_len = skua_ntohs(ip6->payload_len);
		if (payload_len > bytes_from(ctx, l3_off) - sizeof(*ip6))
			return drop_malformed();
		return udp_to_xsk(ctx, udp, payload_len, cfg, l3_off, 1);
	}

	return pass(SKUA_STAT_PASS_NOT_IP);
}

/*
 * The kernel asks for a licence string. Nothing here calls a GPL-only helper, so the project's
 * own licence is used.
 */
char _license[] SEC("license") = "Apache-2.0";
