#!/usr/bin/python3
"""Two skuad + skua-agent nodes in network namespaces on a bridge, and a client asking the
service address (VIP) every 10 ms; answers are counted per node **on the wire** (the
client's packet socket sees each reply's Ethernet source).

Usage (root): ha.py BINDIR WORKDIR SCENARIO... [--repeat N] [--json OUT]
              ha.py BINDIR WORKDIR --bench N [--json OUT]   (just bench-ha: N kills each of
              skua-agent and keepalived, interleaved, then their CPU at 10 adverts/s)
  --priorities M,B: the two nodes' priorities (default 150,100).
  BINDIR has skuad and skua-agent; WORKDIR is scratch space.
  SCENARIOS: kill-agent, kill-skuad, stop-agent, release, link-down, partition,
  partition-kill, failback, all.

Topology (198.18.53.0/24, namespaces ha-sw, ha-n1, ha-n2, ha-c):
  ha-n1 eth0 198.18.53.1  --+
  ha-n2 eth0 198.18.53.2  --+-- br0 in ha-sw
  ha-c  eth0 198.18.53.100--+
  VIP 198.18.53.53 (VRRP VRID 51, advert 100 ms; n1 priority 150, n2 100, preempt).

Each scenario starts both nodes fresh, waits until n1 is master and answering, runs the
client, breaks n1 in one way, and measures:
  - failover: from the break to the first answer from n2;
  - lost: queries sent after the break never answered;
  - double: queries answered by both nodes, and 10 ms intervals in which answers came
    from both nodes (must be 0);
  - where it applies, failback: n1 restored, preemption moves the VIP back, same checks.
Exit status 0 only when every check holds.
"""

import ctypes
import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import netns
from netns import FAILED, check, mac, ns, sh

BIN, WORK = sys.argv[1], sys.argv[2]
ARGS = sys.argv[3:]
NODES = {"n1": ("198.18.53.1", 150), "n2": ("198.18.53.2", 100)}
VIP = "198.18.53.53"
CLIENT = "198.18.53.100"
ADVERT_MS = 100
RESULTS = []
SYNC_TOKEN = "sync-token-0123456789abcdef"
# "skua" (skuad + skua-agent) or "keepalived" (Unbound with ip-freebind + keepalived, the
# usual setup today), for the benchmark's side-by-side runs.
PEER = "skua"
# --xdp: skuad with its AF_XDP dataplane on the node's eth0 (a veth: the XDP program answers
# the node's own address itself); the VIP must still be answered only under the lease.
XDP = False


NAMESPACES = ("ha-n1", "ha-n2", "ha-c", "ha-sw")


def teardown():
    netns.teardown(NAMESPACES)


def topology():
    netns.bridge("ha-sw", [("ha-n1", "198.18.53.1/24", None), ("ha-n2", "198.18.53.2/24", None),
                           ("ha-c", f"{CLIENT}/24", None)], "hap")


