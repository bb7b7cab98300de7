#!/usr/bin/python3
"""skua-agent against keepalived 2.2 (Debian), VRRPv3, IPv4 and IPv6, multicast and
unicast, each as master and as backup.

Usage (root): keepalived.py BINDIR WORKDIR
Two namespaces on a bridge (ha-ka: keepalived; ha-sk: skuad + skua-agent), 198.18.54.0/24
and fd00:54::/64, VRID 52, advert interval 100 ms. For each case:
  1. the higher priority side becomes master, the other backup (keepalived's state from its
     log, skua-agent's from /status; the VIP is on the master's interface only);
  2. the master stops (SIGTERM: both send priority 0): the backup takes over within one
     second, the VIP moves;
  3. the master comes back and preempts again (higher priority).
skua-agent requires TTL / hop limit 255 on unicast adverts too (RFC 9568 §7.1) and
keepalived 2.2.7 sends IPv6 unicast adverts with hop limit 64 unless `unicast_ttl 255` is
set: the IPv6 unicast cases run one each way, keepalived with `unicast_ttl 255` (skua-agent
strict, as by default) and keepalived as shipped (skua-agent with strict_unicast_ttl =
false); every unicast case checks that no advert from keepalived was dropped.
"""

import json
import os
import signal
import subprocess
import sys
import time

import netns
from netns import FAILED, check, has_addr, link_local, ns

BIN, WORK = sys.argv[1], sys.argv[2]
NAMESPACES = ("ha-ka", "ha-sk", "ha-ksw")


def teardown():
    netns.teardown(NAMESPACES)


def topology():
    netns.bridge("ha-ksw", [("ha-ka", "198.18.54.1/24", "fd00:54::1/64"),
                            ("ha-sk", "198.18.54.2/24", "fd00:54::2/64")], "hak")
    # Link-local addresses need the link up.
    time.sleep(0.5)


class Keepalived:
    def __init__(self, v6, prio, unicast, ttl255=False):
        self.dir = os.path.join(WORK, "ka")
        os.makedirs(self.dir, exist_ok=True)
        self.log = os.path.join(self.dir, "keepalived.log")
        vip = "fd00:54::53/128" if v6 else "198.18.54.53/32"
        peers = ""
        if unicast:
            src = link_local("ha-ka") if v6 else "198.18.54.1"
            peer = link_local("ha-sk") if v6 else "198.18.54.2"
            peers = f"unicast_src_ip {src}\n  unicast_peer {{\n    {peer}\n  }}\n"
            if ttl255:
                peers += "  unicast_ttl 255\n"
        self.conf = os.path.join(self.dir, "keepalived.conf")
        with open(self.conf, "w") as f:
            f.write(f"""global_defs {{
  vrrp_version 3
  script_user root
  enable_script_security
}}
vrrp_instance VI_1 {{
  interface eth0
  state BACKUP
  virtual_router_id 52
  priority {prio}
  advert_int 0.1
  {peers}
  virtual_ipaddress {{
    {vip}
  }}
}}
""")
        self.proc = None

    def start(self):
        open(self.log, "w").close()
        lf = open(self.log, "a")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", "ha-ka", "keepalived", "-n", "-l", "-D", "-f", self.conf,
             "-p", os.path.join(self.dir, "k.pid"), "-r", os.path.join(self.dir, "v.pid")],
            stdout=lf, stderr=lf)

    def state(self):
        st = None
        with open(self.log) as f:
            for line in f:
                if "Entering MASTER STATE" in line:
                    st = "master"
                elif "Entering BACKUP STATE" in line:
                    st = "backup"
                elif "Entering FAULT STATE" in line:
                    st = "fault"
        return st

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None


