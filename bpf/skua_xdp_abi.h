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
#define SKUA_MAP_STATS  skua_stats  /* PERCPU_ARRAY: key = enum skua_xdp_stat, value = u64 */

#define SKUA_XDP_MAX_QUEUES 256
#define SKUA_XDP_MAX_DESTS  1024

/* skua_xdp_config.flags */
#define SKUA_F_ENABLED  0x0001 /*!< redirect at all (off = XDP_PASS everything) */
#define SKUA_F_ANY_V4   0x0002 /*!< any IPv4 destination is ours (no skua_dst4 lookup) */
#define SKUA_F_ANY_V6   0x0004 /*!< any IPv6 destination is ours (no skua_dst6 lookup) */

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
	SKUA_STAT_PASS_OTHER_DEST,   /*!< UDP to our port but another address (health checks, other services) */
	SKUA_STAT_PASS_FRAGMENT,     /*!< IPv4 fragments: reassembly is the kernel's job */
	SKUA_STAT_PASS_IP_OPTIONS,   /*!< IPv4 with options (IHL > 5) */
	SKUA_STAT_PASS_IPV6_EXT,     /*!< IPv6 with extension headers */
	SKUA_STAT_PASS_DISABLED,     /*!< SKUA_F_ENABLED clear */
	SKUA_STAT_DROP_MALFORMED,    /*!< to our port but truncated / inconsistent lengths / IHL < 5 */
	SKUA_STAT_MAX
};

#endif
