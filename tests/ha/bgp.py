#!/usr/bin/python3
"""Anycast through BGP with an existing routing daemon: two BIRD 2 instances in network
namespaces, skuad and skua-agent on the node; the service prefixes are announced while the
node answers, withdrawn when it stops, announced again when it recovers.

Usage (root): bgp.py BINDIR WORKDIR [--json OUT]
  BINDIR has skuad and skua-agent; WORKDIR is scratch space.

Topology (namespaces bgp-router and bgp-node, one veth between them):
  bgp-router eth0 198.18.98.1/30 fd00:98::1/64   BIRD, AS 65000: the upstream router; its
                                                  BGP routes go to its kernel, so a client
                                                  there reaches the anycast addresses
  bgp-node   eth0 198.18.98.2/30 fd00:98::2/64   BIRD, AS 65001: `protocol direct` on
                                                  skua-any*, exported to the router;
                                                  skuad (--no-xdp) listening on 127.0.0.1
                                                  and the anycast addresses (ip-freebind);
                                                  skua-agent: a dns-udp canary on
                                                  127.0.0.1:53 (critical, 200 ms, fall 2,
                                                  rise 2) and [[anycast]] on skua-any0
  Anycast prefixes: 198.18.99.53/32, fd00:99::53/128; one eBGP session per family.

Checks, in order (times measured by polling the router's `birdc show route` every 10 ms):
  0. the agent creates skua-any0 as a dummy interface (on a kernel without the dummy
     driver the script creates an ifb device instead, which the agent uses as it is, and
     checks that the agent, asked for an absent interface, stops with a clear message);
  1. both routes appear at the router and a client there gets answers from both addresses;
  2. kill -9 skuad: both routes disappear within fall x interval + BGP propagation
     (bound: fall x interval + one interval + the timeout + 1 s);
  3. skuad started again: both routes come back, answers too;
  4. kill -9 skua-agent while healthy: the routes stay (the addresses stay on skua-any0;
     skuad still answers, so that is right: docs/ha-anycast.md);
  5. skuad killed too while the agent is dead: the routes still stay (the case the agent
     cannot cover; docs/ha-anycast.md says how systemd bounds it); a new agent finds the
     addresses, keeps them while its checks run, and withdraws them within the bound;
  6. skuad started again: the routes come back;
  7. SIGTERM to the agent: it withdraws before it exits;
  8. the node's BIRD killed: the routes go (its sessions close with it); BIRD started
     again: it announces what skua-any0 holds, the agent doing nothing.
Exit status 0 only when every check holds.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import netns
from netns import FAILED, check, ns, sh

BIN, WORK = sys.argv[1], sys.argv[2]
ARGS = sys.argv[3:]
R, N = "bgp-router", "bgp-node"
V4, V6 = "198.18.99.53", "fd00:99::53"
ROUTES = [f"{V4}/32", f"{V6}/128"]
INTERVAL, FALL, RISE, TIMEOUT = 0.2, 2, 2, 0.1
# Detection (fall runs, up to one more interval for the phase, the timeout of the last)
# plus 1 s for the agent loop, the netlink notification to BIRD and one BGP UPDATE.
BOUND = FALL * INTERVAL + INTERVAL + TIMEOUT + 1.0
RESULTS = {}


def teardown():
    netns.teardown((R, N))


def dummy_supported():
    """Whether the kernel has the dummy driver (some minimal VM kernels do not)."""
    ok = ns(N, "ip", "link", "add", "skua-probe0", "type", "dummy", check=False).returncode == 0
    ns(N, "ip", "link", "del", "skua-probe0", check=False)
    return ok


def topology():
    teardown()
    for n in (R, N):
        sh("ip", "netns", "add", n)
        ns(n, "ip", "link", "set", "lo", "up")
    sh("ip", "link", "add", "eth0", "netns", R, "type", "veth", "peer", "name", "eth0",
       "netns", N)
    for n, a4, a6 in ((R, "198.18.98.1", "fd00:98::1"), (N, "198.18.98.2", "fd00:98::2")):
        ns(n, "ip", "addr", "add", f"{a4}/30", "dev", "eth0")
        ns(n, "ip", "addr", "add", f"{a6}/64", "dev", "eth0", "nodad")
        ns(n, "ip", "link", "set", "eth0", "up")
    if dummy_supported():
        return "dummy, created by skua-agent"
    # The agent uses an existing interface as it is; ifb behaves as a dummy here.
    ns(N, "ip", "link", "add", "skua-any0", "type", "ifb")
    return "ifb, created by this script: the kernel has no dummy driver"


BIRD_ROUTER = """
log "{dir}/bird.log" all;
router id 198.18.98.1;
protocol device {{ }}
# What BGP learns goes to this namespace's kernel, for the client.
protocol kernel {{ ipv4 {{ import none; export all; }}; }}
protocol kernel {{ ipv6 {{ import none; export all; }}; }}
template bgp node {{
  connect delay time 1; connect retry time 1; error wait time 1, 5;
}}
protocol bgp node4 from node {{
  local 198.18.98.1 as 65000;
  neighbor 198.18.98.2 as 65001;
  ipv4 {{ import where net ~ [ 198.18.99.0/24{{24,32}} ]; export none; }};
}}
protocol bgp node6 from node {{
  local fd00:98::1 as 65000;
  neighbor fd00:98::2 as 65001;
  ipv6 {{ import where net ~ [ fd00:99::/32{{32,128}} ]; export none; }};
}}
"""

BIRD_NODE = """
log "{dir}/bird.log" all;
router id 198.18.98.2;
protocol device {{ }}
# The anycast prefixes: whatever skua-agent keeps on skua-any0.
protocol direct anycast {{
  ipv4; ipv6;
  interface "skua-any*";
}}
template bgp upstream {{
  connect delay time 1; connect retry time 1; error wait time 1, 5;
}}
protocol bgp up4 from upstream {{
  local 198.18.98.2 as 65001;
  neighbor 198.18.98.1 as 65000;
  ipv4 {{ import none; export where proto = "anycast"; }};
}}
protocol bgp up6 from upstream {{
  local fd00:98::2 as 65001;
  neighbor fd00:98::1 as 65000;
  ipv6 {{ import none; export where proto = "anycast"; }};
}}
"""


class Bird:
    def __init__(self, netns, conf):
        self.ns = netns
        self.dir = os.path.join(WORK, netns)
        os.makedirs(self.dir, exist_ok=True)
        self.sock = os.path.join(self.dir, "bird.ctl")
        self.conf = os.path.join(self.dir, "bird.conf")
        with open(self.conf, "w") as f:
            f.write(conf.format(dir=self.dir))
        log = open(os.path.join(self.dir, "bird.out"), "a")
        # -f: foreground (no daemon, no systemd); its own socket and pid file.
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", netns, "bird", "-f", "-c", self.conf, "-s", self.sock,
             "-P", os.path.join(self.dir, "bird.pid")], stdout=log, stderr=log)

    def cmd(self, *args):
        return sh("birdc", "-s", self.sock, *args, check=False).stdout

    def routes(self):
        """The anycast routes the router has (best routes, both families)."""
        out = self.cmd("show", "route")
        return {r for r in ROUTES if re.search(r"^" + re.escape(r) + r"\s", out, re.M)}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


class Node:
    def __init__(self):
        self.dir = os.path.join(WORK, N)
        os.makedirs(self.dir, exist_ok=True)
        self.ctl = os.path.join(self.dir, "control.sock")
        self.skuad = None
        self.agent = None
        self.agent_log = os.path.join(self.dir, "agent.log")
        with open(os.path.join(self.dir, "skuad.conf"), "w") as f:
            f.write(f"""server:
  interface: 127.0.0.1
  interface: {V4}
  interface: {V6}
  # The anycast addresses are on this host only while it is healthy: bind them anyway.
  ip-freebind: yes
  port: 53
  access-control: 127.0.0.0/8 allow
  access-control: 198.18.0.0/15 allow
  access-control: fd00::/8 allow
  local-zone: "example." static
  local-data: "a.example. 60 IN A 198.18.0.53"