class Skua:
    def __init__(self, v6, prio, unicast, strict_ttl=True):
        self.dir = os.path.join(WORK, "sk")
        os.makedirs(self.dir, exist_ok=True)
        self.ctl = os.path.join(self.dir, "control.sock")
        self.vip = "fd00:54::53" if v6 else "198.18.54.53"
        iface = "fd00:54::2" if v6 else "198.18.54.2"
        with open(os.path.join(self.dir, "skuad.conf"), "w") as f:
            f.write(f"""server:
  interface: {iface}
  access-control: 198.18.0.0/15 allow
  access-control: fd00::/8 allow
  local-zone: "example." static
  local-data: "a.example. 60 IN A 198.18.0.1"
ha:
  address: {self.vip}
api:
  interface: 127.0.0.1@8053
  control-socket: "{self.ctl}"
  state-file: "{self.dir}/state.conf"
""")
        peers = ""
        if unicast:
            peers = f'unicast_peers = ["{link_local("ha-ka") if v6 else "198.18.54.1"}"]'
            if not strict_ttl:
                peers += "\nstrict_unicast_ttl = false"
        with open(os.path.join(self.dir, "agent.toml"), "w") as f:
            f.write(f"""[agent]
name = "sk"
skuad = "unix:{self.ctl}"
listen = "127.0.0.1:9853"

[[vrrp]]
name = "vi1"
interface = "eth0"
vrid = 52
priority = {prio}
advert_interval_ms = 100
addresses = ["{self.vip}/{128 if v6 else 32}"]
{peers}
""")
        self.skuad = self.agent = None

    def start(self):
        lf = open(os.path.join(self.dir, "skuad.log"), "a")
        self.skuad = subprocess.Popen(
            ["ip", "netns", "exec", "ha-sk", os.path.join(BIN, "skuad"), "--no-xdp",
             "--config", os.path.join(self.dir, "skuad.conf")], stdout=lf, stderr=lf)
        deadline = time.time() + 20
        while not os.path.exists(self.ctl) and time.time() < deadline:
            time.sleep(0.05)
        self.start_agent()

    def start_agent(self):
        lf = open(os.path.join(self.dir, "agent.log"), "a")
        self.agent = subprocess.Popen(
            ["ip", "netns", "exec", "ha-sk", os.path.join(BIN, "skua-agent"),
             "--config", os.path.join(self.dir, "agent.toml")], stdout=lf, stderr=lf)

    def status(self):
        r = ns("ha-sk", "curl", "-s", "-m", "1", "http://127.0.0.1:9853/status", check=False)
        try:
            return json.loads(r.stdout)["instances"][0]
        except (ValueError, KeyError, IndexError):
            return None

    def state(self):
        s = self.status()
        return None if s is None else s["state"]

    def stop_agent(self):
        if self.agent and self.agent.poll() is None:
            self.agent.send_signal(signal.SIGTERM)
            self.agent.wait(timeout=10)
        self.agent = None

    def stop(self):
        self.stop_agent()
        if self.skuad and self.skuad.poll() is None:
            self.skuad.send_signal(signal.SIGTERM)
            self.skuad.wait(timeout=10)