class Node:
    def __init__(self, name):
        self.name = name
        self.addr, self.prio = NODES[name]
        self.ns = "ha-" + name
        self.dir = os.path.join(WORK, name)
        os.makedirs(self.dir, exist_ok=True)
        self.ctl = os.path.join(self.dir, "control.sock")
        self.skuad = None
        self.agent = None
        peer = [a for n, (a, _) in NODES.items() if n != name][0]
        # Each run starts afresh: no API data, an empty shared file, a new audit log.
        for f in ("state.conf", "audit.log", "audit.log.checkpoint"):
            if os.path.exists(os.path.join(self.dir, f)):
                os.remove(os.path.join(self.dir, f))
        with open(os.path.join(self.dir, "shared.conf"), "w") as f:
            f.write("server:\n")
        secret(os.path.join(self.dir, "sync.token"), SYNC_TOKEN)
        secret(os.path.join(self.dir, "audit.key"), "5a" * 32)
        # Both nodes follow each other (sync:): the data flow from the lease holder.
        with open(os.path.join(self.dir, "skuad.conf"), "w") as f:
            f.write(f"""server:
  interface: {self.addr}
  port: 53
  access-control: 198.18.0.0/15 allow
  local-zone: "example." static
  local-data: "a.example. 60 IN A 198.18.0.{1 if name == 'n1' else 2}"
include: "{self.dir}/shared.conf"
ha:
  address: {VIP}
api:
  interface: 127.0.0.1@8053
  interface: {self.addr}@8053
  control-socket: "{self.ctl}"
  state-file: "{self.dir}/state.conf"
  token: "sync sync sha256:{hashlib.sha256(SYNC_TOKEN.encode()).hexdigest()}"
audit:
  log: "{self.dir}/audit.log"
  key: file:{self.dir}/audit.key
sync:
  from: http://{peer}:8053
  token-file: "{self.dir}/sync.token"
  shared-config: "{self.dir}/shared.conf"
  wait: 5
""")
        with open(os.path.join(self.dir, "agent.toml"), "w") as f:
            f.write(f"""[agent]
name = "{name}"
skuad = "unix:{self.ctl}"
listen = "127.0.0.1:9853"

[[vrrp]]
name = "dns4"
interface = "eth0"
vrid = 51
priority = {self.prio}
advert_interval_ms = {ADVERT_MS}
addresses = ["{VIP}/32"]
""")

    def start_skuad(self):
        if PEER == "keepalived":
            return self.start_unbound()
        log = open(os.path.join(self.dir, "skuad.log"), "a")
        self.skuad = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, os.path.join(BIN, "skuad"),
             "--xdp-required" if XDP else "--no-xdp",
             "--config", os.path.join(self.dir, "skuad.conf")],
            stdout=log, stderr=log)
        deadline = time.time() + 20
        while time.time() < deadline:
            if os.path.exists(self.ctl):
                return
            time.sleep(0.05)
        raise RuntimeError(f"{self.name}: skuad did not start")

    def start_unbound(self):
        conf = os.path.join(self.dir, "unbound.conf")
        with open(conf, "w") as f:
            f.write(f"""server:
  interface: {self.addr}
  interface: {VIP}
  ip-freebind: yes
  port: 53
  access-control: 198.18.0.0/15 allow
  local-zone: "example." static
  local-data: "a.example. 60 IN A 198.18.0.{1 if self.name == 'n1' else 2}"
  username: ""
  chroot: ""
  directory: "{self.dir}"
  pidfile: "{self.dir}/unbound.pid"
  do-daemonize: no
  use-syslog: no
  num-threads: 1
remote-control:
  control-enable: no
""")
        log = open(os.path.join(self.dir, "unbound.log"), "a")
        self.skuad = subprocess.Popen(["ip", "netns", "exec", self.ns, "unbound", "-d", "-c", conf],
                                      stdout=log, stderr=log)
        deadline = time.time() + 20
        while time.time() < deadline:
            r = ns(self.ns, "dig", "+short", "+tries=1", "+time=1", f"@{self.addr}",
                   "a.example.", check=False)
            if r.stdout.strip():
                return
            time.sleep(0.1)
        raise RuntimeError(f"{self.name}: unbound did not start")

    def start_keepalived(self):
        conf = os.path.join(self.dir, "keepalived.conf")
        with open(conf, "w") as f:
            f.write(f"""global_defs {{
  vrrp_version 3
}}
vrrp_instance VI_1 {{
  interface eth0
  state BACKUP
  virtual_router_id 51
  priority {self.prio}
  advert_int {ADVERT_MS / 1000}
  virtual_ipaddress {{
    {VIP}/32
  }}
}}
""")
        self.ka_log = os.path.join(self.dir, "keepalived.log")
        log = open(self.ka_log, "a")
        # Its own process group: kill -9 reaches the parent and its VRRP child at once.
        self.agent = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, "keepalived", "-n", "-l", "-D", "-f", conf,
             "-p", os.path.join(self.dir, "k.pid"), "-r", os.path.join(self.dir, "v.pid")],
            stdout=log, stderr=log, start_new_session=True)

    def start_agent(self):
        if PEER == "keepalived":
            return self.start_keepalived()
        log = open(os.path.join(self.dir, "agent.log"), "a")
        self.agent = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, os.path.join(BIN, "skua-agent"),
             "--config", os.path.join(self.dir, "agent.toml")],
            stdout=log, stderr=log)

    def status(self):
        if PEER == "keepalived":
            # keepalived: master while the VIP is on its interface.
            if self.agent is None:
                return None
            held = f" {VIP}/" in ns(self.ns, "ip", "-o", "addr", "show", "dev", "eth0").stdout
            return {"state": "master" if held else "backup", "lease": "held" if held else "idle"}
        r = ns(self.ns, "curl", "-s", "-m", "1", "http://127.0.0.1:9853/status", check=False)
        try:
            return json.loads(r.stdout)["instances"][0]
        except (ValueError, KeyError, IndexError):
            return None

    def kill(self, which, sig=signal.SIGKILL):
        if PEER == "keepalived" and which == "agent":
            # keepalived forks its VRRP child: the whole process group at once (a parent
            # killed first would let the child see it die and leave gracefully).
            if self.agent and self.agent.poll() is None:
                try:
                    os.killpg(self.agent.pid, sig)
                except ProcessLookupError:
                    pass
                self.agent.wait(timeout=10)
            self.agent = None
            return
        p = getattr(self, which)
        if p and p.poll() is None:
            # `ip netns exec` execs the program: the pid is the program's.
            os.kill(p.pid, sig)
            p.wait(timeout=10)
        setattr(self, which, None)

    def stop(self):
        self.kill("agent", signal.SIGTERM)
        self.kill("skuad", signal.SIGTERM)