api:
  interface: 127.0.0.1@8053
  control-socket: "{self.ctl}"
  state-file: "{self.dir}/state.conf"
""")
        with open(os.path.join(self.dir, "agent.toml"), "w") as f:
            f.write(f"""[agent]
name = "node"
skuad = "unix:{self.ctl}"
listen = "127.0.0.1:9853"

[[check]]
name = "canary"
kind = "dns-udp"
target = "127.0.0.1:53"
query = "a.example. A"
expect = "answer"
interval_ms = {int(INTERVAL * 1000)}
timeout_ms = {int(TIMEOUT * 1000)}
fall = {FALL}
rise = {RISE}
weight = 0

[[anycast]]
name = "dns"
interface = "skua-any0"
addresses = ["{V4}/32", "{V6}/128"]
""")

    def start_skuad(self):
        if os.path.exists(self.ctl):
            os.unlink(self.ctl)
        log = open(os.path.join(self.dir, "skuad.log"), "a")
        self.skuad = subprocess.Popen(
            ["ip", "netns", "exec", N, os.path.join(BIN, "skuad"), "--no-xdp",
             "--config", os.path.join(self.dir, "skuad.conf")], stdout=log, stderr=log)
        deadline = time.time() + 20
        while time.time() < deadline:
            if os.path.exists(self.ctl):
                return
            if self.skuad.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError("skuad did not start: see " + os.path.join(self.dir, "skuad.log"))

    def start_agent(self):
        log = open(self.agent_log, "a")
        self.agent = subprocess.Popen(
            ["ip", "netns", "exec", N, os.path.join(BIN, "skua-agent"),
             "--config", os.path.join(self.dir, "agent.toml")], stdout=log, stderr=log)

    def kill(self, which, sig=signal.SIGKILL):
        p = getattr(self, which)
        code = None
        if p and p.poll() is None:
            # `ip netns exec` execs the program: the pid is the program's.
            os.kill(p.pid, sig)
            code = p.wait(timeout=10)
        setattr(self, which, None)
        return code

    def status(self):
        r = ns(N, "curl", "-s", "-m", "1", "http://127.0.0.1:9853/status", check=False)
        try:
            return json.loads(r.stdout)
        except ValueError:
            return None

    def metrics(self):
        return ns(N, "curl", "-s", "-m", "1", "http://127.0.0.1:9853/metrics",
                  check=False).stdout

    def addresses(self):
        out = ns(N, "ip", "-o", "addr", "show", "dev", "skua-any0", check=False).stdout
        return {a for a in (V4, V6) if f" {a}/" in out}

    def log_time(self, pattern, after):
        """Unix time of the first agent log line after `after` matching `pattern`."""
        with open(self.agent_log) as f:
            for line in f:
                m = re.match(r"(\d+\.\d{3}) skua-agent ", line)
                if m and float(m.group(1)) >= after - 0.001 and re.search(pattern, line):
                    return float(m.group(1))
        return None


QUERY = r"""
import socket, struct, sys
addr = sys.argv[1]
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
q = struct.pack(">HHHHHH", 0x5353, 0x0100, 1, 0, 0, 0) + b"\x01a\x07example\x00" + \
    struct.pack(">HH", 1, 1)
