#!/usr/bin/env python3
"""`just bench`: the Skua appliance booted in QEMU, loaded from the host side of its tap, three
servers measured in the same VM one after the other:

  skuad-xdp    skuad --xdp-required (the appliance's mode: the XDP program answers the zone's
               names with XDP_TX, an AF_XDP worker per queue the rest)
  skuad-sock   skuad --no-xdp (kernel UDP sockets)
  knotd-xdp    knotd 3.2 in XDP mode (the reference), one UDP worker per queue

The image is the appliance's `bench` profile (image/mkosi.profiles/bench.conf: knotd and the
10,000-name zone `bench.` added; built by `image/build.sh --profile bench` into
image/mkosi.output.bench unless --disk or --no-build). Per repetition, in a rotating order,
each server is started by hand on the guest's console after everything else is stopped and
eth0's XDP program detached; then, from the host's network namespace:

  - warm-up: kxdpgun at the lowest rate for a few seconds, not counted (TCG translates guest
    code on its first use: the first step after a switch would pay for it);
  - kxdpgun (open loop, AF_XDP on the tap) at each offered rate (--rates): answered/s counted
    at the receiver (tap rx_packets, kxdpgun's own count alongside);
  - dnsperf at the same offered rate (-Q, socket client): latency (average, max);
  - overload: kxdpgun at 2 x the peak answered rate of that repetition: answered / peak.

Also: seconds from QEMU start to skuad's XDP self-test and to the first answered query (the
built-in configuration, before any switch), and the image's size (allocated, apparent, update
bundle). Prints a line per step with elapsed time and ETA, a table at the end; writes
results.json, steps.tsv, summary.txt and bench.png (answered and latency vs offered) into
--out (default /tmp/skua-vmbench-DATE).

Targets (the issue): skuad-xdp's peak >= 1.5 x knotd-xdp's in the same VM; at 2 x overload
skuad-xdp still answers >= 90 % of its peak. The script prints both and exits 0 either way
(figures on a shared 2-core host are not a pass/fail test); non-zero only when something
did not work (a server not answering, QEMU dying, a tool missing).

Needs root, the image tools (just deps), kxdpgun, kdig (knot-dnsutils), dnsperf; matplotlib
(this interpreter's, else /tmp/skua-bench-venv's; tests/bench/xdp.sh --deps makes it) or
gnuplot for the plot.
"""

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no qemu/__pycache__ in the work tree
import vm as vmmod  # noqa: E402  (qemu/vm.py: the VM class, console, netns)

GUEST = vmmod.GUEST                 # 198.18.1.2
GUEST_MAC = "52:54:00:5c:0a:02"     # qemu/vm.py's virtio-net MAC
HOST_IP = "198.18.1.1"              # the tap, in the namespace (qemu/netns.sh)
BENCH_DIR = "/usr/lib/skua/bench"   # image/bench.extra
ZONE = "bench."
NAMES = 10000                       # image/mkosi.profiles/bench.postinst
SERVERS = ("skuad-xdp", "skuad-sock", "knotd-xdp")
BENCH_OUT = os.path.join(ROOT, "image/mkosi.output.bench")
VENV_PY = "/tmp/skua-bench-venv/bin/python"

FULL = dict(reps=3, rates="5000,10000,15000,20000,30000,40000,60000", step_secs=5, lat_secs=3, warmup_secs=3)
QUICK = dict(reps=1, rates="5000,15000,30000,60000", step_secs=3, lat_secs=2, warmup_secs=2)

T0 = time.monotonic()


log = vmmod.log


def die(msg):
    log(f"error: {msg}")
    sys.exit(1)


def k(x, nd=1):
    return "-" if x is None else f"{x / 1000:.{nd}f}k"


def hms(s):
    s = int(round(s))
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def med(vals):
    v = [x for x in vals if x is not None]
    return statistics.median(v) if v else None


# ------------------------------------------------------------------------------ the VM
class BenchVM(vmmod.VM):
    """qemu/vm.py's VM with a helper that shows each console command it runs."""

    def guest(self, command, timeout=60, check=True, quiet=False):
        """A command on the guest's root console, shown as `guest# ...`."""
        if not quiet:
            log(f"guest# {command}")
        out, rc = self.run(command, timeout)
        if check and rc != 0:
            raise RuntimeError(f"guest command failed (exit {rc}): {command}\n{out}")
        return out


def tap_stats(vm):
    """rx_packets rx_dropped tx_packets tx_dropped of the host's tap (rx = from the guest)."""
    r = vm.host(["sh", "-c", f"cd /sys/class/net/{vm.tap}/statistics && cat rx_packets rx_dropped tx_packets tx_dropped"], timeout=30)
    v = [int(x) for x in r.stdout.split()]
    if len(v) != 4:
        raise RuntimeError(f"cannot read the tap's counters: {r.stdout!r} {r.stderr!r}")
    return dict(zip(("rx", "rx_drop", "tx", "tx_drop"), v))


