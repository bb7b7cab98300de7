/* SPDX-License-Identifier: Apache-2.0 */
/*
 * xdp_tx_ceiling: the ceiling probe of tests/bench/xdp.sh. NOT part of skuad.
 *
 * It answers every plain DNS query over IPv4/UDP to port 53 inside the driver's XDP hook and
 * sends the reply back out of the interface it came in on (XDP_TX). No user space, no socket,
 * no lookup: no DNS server on this path can do less work per query, so its rate is the
 * ceiling of the benchmark topology (veth pair, one queue, one core).
 *
 * The reply is a real, fixed answer, so that its size matches what the servers send:
 *   - MACs, IPv4 addresses and UDP ports swapped, TTL 64;
 *   - DNS header: ID kept, QR=1, AA=1, RD copied, RA=0, RCODE=NOERROR, QDCOUNT=1, ANCOUNT=1,
 *     NSCOUNT=0, ARCOUNT=0;
 *   - the question, unchanged;
 *   - one answer: a compression pointer to the question name (0xC00C), type A, class IN,
 *     TTL 300, RDATA 198.18.0.42 -- the same address for every name (the question type is
 *     not looked at);
 *   - an EDNS OPT record of the query (a bare one, 11 bytes, no options) is dropped: the
 *     reply carries no OPT (servers echo one; 11 bytes do not matter to the ceiling);
 *   - IPv4 header checksum recomputed, UDP checksum 0 ("not computed", valid over IPv4).
 * If the frame cannot grow by the 16 answer bytes (bpf_xdp_adjust_tail fails: no tailroom),
 * the reply is the bare header + question (QR=1, AA=1, NOERROR, ANCOUNT=0), counted apart.
 *
 * Passed to the kernel stack (XDP_PASS, counted): everything else -- not IPv4/UDP/53, IP
 * options or fragments, QR set or opcode != QUERY, QDCOUNT != 1, AN/NS records, any
 * additional record other than one trailing bare OPT, messages shorter than a header and a
 * root question or longer than 512 bytes.
 *
 * Counters: the per-CPU array `ceil_stats` (key 0 answered with the A record, 1 answered
 * bare, 2 passed). tests/bench/xdp.sh reads it with bpftool.
 *
 * Build:  clang -O2 -g -target bpf -mcpu=v3 -I/usr/include/$(uname -m)-linux-gnu \
 *             -c xdp_tx_ceiling.bpf.c -o xdp_tx_ceiling.bpf.o
 * Load:   ip link set dev IF xdpdrv obj xdp_tx_ceiling.bpf.o sec xdp
 * Remove: ip link set dev IF xdp off
 * Caveat (veth): the peer must run an XDP program too (kxdpgun's, or xdp_pass below), or the
 * XDP_TX replies are not delivered until something else wakes the peer's NAPI.
 * Only clang and the UAPI headers are needed (no libbpf-dev): the few libbpf macros are
 * written out below, as in bpf/skua_xdp.bpf.c. Loading does variable-offset packet access,
 * which needs root (CAP_PERFMON); this is a benchmark tool.
 */

#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>

#define SEC(name) __attribute__((section(name), used))
#undef __always_inline
#define __always_inline inline __attribute__((always_inline))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) __typeof__(val) *name

static void *(*const bpf_map_lookup_elem)(void *map, const void *key) =
	(void *)BPF_FUNC_map_lookup_elem;
static long (*const bpf_xdp_adjust_tail)(struct xdp_md *ctx, int delta) =
	(void *)BPF_FUNC_xdp_adjust_tail;

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define be16(x) ((__u16)__builtin_bswap16(x))
#else
#define be16(x) ((__u16)(x))
#endif

#define DNS_PORT   53
#define DNS_HDR    12
#define MIN_MSG    (DNS_HDR + 5) /* header, root name, QTYPE, QCLASS */
#define MAX_MSG    512           /* longest DNS message answered (bounds the offsets) */
#define OPT_BARE   11            /* root name, TYPE 41, CLASS, TTL, RDLEN 0 */
#define ANSWER_LEN 16            /* 0xC00C, A, IN, TTL, RDLEN 4, 4 bytes */
#define L2L4       (sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct udphdr))

enum { CEIL_ANSWERED_A = 0, CEIL_ANSWERED_BARE = 1, CEIL_PASSED = 2, CEIL_MAX = 3 };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CEIL_MAX);
	__type(key, __u32);
	__type(value, __u64);
} ceil_stats SEC(".maps");

struct dnshdr {
	__be16 id;
	__u8 flags1; /* QR, opcode (4), AA, TC, RD */
	__u8 flags2; /* RA, Z, AD, CD, RCODE (4) */
	__be16 qdcount;
	__be16 ancount;
	__be16 nscount;
	__be16 arcount;
};

static __always_inline void count(__u32 k)
{
	__u64 *v = bpf_map_lookup_elem(&ceil_stats, &k);

	if (v)
		*v += 1;
}

static __always_inline int pass(void)
{
	count(CEIL_PASSED);
	return XDP_PASS;
}