def secret(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)


def answer(node, qname):
    """The A record node answers for qname (asked from the client namespace), or ''."""
    r = ns("ha-c", "dig", "+short", "+time=1", "+tries=1", f"@{node.addr}", qname, "A",
           check=False)
    return r.stdout.strip()


def skuactl(node, *args):
    return ns(node.ns, os.path.join(BIN, "skuactl"), "--socket", node.ctl, *args, check=False)


def audit(node, kind):
    with open(os.path.join(node.dir, "audit.log")) as f:
        return [e for e in (json.loads(l) for l in f if l.strip()) if e["kind"] == kind]


def sync_scenario():
    """The shared configuration and API data follow the VRRP master through the API, with
    both audit logs recording each version: n1 master, n2 follows (at its start, then
    within the long-poll), n2 refuses writes; n1's agent killed, n2 master, n1 (its skuad
    still running, its lease over) follows n2."""
    name = "sync"
    print(f"== {name}", flush=True)
    topology()
    n1, n2 = Node("n1"), Node("n2")
    with open(os.path.join(n1.dir, "shared.conf"), "w") as f:
        f.write('server:\n  local-zone: "shared." static\n'
                '  local-data: "one.shared. 60 IN A 198.18.1.1"\n')
    n1.start_skuad()
    n1.start_agent()
    if not wait_for(lambda: master(n1), 10, f"{name}: n1 becomes master"):
        return
    out = skuactl(n1, "zone", "add", "api.example.", "static")
    check(out.returncode == 0, f"{name}: zone added on n1 ({out.stdout}{out.stderr})")
    out = skuactl(n1, "record", "add", "www.api.example. 60 IN A 198.18.2.2")
    check(out.returncode == 0, f"{name}: record added on n1 ({out.stdout}{out.stderr})")
    n2.start_skuad()
    n2.start_agent()
    wait_for(lambda: backup(n2), 10, f"{name}: n2 is backup")
    check(answer(n2, "one.shared.") == "198.18.1.1", f"{name}: n2 took n1's shared file at start")
    check(answer(n2, "www.api.example.") == "198.18.2.2", f"{name}: n2 took n1's API data at start")
    out = skuactl(n1, "record", "add", "mail.api.example. 60 IN A 198.18.2.3")
    t0 = time.monotonic()
    wait_for(lambda: answer(n2, "mail.api.example.") == "198.18.2.3", 3,
             f"{name}: an API write on the master reaches the backup")
    print(f"   write on n1 answered by n2 after {time.monotonic() - t0:.3f} s", flush=True)
    out = skuactl(n2, "record", "add", "x.api.example. 60 IN A 198.18.2.9")
    check(out.returncode != 0 and "follows http://198.18.53.1:8053" in out.stdout + out.stderr,
          f"{name}: the backup refuses writes, naming the master ({out.stdout}{out.stderr})")
    out = skuactl(n2, "status")
    check("following http://198.18.53.1:8053" in out.stdout,
          f"{name}: skuactl status on n2 says whom it follows:\n{out.stdout}")
    # The master's audit log has each version it sent (sync-out, to the token "sync" from
    # n2's address); the backup's has the same digests (sync-in, from n1).
    outs = {e["detail"]["digest"] for e in audit(n1, "sync-out")
            if e["actor"] == "sync" and e["source"] == NODES["n2"][0]}
    ins = [e["detail"]["digest"] for e in audit(n2, "sync-in")
           if e["detail"]["from"] == "http://198.18.53.1:8053"]
    check(len(ins) >= 2 and set(ins) <= outs,
          f"{name}: every sync-in on n2 has its sync-out on n1 ({ins} / {outs})")

    # Failover: n1's agent killed; n2 takes the lease and the writes; n1 follows n2.
    n1.kill("agent")
    wait_for(lambda: master(n2), 3, f"{name}: n2 master after n1's agent died")
    out = skuactl(n2, "record", "add", "new.api.example. 60 IN A 198.18.2.4")
    check(out.returncode == 0, f"{name}: the new master takes writes ({out.stdout}{out.stderr})")
    wait_for(lambda: answer(n1, "new.api.example.") == "198.18.2.4", 8,
             f"{name}: the old master follows the new one")
    out = skuactl(n1, "record", "add", "y.api.example. 60 IN A 198.18.2.9")
    check(out.returncode != 0 and "follows http://198.18.53.2:8053" in out.stdout + out.stderr,
          f"{name}: the old master refuses writes now ({out.stdout}{out.stderr})")
    back = [e for e in audit(n1, "sync-in") if e["detail"]["from"] == "http://198.18.53.2:8053"]
    check(len(back) >= 1, f"{name}: n1 recorded the version it took from n2 ({back})")
    for n in (n1, n2):
        out = sh(os.path.join(BIN, "skuactl"), "audit", "verify", os.path.join(n.dir, "audit.log"),
                 "--key-file", os.path.join(n.dir, "audit.key"), check=False)
        check(out.returncode == 0, f"{name}: {n.name}'s audit log verifies ({out.stdout}{out.stderr})")
    n1.stop()
    n2.stop()