def cpu_ticks():
    """Busy and total jiffies of the host (all CPUs)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[0] + v[1] + v[2] + v[5] + v[6], sum(v)


def proc_ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
        return int(v[11]) + int(v[12])  # utime + stime
    except (OSError, IndexError, ValueError):
        return 0


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def xdp_off_host(vm):
    vm.host(["ip", "link", "set", "dev", vm.tap, "xdp", "off"], timeout=30)


def addr_of(i):
    a = i % 131072
    return f"198.{18 + a // 65536}.{(a // 256) % 256}.{a % 256}"


# ------------------------------------------------------------------------------ guest side
STOP_ALL = ("systemctl stop skuad.service 'skua-bench-*' 'knot*.service'; systemctl reset-failed 'skua-bench-*' 2>/dev/null; "
            "ip link set dev eth0 xdp off; echo XDP_ATTACHED=$(ip -d link show dev eth0 | grep -c 'prog/xdp')")


def start_command(server, queues):
    run = ("systemd-run --quiet --unit=skua-bench-{s} -p LimitMEMLOCK=infinity "
           "-p StandardOutput=journal+console -p StandardError=journal+console").format(s=server)
    conf = f"{BENCH_DIR}/skuad.conf"
    if server == "skuad-xdp":
        # Type=notify: systemd-run returns once skuad is ready, i.e. after its XDP self-test.
        return f"{run} -p Type=notify -p NotifyAccess=main /usr/bin/skuad --config {conf} --xdp-required"
    if server == "skuad-sock":
        return f"{run} -p Type=notify -p NotifyAccess=main /usr/bin/skuad --config {conf} --no-xdp"
    if server == "knotd-xdp":
        # knotd 3.2 puts its configuration database in /tmp/knot-confdb.XXXXXX: the appliance's
        # /tmp is on the read-only root, so the unit gets a tmpfs there.
        return (f"mkdir -p /run/skua-bench/knot && sed 's/^    udp-workers: .*/    udp-workers: {queues}/' "
                f"{BENCH_DIR}/knot.conf > /run/skua-bench/knot.conf && {run} -p Type=exec -p TemporaryFileSystem=/tmp "
                "/usr/sbin/knotd -c /run/skua-bench/knot.conf")
    raise ValueError(server)


def guest_counters(vm):
    """Kernel UDP datagrams received (/proc/net/snmp) and virtio-net's per-queue counters summed
    (ethtool -S: packets, xdp_packets, xdp_tx, xdp_redirects, xdp_drops, drops)."""
    out = vm.guest("grep '^Udp:' /proc/net/snmp | tail -1; ethtool -S eth0 | grep -E '^ *rx_queue_[0-9]+_'", quiet=True)
    c = {}
    m = re.search(r"^Udp: (\d+)", out, re.M)
    c["udp_in"] = int(m.group(1)) if m else None
    for name, val in re.findall(r"rx_queue_\d+_(\w+): (\d+)", out):
        c[name] = c.get(name, 0) + int(val)
    return c


def switch_to(vm, server, args, mark_console=True):
    """Stops every server, detaches eth0's XDP program, starts `server`, waits until it answers
    from the host. Returns seconds taken."""
    t = time.monotonic()
    log(f"-- switching to {server}")
    out = vm.guest(STOP_ALL, 120, check=False)
    if not re.search(r"XDP_ATTACHED=0\b", out):
        raise RuntimeError(f"an XDP program is still attached to eth0 after stopping everything:\n{out}")
    start = len(vm.console())
    vm.guest(start_command(server, args.queues), 150)
    want = addr_of(7)
    deadline = time.monotonic() + 90
    while vm.kdig(f"h7.{ZONE}", timeout=1, tries=1) != want:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{server} does not answer h7.{ZONE} A within 90 s")
        time.sleep(0.5)
    if server == "skuad-xdp":
        # After its self-test skuad compiles the zone's answers into the XDP program's map
        # (seconds under TCG); measure the steady state, after it.
        vm.wait_for(r"answers precompiled into the program", 180, start, what="skuad's answer precompilation")
    time.sleep(2)
    text = vm.console()[start:]
    link = vm.guest("ip link show dev eth0 | grep -o ' xdp[a-z]* '; ip -d link show dev eth0 | grep -o 'prog/xdp id [0-9]* name [^ ]*' "
                    "|| echo no-xdp", check=False)
    attached = "prog/xdp" in link
    if server.endswith("-xdp") and not attached:
        raise RuntimeError(f"{server} answers but no XDP program is attached to eth0: {link.strip()}")
    if server == "skuad-sock" and attached:
        raise RuntimeError(f"skuad --no-xdp, yet an XDP program is attached to eth0: {link.strip()}")
    if server == "skuad-xdp":
        for pat in (r"xdp: self-test passed on eth0[^\r\n]*", r"xdp: \d+ answers precompiled[^\r\n]*"):
            m = re.search(pat, text)
            log(f"   skuad: {m.group(0).strip() if m else '(no ' + pat + ' line on the console)'}")
    if server == "knotd-xdp":
        for m in re.finditer(r"knotd\[\d+\]: [^\r\n]*(?:XDP|xdp)[^\r\n]*", text):
            log(f"   {m.group(0).strip()}")
    log(f"   {server} answers h7.{ZONE} A -> {want} ({time.monotonic() - t:.1f} s); eth0: {' '.join(link.split()) or '-'}")
    return time.monotonic() - t


# ------------------------------------------------------------------------------ load
def parse_kxdpgun(text):
    r = {}
    m = re.search(r"^total queries:\s+(\d+)\s+\((\d+) pps\)", text, re.M)
    if m:
        r["kx_sent"], r["kx_sent_pps"] = int(m.group(1)), int(m.group(2))
    m = re.search(r"^total replies:\s+(\d+)\s+\((\d+) pps\)", text, re.M)
    if m:
        r["kx_replies"], r["kx_replies_pps"] = int(m.group(1)), int(m.group(2))
    m = re.search(r"^using interface .*", text, re.M)
    if m:
        r["kx_mode"] = m.group(0)
    return r


def parse_dnsperf(text):
    r = {}
    pats = {
        "dp_sent": r"Queries sent:\s+(\d+)",
        "dp_completed": r"Queries completed:\s+(\d+)",
        "dp_lost": r"Queries lost:\s+(\d+)",
        "dp_runtime": r"Run time \(s\):\s+([\d.]+)",
        "dp_qps": r"Queries per second:\s+([\d.]+)",
        "lat_avg": r"Average Latency \(s\):\s+([\d.]+)",
        "lat_min": r"Average Latency \(s\):\s+[\d.]+ \(min ([\d.]+)",
        "lat_max": r"Average Latency \(s\):\s+[\d.]+ \(min [\d.]+, max ([\d.]+)",
        "lat_sd": r"Latency StdDev \(s\):\s+([\d.]+)",
    }
    for key, pat in pats.items():
        m = re.search(pat, text)
        if m:
            r[key] = float(m.group(1))
    for key in ("lat_avg", "lat_min", "lat_max", "lat_sd"):
        if key in r:
            r[key] *= 1000.0  # ms
    return r


class Bench:
    def __init__(self, vm, args, out, queries):
        self.vm, self.args, self.out, self.queries = vm, args, out, queries
        self.steps = []
        self.host_mac = None
        self.done = 0
        self.total = 0
        self.t_start = None
        self.n = 0

    def progress(self):
        el = time.monotonic() - self.t_start
        if self.done == 0:
            return f"step {self.done}/{self.total}, {hms(el)}"
        eta = el / self.done * (self.total - self.done)
        return f"step {self.done}/{self.total}, {hms(el)} elapsed, ETA {hms(eta)}"

    def kx(self, rep, server, phase, rate, secs):
        vm = self.vm
        self.n += 1
        logf = os.path.join(self.out, "logs", f"{self.n:03d}-r{rep}-{server}-{phase}-{rate}.kx.log")
        a = tap_stats(vm)
        hz = os.sysconf("SC_CLK_TCK")
        h0, q0, c0 = cpu_ticks(), proc_ticks(vm.proc.pid), children_cpu()
        cmd = ["ip", "netns", "exec", vm.ns, "kxdpgun", "-t", str(secs), "-Q", str(rate), "-i", self.queries,
               "-I", vm.tap, "-l", HOST_IP, "-L", self.host_mac, "-R", GUEST_MAC]
        if self.args.kx_affinity:
            cmd += ["-F", self.args.kx_affinity]
        cmd.append(GUEST)
        t = time.monotonic()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=secs + 30)
            text = r.stdout + r.stderr
            rc = r.returncode
        except subprocess.TimeoutExpired as e:
            text = f"{e.stdout or ''}{e.stderr or ''}\n(timeout)"
            rc = -1
        time.sleep(0.3)  # late replies
        b = tap_stats(vm)
        h1, q1, c1 = cpu_ticks(), proc_ticks(vm.proc.pid), children_cpu()
        wall = time.monotonic() - t
        xdp_off_host(vm)  # kxdpgun leaves its program on the tap
        with open(logf, "w") as f:
            f.write(" ".join(cmd) + "\n" + text)
        kxr = parse_kxdpgun(text)
        if rc != 0 or "kx_sent" not in kxr:
            log(f"   warning: kxdpgun exited {rc} (log {logf})")
        dur = kxr["kx_sent"] / kxr["kx_sent_pps"] if kxr.get("kx_sent_pps") else secs
        rx = b["rx"] - a["rx"]
        # Answers counted at the receiver: frames the guest wrote into the tap (tun counts the
        # ones kxdpgun's program redirects too); kxdpgun's own count when it is higher.
        answered = max(rx, kxr.get("kx_replies", 0))
        sent = kxr.get("kx_sent", b["tx"] - a["tx"] + b["tx_drop"] - a["tx_drop"])
        s = dict(rep=rep, server=server, phase=phase, offered=rate, secs=secs, dur=round(dur, 3),
                 wall=round(wall, 2), sent=sent, answered=answered, tap_rx=rx,
                 tap_tx=b["tx"] - a["tx"], tap_tx_drop=b["tx_drop"] - a["tx_drop"], tap_rx_drop=b["rx_drop"] - a["rx_drop"],
                 kx_replies=kxr.get("kx_replies"), sent_rate=sent / dur, ans_rate=answered / dur,
                 loss_pct=100.0 * max(0, sent - answered) / sent if sent else 100.0,
                 gen_bound=int(sent / dur < 0.95 * rate), kx_mode=kxr.get("kx_mode"), kx_rc=rc,
                 # over the step's wall time (kxdpgun's start-up included): % of one host CPU
                 host_busy_pct=round(100 * os.cpu_count() * (h1[0] - h0[0]) / max(1, h1[1] - h0[1])),
                 qemu_cpu_pct=round(100 * (q1 - q0) / hz / wall), kx_cpu_pct=round(100 * (c1 - c0) / wall))
        self.steps.append(s)
        self.done += 1
        return s

    def dnsperf(self, rep, server, rate, secs):
        vm = self.vm
        self.n += 1
        logf = os.path.join(self.out, "logs", f"{self.n:03d}-r{rep}-{server}-latency-{rate}.dnsperf.log")
        cmd = ["ip", "netns", "exec", vm.ns, "dnsperf", "-s", GUEST, "-d", self.queries, "-l", str(secs),
               "-Q", str(rate), "-c", "4", "-q", str(self.args.dnsperf_outstanding), "-t", "1"]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=secs + 30)
            text = r.stdout + r.stderr
        except subprocess.TimeoutExpired as e:
            text = f"{e.stdout or ''}{e.stderr or ''}\n(timeout)"
        with open(logf, "w") as f:
            f.write(" ".join(cmd) + "\n" + text)
        d = parse_dnsperf(text)
        if "dp_qps" not in d:
            log(f"   warning: no dnsperf result (log {logf})")
        s = dict(rep=rep, server=server, phase="latency", offered=rate, secs=secs, **d)
        self.steps.append(s)
        self.done += 1
        return s

    def run_server(self, rep, server):
        a = self.args
        if a.warmup_secs > 0:
            # Not counted: under TCG the first use of a code path (the guest kernel's socket
            # path, a server's worker) pays for its translation; the first step would show it.
            w = self.kx(rep, server, "warmup", min(a.rate_list), a.warmup_secs)
            log(f"rep {rep}/{a.reps} {server:<10} warm-up {k(w['offered'], 0)} offered {a.warmup_secs} s: answered "
                f"{k(w['ans_rate'])}/s (not counted)")
        c0 = guest_counters(self.vm)
        prog0 = self.skuad_counters() if server == "skuad-xdp" else None
        peak = 0
        for rate in a.rate_list:
            s = self.kx(rep, server, "rate", rate, a.step_secs)
            peak = max(peak, s["ans_rate"])
            line = (f"rep {rep}/{a.reps} {server:<10} {k(rate, 0):>5} offered: sent {k(s['sent_rate'])}/s, answered "
                    f"{k(s['ans_rate']):>6}/s ({100 * s['ans_rate'] / rate:5.1f} %{', generator-bound' if s['gen_bound'] else ''}; "
                    f"tap drops {s['tap_tx_drop']}; host CPU {s['host_busy_pct']} %: QEMU {s['qemu_cpu_pct']}, kxdpgun {s['kx_cpu_pct']})")
            if a.lat_secs > 0:
                d = self.dnsperf(rep, server, rate, a.lat_secs)
                if "lat_avg" in d:
                    line += f", dnsperf {k(d.get('dp_qps'))}/s latency avg {d['lat_avg']:.2f} ms max {d.get('lat_max', 0):.1f} ms"
            log(f"{line}  [{self.progress()}]")
        over = max(1000, int(round(2 * peak / 1000.0)) * 1000)
        g0 = guest_counters(self.vm)
        s = self.kx(rep, server, "overload", over, a.step_secs)
        g1 = guest_counters(self.vm)
        # Where the overload's queries went: delivered to the guest (virtio rx), answered by the
        # XDP program (XDP_TX), redirected to AF_XDP sockets, dropped by XDP (knotd: its socket's
        # RX ring full), received by the kernel's UDP.
        s["guest"] = {key: g1[key] - g0.get(key, 0) for key in g1 if g1[key] is not None and g0.get(key) is not None}
        s["peak"] = peak
        s["of_peak"] = s["ans_rate"] / peak if peak else None
        log(f"rep {rep}/{a.reps} {server:<10} overload {k(over, 0)} offered (2 x peak {k(peak)}; sent {k(s['sent_rate'])}/s"
            f"{', generator-bound' if s['gen_bound'] else ''}; tap drops {s['tap_tx_drop']}): answered "
            f"{k(s['ans_rate'])}/s = {100 * (s['of_peak'] or 0):.1f} % of peak  [{self.progress()}]")
        g = s["guest"]
        log(f"   the overload in the guest: virtio rx {g.get('packets')}, XDP_TX {g.get('xdp_tx')}, XDP redirects "
            f"{g.get('xdp_redirects')}, XDP drops {g.get('xdp_drops')}, kernel UDP {g.get('udp_in')}; host: kxdpgun sent "
            f"{s['sent']}, tap drops {s['tap_tx_drop']}, answers {s['answered']}")
        c1 = guest_counters(self.vm)
        delta = {key: c1[key] - c0.get(key, 0) for key in c1 if c1[key] is not None and c0.get(key) is not None}
        info = dict(rep=rep, server=server, guest=delta)
        if prog0 is not None:
            prog1 = self.skuad_counters()
            info["skuad_prog_answered"] = prog1[0].get("answered", 0) - prog0[0].get("answered", 0)
            info["skuad_queue_answered"] = (sum(q["answered"] for q in prog1[1].values())
                                            - sum(q["answered"] for q in prog0[1].values()))
        log(f"   guest: kernel UDP datagrams +{delta.get('udp_in')}, virtio rx +{delta.get('packets')}, XDP_TX "
            f"+{delta.get('xdp_tx')}, XDP redirects +{delta.get('xdp_redirects')}, XDP drops +{delta.get('xdp_drops')}"
            + (f"; skuad: answered in the XDP program +{info['skuad_prog_answered']}, by the AF_XDP workers "
               f"+{info['skuad_queue_answered']}" if prog0 is not None else ""))
        return info

    def skuad_counters(self):
        return vmmod.dump_counters(self.vm)


# ------------------------------------------------------------------------------ summary
def summarize(res):
    steps = res["steps"]
    servers = res["meta"]["servers"]
    rates = res["meta"]["rates"]
    S = {}
    for srv in servers:
        d = S[srv] = {"rates": {}}
        for r in rates:
            kx = [s for s in steps if s["server"] == srv and s["phase"] == "rate" and s["offered"] == r]
            lat = [s for s in steps if s["server"] == srv and s["phase"] == "latency" and s["offered"] == r]
            d["rates"][r] = dict(
                ans=med([s["ans_rate"] for s in kx]), sent=med([s["sent_rate"] for s in kx]),
                gen=sum(s["gen_bound"] for s in kx), runs=[round(s["ans_rate"]) for s in kx],
                lat_avg=med([s.get("lat_avg") for s in lat]), lat_max=med([s.get("lat_max") for s in lat]),
                dp_qps=med([s.get("dp_qps") for s in lat]))
        best = max(((v["ans"], r) for r, v in d["rates"].items() if v["ans"] is not None), default=(None, None))
        d["peak"], d["peak_at"] = best
        ov = [s for s in steps if s["server"] == srv and s["phase"] == "overload"]
        d["over_offered"] = med([s["offered"] for s in ov])
        d["over_sent"] = med([s["sent_rate"] for s in ov])
        d["over_ans"] = med([s["ans_rate"] for s in ov])
        d["over_of_peak"] = med([s.get("of_peak") for s in ov])
        d["over_runs"] = [f"{k(s['ans_rate'])}/{k(s['peak'])}" for s in ov]
        d["over_gen"] = sum(s["gen_bound"] for s in ov)
    return S


def summary_text(res, S):
    m = res["meta"]
    servers, rates = m["servers"], m["rates"]
    L = []
    p = L.append
    p(f"== just bench: the appliance in QEMU ({m['accel'].upper()}, -smp {m['smp']}, {m['queues']} queue(s)), "
      f"{m['reps']} repetition(s), medians; kxdpgun {m['step_secs']} s per step, dnsperf {m['lat_secs']} s")
    p("")
    p("answered qps (receiver side: the host's tap) at each offered rate; G = kxdpgun sent < 95 % of the rate")
    p(f"{'server':<11}" + "".join(f"{k(r, 0):>9}" for r in rates) + f"{'peak':>10}{'2x peak: offered':>18}{'sent':>8}{'answered':>10}{'of peak':>9}")
    for srv in servers:
        d = S[srv]
        line = f"{srv:<11}"
        for r in rates:
            v = d["rates"][r]
            line += f"{k(v['ans']) + ('G' if v['gen'] else ''):>9}"
        of = "-" if d["over_of_peak"] is None else f"{100 * d['over_of_peak']:.0f} %"
        line += (f"{k(d['peak']):>10}{k(d['over_offered'], 0) + ('G' if d['over_gen'] else ''):>18}{k(d['over_sent']):>8}"
                 f"{k(d['over_ans']):>10}{of:>9}")
        p(line)
    if m["lat_secs"] > 0:
        p("")
        p("latency, dnsperf at the same offered rates (-Q RATE -c 4 -q %d -t 1): average ms [max ms] (qps dnsperf achieved)"
          % m["dnsperf_outstanding"])
        p(f"{'server':<11}" + "".join(f"{k(r, 0):>22}" for r in rates))
        for srv in servers:
            line = f"{srv:<11}"
            for r in rates:
                v = S[srv]["rates"][r]
                cell = "-" if v["lat_avg"] is None else f"{v['lat_avg']:.2f} [{v['lat_max'] or 0:.0f}] ({k(v['dp_qps'], 0)})"
                line += f"{cell:>22}"
            p(line)
    p("")
    p("per repetition: answered at each rate | overload answered/peak")
    for srv in servers:
        runs = " ".join(f"{k(r, 0)}:" + ",".join(f"{x / 1000:.1f}" for x in S[srv]["rates"][r]["runs"]) for r in rates)
        p(f"  {srv:<10} {runs} | {' '.join(S[srv]['over_runs'])}")
    p("")
    p("overload steps, where the queries went: sent by kxdpgun = dropped at the tap (QEMU did not read them) + delivered to")
    p("the guest (virtio rx); in the guest: answered by the XDP program (XDP_TX), redirected to AF_XDP, dropped by XDP, kernel UDP")
    for s in res["steps"]:
        if s["phase"] != "overload" or "guest" not in s:
            continue
        g = s["guest"]
        p(f"  rep {s['rep']} {s['server']:<10} sent {s['sent']}, tap drops {s['tap_tx_drop']}, virtio rx {g.get('packets')}: "
          f"XDP_TX {g.get('xdp_tx')}, redirects {g.get('xdp_redirects')}, XDP drops {g.get('xdp_drops')}, kernel UDP "
          f"{g.get('udp_in')}; answers at the tap {s['answered']}")
    p("per server (whole run): guest counters")
    for c in res.get("checks", []):
        g = c["guest"]
        extra = ""
        if "skuad_prog_answered" in c:
            extra = f", skuad: XDP program answered {c['skuad_prog_answered']}, AF_XDP workers {c['skuad_queue_answered']}"
        p(f"  rep {c['rep']} {c['server']:<10} guest: kernel UDP datagrams +{g.get('udp_in')}, XDP_TX +{g.get('xdp_tx')}, "
          f"XDP redirects +{g.get('xdp_redirects')}, XDP drops +{g.get('xdp_drops')}{extra}")
    p("")

    def ratio(a, b):
        return None if a is None or b is None or b == 0 else a / b

    targets = {}
    if "skuad-xdp" in S:
        x = S["skuad-xdp"]
        for other in ("knotd-xdp", "skuad-sock"):
            if other in S:
                rr = ratio(x["peak"], S[other]["peak"])
                per = ", ".join(f"{k(r, 0)} {ratio(x['rates'][r]['ans'], S[other]['rates'][r]['ans']):.2f}"
                                for r in rates if ratio(x['rates'][r]['ans'], S[other]['rates'][r]['ans']) is not None)
                p(f"skuad-xdp / {other}: peak {'-' if rr is None else f'{rr:.2f}'}; at each offered rate: {per}")
        rk = ratio(x["peak"], S["knotd-xdp"]["peak"]) if "knotd-xdp" in S else None
        if rk is not None:
            targets["peak_vs_knotd"] = rk
            p(f"target 1: skuad-xdp peak >= 1.5 x knotd-xdp peak: {rk:.2f} x -> {'MET' if rk >= 1.5 else 'NOT MET'}")
        if x["over_of_peak"] is not None:
            targets["overload_of_peak"] = x["over_of_peak"]
            p(f"target 2: skuad-xdp at 2 x its peak answers >= 90 % of the peak: {100 * x['over_of_peak']:.1f} % -> "
              f"{'MET' if x['over_of_peak'] >= 0.9 else 'NOT MET'}")
        for other in ("knotd-xdp", "skuad-sock"):
            if other in S and S[other]["over_of_peak"] is not None:
                p(f"          ({other} at 2 x its peak: {100 * S[other]['over_of_peak']:.1f} % of its peak)")
    res["targets"] = targets
    p("")
    b = res.get("boot") or {}
    if b:
        p(f"boot, s after QEMU start ({m['accel'].upper()}, the built-in configuration): first answered query "
          f"{b.get('first_answer_s', '-')}; the kernel started at {b.get('kernel_start_s', '-')}, skuad's XDP self-test "
          f"passed at {b.get('selftest_s', '-')} (guest kernel time + kernel start)")
    z = res.get("sizes") or {}
    if z:
        p(f"image {z['disk']}: {z['allocated_mb']} MB allocated, {z['apparent_mb']} MB apparent; update bundle "
          f"{z.get('bundle_mb', '-')} MB")
    p(f"QEMU: {' '.join(m.get('qemu_cmdline') or ['?'])}")
    p(f"host: {m['host_cpu']} x {m['host_cpus']}, kernel {m['host_kernel']}; other jobs {m['background_pct']} % CPU at start; "
      f"kxdpgun {m['kx_version']}, dnsperf {m['dnsperf_version']}; kxdpgun: {m.get('kx_mode') or '?'}")
    p(f"skuad {m['git']}; command: {m['command']}")
    return "\n".join(L)


# ------------------------------------------------------------------------------ plot
def plot(res, S, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter
    m = res["meta"]
    rates = m["rates"]
    with_lat = m["lat_secs"] > 0
    fig, axes = plt.subplots(1, 2 if with_lat else 1, figsize=(13 if with_lat else 8, 5.5), dpi=110)
    ax = axes[0] if with_lat else axes
    marks = {"skuad-xdp": "o", "skuad-sock": "s", "knotd-xdp": "^"}
    fmt = FuncFormatter(lambda v, _: f"{v / 1e3:g}k")
    for srv in m["servers"]:
        d = S[srv]
        xs = [r for r in rates if d["rates"][r]["ans"] is not None]
        line, = ax.plot(xs, [d["rates"][r]["ans"] for r in xs], marker=marks.get(srv, "x"), label=srv)
        ov = [s for s in res["steps"] if s["server"] == srv and s["phase"] == "overload"]
        if ov:
            ax.scatter([s["offered"] for s in ov], [s["ans_rate"] for s in ov], marker=marks.get(srv, "x"),
                       facecolors="none", edgecolors=line.get_color(), s=60,
                       label=f"{srv}: 2 x its peak (each repetition)")
    top = max([r for r in rates] + [s["offered"] for s in res["steps"] if s["phase"] == "overload"])
    ax.plot([0, top], [0, top], color="grey", lw=0.8, ls="--", label="answered = offered")
    ax.set_xlabel("offered qps (kxdpgun -Q)")
    ax.set_ylabel("answered qps (host tap, receiver side)")
    ax.xaxis.set_major_formatter(fmt)
    ax.yaxis.set_major_formatter(fmt)
    ax.set_xlim(0, top * 1.05)
    ax.set_ylim(0, None)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"answered vs offered (medians of {m['reps']})")
    if with_lat:
        ax2 = axes[1]
        for srv in m["servers"]:
            d = S[srv]
            xs = [r for r in rates if d["rates"][r]["lat_avg"] is not None]
            line, = ax2.plot(xs, [d["rates"][r]["lat_avg"] for r in xs], marker=marks.get(srv, "x"), label=f"{srv} average")
            sat = [r for r in xs if (d["rates"][r]["dp_qps"] or 0) < 0.95 * r]
            ax2.scatter(sat, [d["rates"][r]["lat_avg"] for r in sat], marker=marks.get(srv, "x"), s=60, zorder=3,
                        facecolors="white", edgecolors=line.get_color())
        ax2.set_yscale("log")
        ax2.set_xlabel("offered qps (dnsperf -Q)")
        ax2.set_ylabel("latency, ms (dnsperf average)")
        ax2.xaxis.set_major_formatter(fmt)
        ax2.grid(True, which="both", alpha=0.3)
        ax2.legend(fontsize=8)
        ax2.set_title("latency vs offered (hollow: dnsperf reached < 95 % of the rate, i.e. saturated)", fontsize=10)
    fig.suptitle(f"Skua appliance in QEMU ({m['accel'].upper()}, -smp {m['smp']}, {m['queues']} queue(s)): "
                 f"skuad-XDP vs skuad sockets vs knotd-XDP, load from the host's tap")
    fig.tight_layout()
    fig.savefig(path)


def plot_gnuplot(res, S, path, work):
    m = res["meta"]
    dat = os.path.join(work, "plot.dat")
    with open(dat, "w") as f:
        for srv in m["servers"]:
            f.write(f"# {srv}\n")
            for r in m["rates"]:
                v = S[srv]["rates"][r]
                f.write(f"{r} {v['ans'] if v['ans'] is not None else 'NaN'} {v['lat_avg'] if v['lat_avg'] is not None else 'NaN'}\n")
            f.write("\n\n")
    plots = ", ".join(f"'{dat}' index {i} using 1:2 with linespoints title '{srv}'" for i, srv in enumerate(m["servers"]))
    lats = ", ".join(f"'{dat}' index {i} using 1:3 with linespoints title '{srv}'" for i, srv in enumerate(m["servers"]))
    script = (f"set terminal pngcairo size 1300,550; set output '{path}'; set multiplot layout 1,2;"
              f"set xlabel 'offered qps'; set ylabel 'answered qps'; set grid; plot {plots}, x title 'answered = offered' dt 2;"
              f"set logscale y; set ylabel 'latency ms (dnsperf average)'; plot {lats}; unset multiplot")
    subprocess.run(["gnuplot", "-e", script], check=True, timeout=60)


def make_plot(res, S, out):
    path = os.path.join(out, "bench.png")
    try:
        import matplotlib  # noqa: F401
        plot(res, S, path)
        return path
    except ImportError:
        pass
    if os.path.exists(VENV_PY) and subprocess.run([VENV_PY, "-c", "import matplotlib"], capture_output=True).returncode == 0:
        r = subprocess.run([VENV_PY, os.path.abspath(__file__), "--plot-only", os.path.join(out, "results.json")],
                           capture_output=True, text=True, timeout=120)
        if r.returncode == 0:
            return path
        log(f"plot with {VENV_PY} failed: {r.stderr.strip()[-300:]}")
    if shutil.which("gnuplot"):
        plot_gnuplot(res, S, path, out)
        return path
    log("no plot: neither matplotlib (here or in /tmp/skua-bench-venv: tests/bench/xdp.sh --deps-only) nor gnuplot")
    return None


# ------------------------------------------------------------------------------ main
def sizes(disk):
    st = os.stat(disk)
    z = dict(disk=os.path.relpath(disk, ROOT) if disk.startswith(ROOT) else disk,
             allocated_mb=round(st.st_blocks * 512 / 1e6), apparent_mb=round(st.st_size / 1e6))
    bundle = re.sub(r"\.raw$", ".update", disk)
    if os.path.exists(bundle):
        z["bundle_mb"] = round(os.path.getsize(bundle) / 1e6)
    return z


def background_busy():
    def ticks():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return v[0] + v[1] + v[2] + v[5] + v[6], sum(v)
    b0, t0 = ticks()
    time.sleep(1)
    b1, t1 = ticks()
    return round(100 * (b1 - b0) / max(1, t1 - t0))


def tool_version(cmd):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        return (r.stdout + r.stderr).strip().splitlines()[-1]
    except Exception:  # noqa: BLE001
        return "?"


KTS = re.compile(r"^\[\s*(\d+\.\d+)\]", re.M)


def boot_phase(vm, timeout):
    """Seconds from QEMU start to the first answer to ns.skua.test. A (the built-in
    configuration) from the host, polled with kdig (1 s timeout, so about 1 s of resolution):
    whichever path answers it (skuad serves its kernel sockets while it attaches XDP). Also
    when skuad's XDP self-test passed, from the guest kernel's timestamp on that console line
    plus the kernel's start (QEMU time minus the newest kernel timestamp on the console, at its
    smallest over the polls): the serial console itself lags by seconds, its lines' arrival
    times would not do."""
    t = {}
    offset = None
    deadline = time.monotonic() + timeout
    while True:
        now = time.monotonic() - vm.started
        stamps = KTS.findall(vm.console())
        if stamps:
            o = now - float(stamps[-1])
            offset = o if offset is None else min(offset, o)
        if "first_answer_s" in t and "self-test passed on eth0" in vm.console():
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"no answer and XDP self-test within {timeout} s of QEMU start ({t})")
        if vm.proc.poll() is not None:
            raise RuntimeError(f"QEMU exited ({vm.proc.returncode})")
        if "first_answer_s" not in t and vm.kdig("ns.skua.test.", timeout=1, tries=1) == GUEST:
            t["first_answer_s"] = round(time.monotonic() - vm.started, 1)
        else:
            time.sleep(0.2)
    m = re.search(r"^\[\s*(\d+\.\d+)\][^\n]*self-test passed on eth0", vm.console(), re.M)
    if m and offset is not None:
        t["kernel_start_s"] = round(offset, 1)
        t["selftest_s"] = round(offset + float(m.group(1)), 1)
    return t


def build_image(args):
    cmd = ["bash", os.path.join(ROOT, "image/build.sh"), "--profile", "bench", "--out", BENCH_OUT, "1"]
    log(f"building the bench image: {' '.join(cmd)}")
    t = time.monotonic()
    r = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    logf = os.path.join(args.out, "build.log")
    with open(logf, "w") as f:
        f.write(r.stdout)
    if r.returncode != 0:
        print("\n".join(r.stdout.splitlines()[-30:]), file=sys.stderr)
        die(f"image/build.sh failed (log {logf})")
    last = [line for line in r.stdout.splitlines() if line.startswith("image: ")]
    log(f"built in {time.monotonic() - t:.0f} s: {last[-1] if last else ''}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help=f"1 repetition, rates {QUICK['rates']}, {QUICK['step_secs']} s kxdpgun + {QUICK['lat_secs']} s "
                        "dnsperf per rate (< 8 min with the build)")
    p.add_argument("--reps", type=int, help=f"repetitions, servers in a rotating order (default {FULL['reps']})")
    p.add_argument("--servers", default=",".join(SERVERS), help=f"comma-separated subset of {','.join(SERVERS)}")
    p.add_argument("--rates", help=f"offered rates, qps (default {FULL['rates']})")
    p.add_argument("--step-secs", type=int, help=f"seconds per kxdpgun step (default {FULL['step_secs']})")
    p.add_argument("--lat-secs", type=int, help=f"seconds per dnsperf latency step, 0 = none (default {FULL['lat_secs']})")
    p.add_argument("--warmup-secs", type=int, help=f"kxdpgun at the lowest rate after each switch, not counted (default "
                                                   f"{FULL['warmup_secs']}; 0 = none)")
    p.add_argument("--dnsperf-outstanding", type=int, default=1000, help="dnsperf -q (default 1000)")
    p.add_argument("--queues", type=int, default=1, help="virtio-net queues (tap queues = guest channels; default 1)")
    p.add_argument("--smp", type=int, default=2, help="guest vCPUs (default 2)")
    p.add_argument("--accel", choices=("tcg", "kvm"), default="tcg",
                   help="tcg (default; this host's /dev/kvm cannot run guests) or kvm (-cpu host, vhost=on if "
                        "/dev/vhost-net exists)")
    p.add_argument("--kx-affinity", help="kxdpgun -F (default: kxdpgun's own, 0s1)")
    p.add_argument("--disk", help="boot this image instead of building the bench profile (it must be one: "
                                  "knotd and /usr/lib/skua/bench; --boot-only takes any)")
    p.add_argument("--no-build", action="store_true", help=f"use the newest image in {os.path.relpath(BENCH_OUT, ROOT)}")
    p.add_argument("--boot-only", action="store_true", help="boot, time the first answer, print the image size, power off")
    p.add_argument("--boot-timeout", type=int, default=300, help="seconds from QEMU start to the first answer (default 300)")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--out", help="results directory (default /tmp/skua-vmbench-DATE)")
    p.add_argument("--plot-only", metavar="RESULTS_JSON", help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.plot_only:
        with open(args.plot_only) as f:
            res = json.load(f)
        res["meta"]["rates"] = [int(r) for r in res["meta"]["rates"]]
        plot(res, summarize(res), os.path.join(os.path.dirname(args.plot_only), "bench.png"))
        return 0

    base = QUICK if args.quick else FULL
    for key in ("reps", "rates", "step_secs", "lat_secs", "warmup_secs"):
        if getattr(args, key) is None:
            setattr(args, key, base[key])
    args.rate_list = [int(r) for r in str(args.rates).split(",") if r]
    args.server_list = [s for s in args.servers.split(",") if s]
    for s in args.server_list:
        if s not in SERVERS:
            p.error(f"unknown server {s} (known: {', '.join(SERVERS)})")
    if args.reps < 1 or args.step_secs < 1 or args.lat_secs < 0 or args.warmup_secs < 0 or not args.rate_list or min(args.rate_list) < 1:
        p.error("--reps, --step-secs and the rates must be >= 1, --lat-secs >= 0")
    if os.geteuid() != 0:
        die("run as root (network namespace, tap, QEMU, XDP on the tap)")
    for tool in ("kxdpgun", "kdig", "dnsperf", "qemu-system-x86_64", "ip"):
        if not shutil.which(tool):
            die(f"'{tool}' not found (apt-get install knot-dnsutils dnsperf; just deps for QEMU)")
    args.out = args.out or f"/tmp/skua-vmbench-{time.strftime('%Y%m%d-%H%M%S')}"
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    others = subprocess.run(["pgrep", "-x", "qemu-system-x86_64"], capture_output=True, text=True).stdout.split()
    if others:
        log(f"warning: other QEMU processes are running (pids {' '.join(others)}): they share the host's CPUs, "
            "figures will be lower and noisier")

    if args.disk:
        disk = os.path.abspath(args.disk)
    else:
        if not args.no_build:
            build_image(args)
        disk = vmmod.newest_image(BENCH_OUT)
        if not disk:
            die(f"no image in {BENCH_OUT}: run without --no-build")
    if not os.path.exists(disk):
        die(f"{disk} does not exist")

    # The query file: the zone's 10,000 names, shuffled with a fixed seed (as tests/bench/lib.sh).
    queries = os.path.join(args.out, "queries.txt")
    names = [f"h{i}.{ZONE} A" for i in range(NAMES)]
    random.Random(1).shuffle(names)
    with open(queries, "w") as f:
        f.write("\n".join(names) + "\n")

    res = {"meta": {}, "steps": [], "checks": []}
    m = res["meta"]
    m.update(servers=args.server_list, rates=args.rate_list, reps=args.reps, step_secs=args.step_secs, warmup_secs=args.warmup_secs,
             lat_secs=args.lat_secs, dnsperf_outstanding=args.dnsperf_outstanding, queues=args.queues, smp=args.smp,
             accel=args.accel, quick=args.quick, disk=disk, date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             command="python3 qemu/bench.py " + " ".join(sys.argv[1:]),
             host_kernel=os.uname().release, host_cpus=os.cpu_count(),
             host_cpu=next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?"),
             kx_version=tool_version(["kxdpgun", "-V"]), dnsperf_version=tool_version(["sh", "-c", "dnsperf -h 2>&1 | grep -i version"]),
             git=subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
             + ("" if subprocess.run(["git", "-C", ROOT, "diff", "--quiet", "HEAD", "--", "kernel-appliance", "image"]).returncode == 0
                else " (work tree modified)"))
    m["background_pct"] = background_busy()
    res["sizes"] = sizes(disk)
    z = res["sizes"]
    log(f"image {z['disk']}: {z['allocated_mb']} MB allocated, {z['apparent_mb']} MB apparent"
        + (f"; update bundle {z['bundle_mb']} MB" if "bundle_mb" in z else ""))
    log(f"results in {args.out}; other jobs use {m['background_pct']} % of the host's CPUs")

    vm = BenchVM(disk, accel=args.accel, queues=args.queues, smp=args.smp, name="skua-bench", snapshot=True)
    ok = False
    try:
        vm.start()
        m["qemu_cmdline"] = vm.cmdline
        log(f"QEMU: {' '.join(vm.cmdline or [])}")
        # The host knows the guest's MAC (qemu/vm.py sets it): no ARP before the first query.
        vm.host(["ip", "neigh", "replace", GUEST, "lladdr", GUEST_MAC, "dev", vm.tap, "nud", "permanent"], timeout=30)
        res["boot"] = boot_phase(vm, args.boot_timeout)
        b = res["boot"]
        log(f"boot (s after QEMU start): first answer (ns.skua.test. A from the host) {b['first_answer_s']}; kernel "
            f"started at {b.get('kernel_start_s', '?')}, skuad's XDP self-test passed at {b.get('selftest_s', '?')} "
            "(guest kernel time + kernel start)")
        vm.wait_for(r"root@skua", 120, what="the root console")
        if args.boot_only:
            ok = True
            return 0
        out = vm.guest(f"nproc; ethtool -l eth0 | grep -A4 Current | grep Combined; "
                       f"echo ZONE_RECORDS=$(grep -c '^h[0-9]' {BENCH_DIR}/bench.zone); knotd --version", check=False)
        log("   " + " | ".join(line.strip() for line in out.splitlines() if line.strip()))
        if not re.search(rf"ZONE_RECORDS={NAMES}\b", out):
            die(f"{disk} is not a bench image with the {NAMES}-name zone ({BENCH_DIR}/bench.zone): "
                "build one with image/build.sh --profile bench")
        r = vm.host(["cat", f"/sys/class/net/{vm.tap}/address"], timeout=30)
        bench = Bench(vm, args, args.out, queries)
        bench.host_mac = r.stdout.strip()
        # Static neighbours on the guest too (skuad-sock replies through the kernel's ARP table).
        vm.guest(f"ip neigh replace {HOST_IP} lladdr {bench.host_mac} dev eth0 nud permanent")
        n = len(args.server_list)
        per = len(args.rate_list) * (2 if args.lat_secs > 0 else 1) + 1 + (1 if args.warmup_secs > 0 else 0)
        bench.total = args.reps * n * per
        bench.t_start = time.monotonic()
        est = args.reps * n * (20 + args.warmup_secs + len(args.rate_list) * (args.step_secs + args.lat_secs + 2.5)
                               + args.step_secs + 5)
        log(f"{args.reps} repetition(s) x {n} servers x ({len(args.rate_list)} rates + overload): {bench.total} steps, "
            f"about {hms(est)}")
        for rep in range(1, args.reps + 1):
            for i in range(n):
                srv = args.server_list[(i + rep - 1) % n]
                switch_to(vm, srv, args)
                res["checks"].append(bench.run_server(rep, srv))
                res["steps"] = bench.steps
        m["kx_mode"] = next((s["kx_mode"] for s in bench.steps if s.get("kx_mode")), None)
        vm.guest(STOP_ALL, 120, check=False)
        ok = True
    except KeyboardInterrupt:
        log("interrupted")
    except Exception as e:  # noqa: BLE001 - any failure ends the run with the console shown
        log(f"FAILED: {e}")
        print("---- console (last 40 lines) ----", file=sys.stderr)
        print("\n".join(vm.console().splitlines()[-40:]), file=sys.stderr)
    finally:
        if os.path.exists(vm.console_log + ".raw"):
            shutil.copy(vm.console_log + ".raw", os.path.join(args.out, "console.log"))
        rc = vm.stop(timeout=60)
        log(f"QEMU exited with {rc}")
        vm.cleanup()
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(res, f, indent=1)
    if args.boot_only:
        return 0 if ok else 1
    if not res["steps"]:
        return 1
    with open(os.path.join(args.out, "steps.tsv"), "w") as f:
        keys = sorted({key for s in res["steps"] for key in s})
        f.write("\t".join(keys) + "\n")
        for s in res["steps"]:
            f.write("\t".join(str(s.get(key, "")) for key in keys) + "\n")
    S = summarize(res)
    text = summary_text(res, S)
    with open(os.path.join(args.out, "summary.txt"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    print()
    print(text)
    if not args.no_plot:
        path = make_plot(res, S, args.out)
        if path:
            log(f"plot: {path}")
    log(f"summary {args.out}/summary.txt, every step {args.out}/steps.tsv, logs {args.out}/logs, total {hms(time.monotonic() - T0)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