SEC("xdp")
int xdp_tx_ceiling(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);
	struct dnshdr *dns = (void *)(udp + 1);
	__u32 msg_len, qend, flen, new_len, k;
	__u8 tmp_mac[ETH_ALEN];
	__be32 tmp_ip;
	__be16 tmp_port;
	__u8 rd;
	int bare = 0;

	if ((void *)(dns + 1) > data_end)
		return pass();
	if (eth->h_proto != be16(ETH_P_IP))
		return pass();
	if (ip->version != 4 || ip->ihl != 5 || ip->protocol != IPPROTO_UDP ||
	    (ip->frag_off & be16(0x3fff)))
		return pass();
	if (udp->dest != be16(DNS_PORT))
		return pass();
	if (dns->flags1 & 0xf8) /* QR set or opcode != QUERY */
		return pass();
	if (dns->qdcount != be16(1) || dns->ancount || dns->nscount)
		return pass();

	msg_len = be16(udp->len);
	if (msg_len < sizeof(struct udphdr) + MIN_MSG || msg_len > sizeof(struct udphdr) + MAX_MSG)
		return pass();
	msg_len -= sizeof(struct udphdr);
	if ((void *)dns + msg_len > data_end)
		return pass();
	qend = msg_len;
	if (dns->arcount == be16(1)) {
		__u8 *opt;

		if (msg_len < MIN_MSG + OPT_BARE)
			return pass();
		opt = (__u8 *)dns + (msg_len - OPT_BARE);
		if ((void *)(opt + OPT_BARE) > data_end)
			return pass();
		if (opt[0] != 0 || opt[1] != 0 || opt[2] != 41 || opt[9] != 0 || opt[10] != 0)
			return pass();
		qend = msg_len - OPT_BARE;
	} else if (dns->arcount) {
		return pass();
	}
	rd = dns->flags1 & 0x01;

	/* Turn the frame around while the pointers are valid. */
	for (k = 0; k < ETH_ALEN; k++) {
		tmp_mac[k] = eth->h_dest[k];
		eth->h_dest[k] = eth->h_source[k];
		eth->h_source[k] = tmp_mac[k];
	}
	tmp_ip = ip->saddr;
	ip->saddr = ip->daddr;
	ip->daddr = tmp_ip;
	tmp_port = udp->source;
	udp->source = udp->dest;
	udp->dest = tmp_port;

	/* Frame length as scalars (no pointer subtraction). */
	flen = ctx->data_end - ctx->data;
	new_len = L2L4 + qend + ANSWER_LEN;
	if (new_len != flen && bpf_xdp_adjust_tail(ctx, (int)new_len - (int)flen) != 0) {
		bare = 1;
		new_len = L2L4 + qend;
		if (new_len != flen && bpf_xdp_adjust_tail(ctx, (int)new_len - (int)flen) != 0)
			return XDP_DROP; /* cannot happen: shrinking within the frame */
	}

	/* The helper invalidated every packet pointer: derive them again. */
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	ip = (void *)(eth + 1);
	udp = (void *)(ip + 1);
	dns = (void *)(udp + 1);
	if ((void *)(dns + 1) > data_end)
		return XDP_DROP;
	if (qend > MAX_MSG) /* for the verifier: qend is bounded already */
		return XDP_DROP;

	dns->flags1 = 0x80 | 0x04 | rd; /* QR, AA, RD copied */
	dns->flags2 = 0;                /* RA=0, NOERROR */
	dns->ancount = bare ? 0 : be16(1);
	dns->nscount = 0;
	dns->arcount = 0;
	if (!bare) {
		__u8 *a = (__u8 *)dns + qend;

		if ((void *)(a + ANSWER_LEN) > data_end)
			return XDP_DROP;
		a[0] = 0xc0; a[1] = 0x0c;           /* name: pointer to the question name */
		a[2] = 0; a[3] = 1;                 /* TYPE A */
		a[4] = 0; a[5] = 1;                 /* CLASS IN */
		a[6] = 0; a[7] = 0; a[8] = 1; a[9] = 0x2c; /* TTL 300 */
		a[10] = 0; a[11] = 4;               /* RDLENGTH */
		a[12] = 198; a[13] = 18; a[14] = 0; a[15] = 42;
	}

	udp->len = be16((__u16)(new_len - sizeof(struct ethhdr) - sizeof(struct iphdr)));
	udp->check = 0;
	ip->tot_len = be16((__u16)(new_len - sizeof(struct ethhdr)));
	ip->ttl = 64;
	ip->check = 0;
	{
		__u16 *w = (__u16 *)ip;
		__u32 sum = 0;

#pragma unroll
		for (k = 0; k < sizeof(struct iphdr) / 2; k++)
			sum += w[k];
		sum = (sum & 0xffff) + (sum >> 16);
		sum = (sum & 0xffff) + (sum >> 16);
		ip->check = (__u16)~sum;
	}

	count(bare ? CEIL_ANSWERED_BARE : CEIL_ANSWERED_A);
	return XDP_TX;
}

/*
 * pass_all (section xdp_pass): lets everything through. tests/bench/xdp.sh attaches it to the CLIENT end while it
 * checks the ceiling with kdig: veth wakes the peer's NAPI after XDP_TX only when the peer
 * has an XDP program of its own (veth_xdp_flush), so with none the replies wait in the peer's
 * ring until other traffic arrives. kxdpgun attaches its own program, which does the same.
 */
SEC("xdp_pass")
int pass_all(struct xdp_md *ctx)
{
	(void)ctx;
	return XDP_PASS;
}

char _license[] SEC("license") = "Apache-2.0";