def query(qid):
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in ("a", "example"):
        q += bytes([len(label)]) + label.encode()
    return q + b"\x00" + struct.pack(">HH", 1, 1)


def checksum(b):
    if len(b) % 2:
        b += b"\x00"
    s = sum(struct.unpack(f">{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def probe_frame(dst_mac, src_mac, sport, qid):
    """An Ethernet frame to one node's MAC carrying a DNS query to the VIP: whether that
    node answers the VIP, whatever the client's ARP cache says."""
    dns = query(qid)
    udp = struct.pack(">HHHH", sport, 53, 8 + len(dns), 0) + dns
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), qid, 0, 64, 17, 0,
                     socket.inet_aton(CLIENT), socket.inet_aton(VIP))
    ip = ip[:10] + struct.pack(">H", checksum(ip)) + ip[12:]
    return bytes.fromhex(dst_mac.replace(":", "")) + bytes.fromhex(src_mac.replace(":", "")) \
        + b"\x08\x00" + ip + udp


# DNS IDs: ordinary queries below 0x4000, probes to n1 0x4000-0x7fff, to n2 0x8000-0xbfff.
PROBE_BASE = {"n1": 0x4000, "n2": 0x8000}


class Client:
    """Sends a query to the VIP every 10 ms (IDs unique within a run) and records every
    reply frame's Ethernet source, as seen on the client's interface. Every 10 ms it also
    sends the same query straight to each node's MAC (probes): both nodes answering probes
    of one round means both answer the VIP at that moment, whichever the clients' ARP
    caches pick."""

    def __init__(self, macs):
        self.macs = macs
        self.sent = {}  # id -> time sent
        self.answers = []  # (time, id, src mac)
        self.probes = {}  # round -> time sent
        self.probe_answers = {}  # round -> set of nodes that answered
        self.stop = False

    def run(self, period=0.01):
        # Both sockets are opened inside the client's namespace (setns for this thread).
        fd = os.open("/var/run/netns/ha-c", os.O_RDONLY)
        # os.setns is Python 3.12+; setns(2) through libc works everywhere.
        if ctypes.CDLL(None, use_errno=True).setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
            raise OSError(ctypes.get_errno(), "setns")
        os.close(fd)
        raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
        raw.bind(("eth0", 0))
        raw.settimeout(0.001)
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind((CLIENT, 0))
        port = udp.getsockname()[1]
        qid = 0
        rnd = 0
        my_mac = open("/sys/class/net/eth0/address").read().strip()
        next_send = time.monotonic()
        while not self.stop:
            now = time.monotonic()
            if now >= next_send:
                qid = (qid + 1) % 0x4000
                self.sent[qid] = now
                try:
                    udp.sendto(query(qid), (VIP, 53))
                except OSError:
                    pass
                rnd = (rnd + 1) % 0x4000
                self.probes[rnd] = now
                self.probe_answers[rnd] = set()
                for n, base in PROBE_BASE.items():
                    try:
                        raw.send(probe_frame(self.macs[n], my_mac, port, base + rnd))
                    except OSError:
                        pass
                next_send += period
            try:
                frame = raw.recv(2048)
            except (socket.timeout, BlockingIOError):
                continue
            t = time.monotonic()
            if len(frame) < 14 + 20 + 8 + 12:
                continue
            src_mac = frame[6:12].hex(":")
            ihl = (frame[14] & 0x0F) * 4
            if frame[14 + 9] != 17:
                continue
            udp_off = 14 + ihl
            sport, dport = struct.unpack(">HH", frame[udp_off:udp_off + 4])
            if sport != 53 or dport != port:
                continue
            rid = struct.unpack(">H", frame[udp_off + 8:udp_off + 10])[0]
            if rid >= 0x4000:
                node = "n1" if rid < 0x8000 else "n2"
                r = rid & 0x3FFF
                if r in self.probe_answers:
                    self.probe_answers[r].add(node)
                continue
            self.answers.append((t, rid, src_mac))
            # Drain the socket's copy too (the kernel also delivers it to `udp`).
            try:
                udp.recv(2048, socket.MSG_DONTWAIT)
            except BlockingIOError:
                pass

    def start(self):
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def finish(self):
        self.stop = True
        self.thread.join(timeout=5)