def until(pred, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return False


def case(v6, unicast, skua_master):
    tag = f"{'v6' if v6 else 'v4'} {'unicast' if unicast else 'multicast'} " \
          f"{'skua master' if skua_master else 'keepalived master'}"
    # keepalived's IPv6 unicast adverts: hop limit 255 when skua is master (skua-agent
    # strict), its default 64 when keepalived is (skua-agent relaxed).
    ttl255 = v6 and unicast and skua_master
    strict = not (v6 and unicast and not skua_master)
    tag += "" if not (v6 and unicast) else \
        (", keepalived unicast_ttl 255" if ttl255 else ", strict_unicast_ttl = false")
    print(f"== {tag}", flush=True)
    topology()
    ka = Keepalived(v6, 100 if skua_master else 150, unicast, ttl255)
    sk = Skua(v6, 150 if skua_master else 100, unicast, strict)
    vip = sk.vip
    # The backup first, so the master's arrival is a preemption both understand.
    if skua_master:
        ka.start()
        check(until(lambda: ka.state() == "backup", 5), f"{tag}: keepalived starts as backup")
        sk.start()
        check(until(lambda: sk.state() == "master" and sk.status()["lease"] == "held", 8),
              f"{tag}: skua-agent (150) becomes master with the lease")
        check(until(lambda: ka.state() == "backup" and not has_addr("ha-ka", vip), 3)
              and has_addr("ha-sk", vip),
              f"{tag}: keepalived (100) stays backup; the VIP is on skua's side only")
        t0 = time.time()
        sk.stop_agent()
        check(until(lambda: ka.state() == "master" and has_addr("ha-ka", vip), 2),
              f"{tag}: skua-agent leaves (priority 0): keepalived takes over "
              f"({time.time() - t0:.3f} s)")
        check(not has_addr("ha-sk", vip), f"{tag}: skua-agent removed the VIP")
        sk.start_agent()
        check(until(lambda: sk.state() == "master" and ka.state() == "backup", 5),
              f"{tag}: skua-agent back, preempts keepalived")
        if unicast:
            # It preempts whether or not it heard keepalived: that it did is in its
            # counters (a backup for its master-down interval, keepalived advertising).
            s = sk.status()
            check(s["adverts_received"] > 0 and s["adverts_dropped"] == 0,
                  f"{tag}: skua-agent heard keepalived as master, dropped nothing "
                  f"({s['adverts_received']} received, {s['adverts_dropped']} dropped)")
        if not unicast:
            # VRRP dropped between the two (a partition of adverts only): keepalived does
            # not probe, takes the VIP and announces it (gratuitous ARP; unsolicited NA for
            # IPv6); skua-agent sees the announcement and gives the VIP and its lease up,
            # so only one node answers.
            ns("ha-sk", "nft", "add table inet havrrp")
            ns("ha-sk", "nft", "add chain inet havrrp in { type filter hook input priority 0; }")
            ns("ha-sk", "nft", "add chain inet havrrp out { type filter hook output priority 0; }")
            ns("ha-sk", "nft", "add rule inet havrrp in meta l4proto vrrp drop")
            ns("ha-sk", "nft", "add rule inet havrrp out meta l4proto vrrp drop")
            check(until(lambda: ka.state() == "master" and has_addr("ha-ka", vip), 3),
                  f"{tag}: partitioned, keepalived takes the VIP")
            check(until(lambda: (sk.status() or {}).get("lease") == "conflict"
                        and not has_addr("ha-sk", vip), 2),
                  f"{tag}: skua-agent saw keepalived's announcement and gave the VIP up")
            ns("ha-sk", "nft", "delete table inet havrrp")
            check(until(lambda: sk.state() == "master" and sk.status()["lease"] == "held"
                        and ka.state() == "backup", 5),
                  f"{tag}: partition over: skua-agent (150) master again, keepalived backup")
    else:
        sk.start()
        check(until(lambda: sk.state() == "master", 8), f"{tag}: skua-agent alone is master")
        ka.start()
        check(until(lambda: ka.state() == "master" and sk.state() == "backup", 5),
              f"{tag}: keepalived (150) preempts, skua-agent (100) becomes backup")
        s = sk.status()
        check(s["lease"] == "idle" and not has_addr("ha-sk", vip) and has_addr("ha-ka", vip),
              f"{tag}: skua-agent gave the lease and the VIP up ({s['lease']})")
        check(s["peer"] is not None and s["peer"][1] == 150,
              f"{tag}: skua-agent hears keepalived at priority 150 ({s['peer']})")
        check(s["adverts_dropped"] == 0, f"{tag}: no advert from keepalived dropped "
              f"({s['adverts_received']} received)")
        t0 = time.time()
        ka.stop()
        check(until(lambda: sk.state() == "master" and sk.status()["lease"] == "held", 2),
              f"{tag}: keepalived leaves (priority 0): skua-agent takes over "
              f"({time.time() - t0:.3f} s)")
        check(until(lambda: has_addr("ha-sk", vip), 1), f"{tag}: the VIP moved to skua")
    ka.stop()
    sk.stop()


def main():
    if os.geteuid() != 0:
        print("keepalived.py needs root", file=sys.stderr)
        sys.exit(2)
    try:
        for v6 in (False, True):
            for unicast in (False, True):
                for skua_master in (True, False):
                    case(v6, unicast, skua_master)
    finally:
        teardown()
    if FAILED:
        print(f"{len(FAILED)} checks failed", file=sys.stderr)
        sys.exit(1)
    print("all keepalived interop checks passed")


main()