s = socket.socket(fam, socket.SOCK_DGRAM)
s.settimeout(1)
s.sendto(q, (addr, 53))
try:
    r, src = s.recvfrom(512)
except OSError as e:
    print("error", e)
    sys.exit(0)
# The answer's A record: the last 4 bytes of a one-answer reply.
an = struct.unpack(">H", r[6:8])[0]
print("answer" if r[:2] == q[:2] and r[3] & 15 == 0 and an == 1 else "bad", src[0],
      socket.inet_ntoa(r[-4:]) if an else "")
"""


def ask(addr):
    """One query from the router's namespace to `addr`: 'answer SRC A' or an error."""
    return ns(R, "python3", "-c", QUERY, addr, check=False).stdout.strip()


def answers_both():
    return all(ask(a).startswith("answer") for a in (V4, V6))


def wait_routes(router, want, timeout):
    """Polls the router until its anycast routes are `want`; the time it took, or None."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if router.routes() == want:
            return time.monotonic() - t0
        time.sleep(0.01)
    return None


def stays(router, want, seconds):
    """Whether the router's anycast routes are `want` throughout `seconds`."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        if router.routes() != want:
            return False
        time.sleep(0.05)
    return True


def run():
    kind = topology()
    print(f"   anycast interface: {kind}", flush=True)
    RESULTS["interface"] = kind
    router = Bird(R, BIRD_ROUTER)
    nodebird = Bird(N, BIRD_NODE)
    node = Node()
    if kind.startswith("ifb"):
        # Without the driver, the agent says what to do instead.
        with open(os.path.join(node.dir, "agent.toml")) as f:
            conf = f.read().replace('"skua-any0"', '"skua-any9"')
        alt = os.path.join(node.dir, "agent-any9.toml")
        with open(alt, "w") as f:
            f.write(conf)
        r = ns(N, os.path.join(BIN, "skua-agent"), "--config", alt, check=False)
        check(r.returncode == 1 and "no dummy driver" in r.stderr,
              f"0. no dummy driver: the agent stops and says so ({r.stderr.strip()})")
    node.start_skuad()
    node.start_agent()
    every = set(ROUTES)
    try:
        # 1. Announced, and answered through the router.
        t = wait_routes(router, every, 30)
        if not check(t is not None, f"1. both routes reach the router ({router.routes()})"):
            print(router.cmd("show", "protocols", "all"))
            return
        RESULTS["first_announce_s"] = round(t, 3)
        if kind.startswith("dummy"):
            link = ns(N, "ip", "-d", "link", "show", "skua-any0").stdout
            check(" dummy " in link and "UP" in link,
                  "0. skua-agent created skua-any0 as a dummy interface and set it up")
        check(answers_both(), f"1. a client at the router gets answers from {V4} and {V6} "
              f"({ask(V4)!r}, {ask(V6)!r})")
        st = node.status()
        check(st is not None and st["anycast"][0]["announced"]
              and all(p["announced"] for p in st["anycast"][0]["prefixes"]),
              "1. /status shows both prefixes announced")
        m = node.metrics()
        check(f'skua_agent_anycast_announced{{anycast="dns",prefix="{V4}/32"}} 1' in m
              and 'skua_agent_anycast_transitions_total{anycast="dns"} 1' in m,
              "1. /metrics: announced gauge 1, one transition")

        # 2. skuad dies: withdrawn within the bound.
        t_kill = time.time()
        node.kill("skuad")
        t = wait_routes(router, set(), BOUND + 3)
        t_withdraw = node.log_time(r"\[dns\]: withdrawing", t_kill)
        RESULTS["withdraw_s"] = None if t is None else round(t, 3)
        RESULTS["withdraw_detect_s"] = None if t_withdraw is None else round(t_withdraw - t_kill, 3)
        print(f"   withdraw: route gone at the router {RESULTS['withdraw_s']} s after kill -9 "
              f"skuad (agent withdrew after {RESULTS['withdraw_detect_s']} s)", flush=True)
        check(t is not None and t <= BOUND,
              f"2. kill -9 skuad: both routes withdrawn within {BOUND:.1f} s ({t})")
        check(node.addresses() == set(), "2. the addresses are off skua-any0")
        check(not ask(V4).startswith("answer"), "2. no answer on the anycast address")
        m = node.metrics()
        check(f'skua_agent_anycast_announced{{anycast="dns",prefix="{V6}/128"}} 0' in m
              and 'skua_agent_anycast_transitions_total{anycast="dns"} 2' in m,
              "2. /metrics: announced gauge 0, two transitions")

        # 3. skuad back: announced again.
        t_start = time.monotonic()
        node.start_skuad()
        t_up = time.monotonic() - t_start
        t = wait_routes(router, every, 10)
        RESULTS["reannounce_s"] = None if t is None else round(t + t_up, 3)
        RESULTS["skuad_start_s"] = round(t_up, 3)
        print(f"   re-announce: route back {RESULTS['reannounce_s']} s after starting skuad "
              f"(skuad itself took {RESULTS['skuad_start_s']} s to start)", flush=True)
        check(t is not None and t <= RISE * INTERVAL + INTERVAL + TIMEOUT + 1.0,
              f"3. skuad restarted: both routes back (after {t} s once skuad was up)")
        check(answers_both(), "3. answers again on both addresses")

        # 4. The agent dies while healthy: the routes stay.
        node.kill("agent")
        check(stays(router, every, 3.0), "4. kill -9 skua-agent while healthy: routes stay 3 s")
        check(answers_both(), "4. and skuad still answers on them")

        # 5. skuad dies too, agent still dead: nothing withdraws (documented).
        node.kill("skuad")
        check(stays(router, every, 2.0),
              "5. skuad killed while the agent is dead: the routes stay (the uncovered case)")
        t_agent = time.time()
        t0 = time.monotonic()
        node.start_agent()
        t = wait_routes(router, set(), BOUND + 5)
        RESULTS["restarted_agent_withdraw_s"] = None if t is None else round(t, 3)
        kept = node.log_time(r"already on skua-any0", t_agent)
        check(kept is not None, "5. the new agent found the addresses and kept them")
        check(t is not None and t <= BOUND + 1.0,
              f"5. and withdrew them once its canary failed ({t} s after it started)")

        # 6. skuad back.
        node.start_skuad()
        check(wait_routes(router, every, 10) is not None, "6. skuad restarted: routes back")

        # 7. SIGTERM: withdrawn before the agent exits.
        t0 = time.monotonic()
        code = node.kill("agent", signal.SIGTERM)
        gone = node.addresses() == set()
        t = wait_routes(router, set(), 5)
        RESULTS["sigterm_withdraw_s"] = None if t is None else round(time.monotonic() - t0, 3)
        check(code == 0 and gone, f"7. SIGTERM: the agent removed the addresses and exited "
              f"(status {code})")
        check(t is not None, f"7. and the routes are withdrawn ({RESULTS['sigterm_withdraw_s']} s)")

        # 8. The node's BIRD restarts: its sessions close with it, and the new one announces
        # what skua-any0 holds, without the agent doing anything.
        node.start_agent()
        if not check(wait_routes(router, every, 10) is not None, "8. agent started: routes back"):
            return
        nodebird.proc.kill()
        nodebird.proc.wait(timeout=10)
        t = wait_routes(router, set(), 5)
        RESULTS["bird_killed_withdraw_s"] = None if t is None else round(t, 3)
        check(t is not None, f"8. kill -9 of the node's BIRD: routes gone at the router ({t} s)")
        nodebird = Bird(N, BIRD_NODE)
        t = wait_routes(router, every, 15)
        RESULTS["bird_restarted_announce_s"] = None if t is None else round(t, 3)
        check(t is not None, f"8. BIRD restarted: it announces the prefixes again ({t} s)")
        check(node.status()["anycast"][0]["transitions"] == 1,
              "8. without any action of the agent (one transition since it started)")
    finally:
        node.kill("agent")
        node.kill("skuad")
        router.stop()
        nodebird.stop()


def main():
    if os.geteuid() != 0:
        print("bgp.py needs root (network namespaces)", file=sys.stderr)
        sys.exit(2)
    for tool in ("bird", "birdc"):
        if not any(os.access(os.path.join(d, tool), os.X_OK)
                   for d in os.environ.get("PATH", "").split(":") + ["/usr/sbin"]):
            print(f"bgp.py needs {tool} (Debian package bird2)", file=sys.stderr)
            sys.exit(2)
    out = None
    it = iter(ARGS)
    for a in it:
        if a == "--json":
            out = next(it)
    os.makedirs(WORK, exist_ok=True)
    # SIGTERM (a test harness giving up) still tears the namespaces down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    try:
        run()
    finally:
        teardown()
    print(f"   {json.dumps(RESULTS)}", flush=True)
    if out:
        with open(out, "w") as f:
            json.dump(RESULTS, f, indent=1)
    if FAILED:
        print(f"{len(FAILED)} checks failed", file=sys.stderr)
        sys.exit(1)
    print("all BGP checks passed")


main()