def analyse(c, macs, t_break, t_end):
    """Failover time, losses and double answers after t_break."""
    by_id = {}
    for t, rid, m in c.answers:
        by_id.setdefault(rid, set()).add(m)
    sent_after = [rid for rid, t in c.sent.items() if t_break <= t <= t_end - 0.3]
    lost = [rid for rid in sent_after if rid not in by_id]
    double_ids = [rid for rid, ms in by_id.items() if len(ms) > 1]
    # Probe rounds (every 10 ms, one probe to each node's MAC) in which both nodes answered.
    double_intervals = sum(1 for r, t in c.probes.items()
                           if t_break - 1.0 <= t <= t_end and len(c.probe_answers[r]) > 1)
    # And, from the ordinary queries, 10 ms intervals with answers from both MACs.
    buckets = {}
    for t, rid, m in c.answers:
        buckets.setdefault(int(t * 100), set()).add(m)
    double_intervals += sum(1 for ms in buckets.values() if len(ms) > 1)
    first_n2 = min((t for t, rid, m in c.answers if m == macs["n2"] and t >= t_break),
                   default=None)
    last_n1 = max((t for t, rid, m in c.answers if m == macs["n1"]), default=None)
    return {
        "failover_s": None if first_n2 is None else round(first_n2 - t_break, 4),
        "n1_last_after_break_s": None if last_n1 is None else round(last_n1 - t_break, 4),
        "sent": len(sent_after),
        "lost": len(lost),
        "double_ids": len(double_ids),
        "double_intervals": double_intervals,
    }


# The longest a failback may leave the VIP unanswered: n2's priority-0 advert on its way,
# n1's lease taken from its skuad, the address added and announced (a few ms measured).
HANDOVER_MAX_S = 0.1


def handover(c, macs, t0, t_end):
    """The failback's handover after t0: the gap between the last query n2 answered and
    the first n1 answered (by their send times; None when n2 answered none, n1 never
    having given the VIP up), and the lost queries sent outside that gap."""
    who = {}
    for _, rid, m in c.answers:
        who.setdefault(rid, m)
    sent = {rid: t for rid, t in c.sent.items() if t0 <= t <= t_end - 0.3}
    n2 = [t for rid, t in sent.items() if who.get(rid) == macs["n2"]]
    n1 = [t for rid, t in sent.items() if who.get(rid) == macs["n1"]]
    lo = max(n2, default=None)
    hi = min((t for t in n1 if lo is None or t > lo), default=None)
    lost = [t for rid, t in sent.items() if rid not in who]
    inside = lambda t: lo is not None and hi is not None and lo < t < hi
    return {
        "gap_s": None if lo is None or hi is None else round(hi - lo, 4),
        "lost_inside": sum(1 for t in lost if inside(t)),
        "lost_outside": [round(t - t0, 4) for t in lost if not inside(t)],
    }


def wait_for(pred, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    check(False, what)
    return False


def master(node):
    s = node.status()
    return s is not None and s["state"] == "master" and s["lease"] == "held"


def backup(node):
    s = node.status()
    return s is not None and s["state"] == "backup"


def partition(node, on):
    if on:
        ns(node.ns, "nft", "add table inet havrrp")
        ns(node.ns, "nft", "add chain inet havrrp in { type filter hook input priority 0; }")
        ns(node.ns, "nft", "add chain inet havrrp out { type filter hook output priority 0; }")
        ns(node.ns, "nft", "add rule inet havrrp in ip protocol vrrp drop")
        ns(node.ns, "nft", "add rule inet havrrp out ip protocol vrrp drop")
    else:
        ns(node.ns, "nft", "delete table inet havrrp", check=False)


def scenario(name):
    print(f"== {name}", flush=True)
    topology()
    macs = {n: mac("ha-" + n) for n in NODES}
    n1, n2 = Node("n1"), Node("n2")
    for n in (n1, n2):
        n.start_skuad()
    n1.start_agent()
    if not wait_for(lambda: master(n1), 10, f"{name}: n1 becomes master and takes the lease"):
        return
    n2.start_agent()
    if not wait_for(lambda: backup(n2), 10, f"{name}: n2 is backup"):
        return
    if os.environ.get("HA_DEBUG"):
        time.sleep(1)
        print("  n1", n1.status())
        print("  n2", n2.status())
    c = Client(macs)
    c.start()
    time.sleep(1.0)
    before = len(c.answers)
    if XDP:
        # The backup's XDP program sees the probes to its MAC for the VIP and leaves them to
        # the kernel (no lease); the master's program answers the VIP itself (its local
        # data is compiled into the program).
        def prog(node, counter):
            out = ns(node.ns, os.path.join(BIN, "skuactl"), "--socket", node.ctl, "metrics",
                     check=False).stdout
            return sum(float(l.rsplit(" ", 1)[1]) for l in out.splitlines()
                       if l.startswith("skua_xdp_program_packets_total")
                       and f'counter="{counter}"' in l)
        check(prog(n2, "pass_no_lease") > 0,
              f"{name}: n2's XDP program passes the VIP without a lease ({prog(n2, 'pass_no_lease')})")
        xdp_n1 = prog(n1, "answered") + prog(n1, "redirected")
        check(xdp_n1 > 50,
              f"{name}: n1's XDP path serves the VIP under its lease ({xdp_n1} answered in the "
              f"program or redirected to its AF_XDP workers)")
    seen = sorted({m for _, _, m in c.answers})
    probed = sorted({n for a in c.probe_answers.values() for n in a})
    check(probed == ["n1"], f"{name}: before the break only n1 answers probes to its MAC ({probed})")
    if os.environ.get("HA_DEBUG"):
        t0 = min(c.sent.values())
        for t, rid, m in c.answers:
            if m != macs["n1"]:
                print("  other", round(t - t0, 4), rid, m, round(c.sent.get(rid, 0) - t0, 4))
    check(before > 50 and seen == [macs["n1"]],
          f"{name}: before the break only n1 answers the VIP ({before} answers from {seen}, "
          f"n1 is {macs['n1']}, n2 {macs['n2']}, client {mac('ha-c')})")
    t_break = time.monotonic()
    if name == "kill-agent":
        n1.kill("agent")
    elif name == "kill-skuad":
        n1.kill("skuad")
    elif name == "stop-agent":
        n1.kill("agent", signal.SIGTERM)
    elif name == "link-down":
        ns("ha-n1", "ip", "link", "set", "eth0", "down")
    elif name in ("partition", "partition-kill"):
        partition(n1, True)
    elif name == "release":
        # A manual failover: the operator revokes n1's lease with skuactl.
        out = ns("ha-n1", os.path.join(BIN, "skuactl"), "--socket", n1.ctl, "ha", "release")
        check("released" in out.stdout, f"{name}: skuactl ha release ({out.stdout.strip()})")
    elif name == "failback":
        n1.kill("agent")
    if name == "partition-kill":
        # Partitioned (n2 holds back, see "partition"), then n1's agent dies: its lease
        # ends, nobody answers n2's probe any more, n2 takes over.
        time.sleep(1.0)
        t_break = time.monotonic()
        n1.kill("agent")
        time.sleep(2.0)
    elif name == "partition":
        # Clients that resolve the address afresh (ARP broadcast) after the takeover must
        # reach only the new master: the old one, which cannot hear it, gave the address
        # up when it saw the new master's announcement.
        time.sleep(1.0)
        ns("ha-c", "ip", "neigh", "flush", "dev", "eth0")
        time.sleep(1.0)
    else:
        time.sleep(2.0)
    t_end = time.monotonic()
    r = analyse(c, macs, t_break, t_end)
    r["scenario"] = name
    r["peer"] = PEER
    print(f"   {json.dumps(r)}", flush=True)
    if name == "partition":
        # n2 hears nothing from n1 and becomes VRRP master, but n1 still answers the VIP:
        # n2 must not take it (the probe before taking over finds n1 answering).
        s2 = n2.status()
        check(r["failover_s"] is None and r["lost"] == 0,
              f"{name}: n1 keeps answering, n2 does not take over, nothing lost "
              f"({r['lost']} lost)")
        check(s2 is not None and s2["state"] == "master" and s2["lease"] == "conflict",
              f"{name}: n2 is VRRP master but holds back ({s2 and s2['lease']})")
    elif name == "release":
        # n2 takes over at once (n1 left with priority 0); n1 rejoins as backup after its
        # hold-down and, with the higher priority and preemption, takes the VIP back.
        check(r["failover_s"] is not None and r["failover_s"] < 0.3,
              f"{name}: n2 took over at once ({r['failover_s']} s)")
        check(wait_for(lambda: master(n1), 3, f"{name}: n1 master again") or False,
              f"{name}: n1 preempted back after its hold-down")
    else:
        check(r["failover_s"] is not None, f"{name}: n2 took over")
        check(wait_for(lambda: master(n2), 3, f"{name}: n2 master with the lease") or False,
              f"{name}: n2 is master")
    check(r["double_ids"] == 0 and r["double_intervals"] == 0,
          f"{name}: never both nodes answering ({r['double_ids']} queries, "
          f"{r['double_intervals']} 10 ms intervals)")
    if name in ("link-down", "partition", "failback"):
        # Restore n1: with preemption (priority 150 > 100) it takes the VIP back.
        t_restore = time.monotonic()
        if name == "link-down":
            ns("ha-n1", "ip", "link", "set", "eth0", "up")
        elif name == "partition":
            partition(n1, False)
        else:
            n1.start_agent()
        wait_for(lambda: master(n1), 5, f"{name}: n1 master again after the restore")
        time.sleep(1.0)
        t_end2 = time.monotonic()
        back = [t for t, _, m in c.answers if m == macs["n1"] and t >= t_restore]
        r2 = analyse(c, macs, t_restore, t_end2)
        r["failback_s"] = round(back[0] - t_restore, 4) if back else None
        r["failback_lost"] = r2["lost"]
        r["failback_double_ids"] = r2["double_ids"]
        r["failback_double_intervals"] = r2["double_intervals"]
        print(f"   failback: {json.dumps(r2)}", flush=True)
        check(bool(back), f"{name}: n1 answers (again) after the restore")
        check(wait_for(lambda: backup(n2), 3, f"{name}: n2 back to backup") or False,
              f"{name}: n2 is backup again")
        check(r2["double_ids"] == 0 and r2["double_intervals"] == 0,
              f"{name}: failback never has both nodes answering")
        # Nothing lost (docs/ha.md), but for the handover itself: n2 stops answering when
        # it yields, n1 answers once it heard n2 leave (priority 0), took the lease and
        # announced the address; the client's ARP cache points at n2 until then, so a
        # query sent in between reaches a node that no longer answers. That gap must be
        # short, and no query outside it may be lost.
        ho = handover(c, macs, t_restore, t_end2)
        r["failback_handover_s"] = ho["gap_s"]
        print(f"   failback handover: {json.dumps(ho)}", flush=True)
        check(not ho["lost_outside"],
              f"{name}: failback loses no query outside the handover "
              f"({ho['lost_outside']} of {r2['lost']} lost outside it)")
        check(ho["gap_s"] is None or ho["gap_s"] <= HANDOVER_MAX_S,
              f"{name}: the handover (no node answering) lasts {ho['gap_s']} s "
              f"(at most {HANDOVER_MAX_S} s)")
    if name == "kill-agent":
        out = ns("ha-n2", os.path.join(BIN, "skuactl"), "--socket", n2.ctl, "ha", "status",
                 check=False).stdout
        check(f"{VIP}" in out and " yes " in out and "master" in out and "held" in out,
              f"{name}: skuactl ha status on n2 shows the lease and the master:\n{out}")
    c.finish()
    RESULTS.append(r)
    n1.stop()
    n2.stop()


def cpu_ticks(nsname, comm):
    """utime + stime of every process named `comm` in the namespace, in clock ticks."""
    total = 0
    for pid in sh("ip", "netns", "pids", nsname).stdout.split():
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != comm:
                    continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            continue
    return total


def cpu(secs):
    """The agents' CPU at 10 adverts/s: master and backup, % of one core over `secs`."""
    out = {}
    topology()
    n1, n2 = Node("n1"), Node("n2")
    for n in (n1, n2):
        n.start_skuad()
    n1.start_agent()
    wait_for(lambda: master(n1), 10, "cpu: n1 master")
    n2.start_agent()
    wait_for(lambda: backup(n2), 10, "cpu: n2 backup")
    comm = "skua-agent" if PEER == "skua" else "keepalived"
    hz = os.sysconf("SC_CLK_TCK")
    a = {n: cpu_ticks(f"ha-{n}", comm) for n in NODES}
    time.sleep(secs)
    b = {n: cpu_ticks(f"ha-{n}", comm) for n in NODES}
    for n, role in (("n1", "master"), ("n2", "backup")):
        out[role] = round(100.0 * (b[n] - a[n]) / hz / secs, 3)
    n1.stop()
    n2.stop()
    return out


def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return None
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def bench(n, out):
    """`just bench-ha`: n kills of the master's agent (kill -9) for skua and keepalived,
    interleaved, then each one's CPU at 10 adverts/s."""
    global PEER
    runs = []
    for i in range(n):
        for peer in ("skua", "keepalived"):
            PEER = peer
            before = len(RESULTS)
            scenario("kill-agent")
            if len(RESULTS) > before:
                runs.append(RESULTS[-1])
            print(f"-- {i + 1}/{n} {peer}", flush=True)
    summary = {"kills_per_peer": n, "advert_ms": ADVERT_MS,
               "priorities": [NODES["n1"][1], NODES["n2"][1]], "peers": {}}
    for peer in ("skua", "keepalived"):
        rs = [r for r in runs if r["peer"] == peer]
        fo = [r["failover_s"] for r in rs if r["failover_s"] is not None]
        PEER = peer
        summary["peers"][peer] = {
            "runs": len(rs),
            "no_takeover": len(rs) - len(fo),
            "failover_s": {"p50": pct(fo, 0.5), "p99": pct(fo, 0.99), "max": max(fo, default=None),
                           "min": min(fo, default=None)},
            "lost_per_failover": {"mean": round(sum(r["lost"] for r in rs) / max(1, len(rs)), 2),
                                  "max": max((r["lost"] for r in rs), default=None)},
            "double_intervals": {"total": sum(r["double_intervals"] for r in rs),
                                 "runs_with_any": sum(1 for r in rs if r["double_intervals"])},
            "cpu_percent_of_one_core": cpu(30),
        }
    text = json.dumps(summary, indent=1)
    print(text)
    if out:
        with open(out, "w") as f:
            json.dump({"summary": summary, "runs": runs}, f, indent=1)


def main():
    if os.geteuid() != 0:
        print("ha.py needs root (network namespaces, raw sockets)", file=sys.stderr)
        sys.exit(2)
    repeat = 1
    out = None
    names = []
    it = iter(ARGS)
    bench_n = None
    for a in it:
        if a == "--bench":
            bench_n = int(next(it))
        elif a == "--priorities":
            # --priorities MASTER,BACKUP (default 150,100): the backup's priority sets its
            # skew time, hence the master-down interval (RFC 9568 §6.1).
            p1, p2 = (int(x) for x in next(it).split(","))
            NODES["n1"] = (NODES["n1"][0], p1)
            NODES["n2"] = (NODES["n2"][0], p2)
        elif a == "--repeat":
            repeat = int(next(it))
        elif a == "--json":
            out = next(it)
        elif a == "--xdp":
            global XDP
            XDP = True
        else:
            names.append(a)
    if bench_n is not None:
        try:
            bench(bench_n, out)
        finally:
            teardown()
        return
    if names == ["all"] or not names:
        names = ["kill-agent", "kill-skuad", "stop-agent", "release", "link-down",
                 "partition", "partition-kill", "failback", "sync"]
    try:
        for _ in range(repeat):
            for n in names:
                if n == "sync":
                    sync_scenario()
                else:
                    scenario(n)
    finally:
        teardown()
    if out:
        with open(out, "w") as f:
            json.dump(RESULTS, f, indent=1)
    if FAILED:
        print(f"{len(FAILED)} checks failed", file=sys.stderr)
        sys.exit(1)
    print("all HA checks passed")


main()
