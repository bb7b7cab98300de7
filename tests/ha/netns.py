"""What the HA test scripts (ha.py, keepalived.py, bgp.py) share: checks, commands in network
namespaces, tearing namespaces down, a bridge topology, interface addresses."""

import os
import signal
import subprocess

FAILED = []


def check(ok, what):
    """Prints ok/FAIL with `what`; a failure is remembered for the exit status."""
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILED.append(what)
    return ok


def sh(*args, check=True):
    return subprocess.run(args, check=check, timeout=30, capture_output=True, text=True)


def ns(name, *args, check=True):
    return sh("ip", "netns", "exec", name, *args, check=check)


def teardown(names):
    """Kills every process in the namespaces and deletes them (absent ones are fine)."""
    for n in names:
        for p in sh("ip", "netns", "pids", n, check=False).stdout.split():
            try:
                os.kill(int(p), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        sh("ip", "netns", "del", n, check=False)


def bridge(switch, nodes, port_prefix):
    """Namespace `switch` with bridge br0, and for each (namespace, v4/len, v6/len or None)
    a namespace whose eth0 is a veth port of br0, addresses set, link up. Every namespace
    is torn down first."""
    teardown([switch] + [n for n, _, _ in nodes])
    for n in [switch] + [n for n, _, _ in nodes]:
        sh("ip", "netns", "add", n)
        ns(n, "ip", "link", "set", "lo", "up")
    ns(switch, "ip", "link", "add", "br0", "type", "bridge")
    # No STP forwarding delay.
    ns(switch, "ip", "link", "set", "br0", "type", "bridge", "forward_delay", "0")
    ns(switch, "ip", "link", "set", "br0", "up")
    for i, (n, v4, v6) in enumerate(nodes):
        port = f"{port_prefix}{i}"
        sh("ip", "link", "add", port, "netns", switch, "type", "veth",
           "peer", "name", "eth0", "netns", n)
        ns(switch, "ip", "link", "set", port, "master", "br0")
        ns(switch, "ip", "link", "set", port, "up")
        if v6:
            ns(n, "sysctl", "-qw", "net.ipv6.conf.eth0.accept_dad=0")
            ns(n, "ip", "addr", "add", v6, "dev", "eth0", "nodad")
        ns(n, "ip", "addr", "add", v4, "dev", "eth0")
        ns(n, "ip", "link", "set", "eth0", "up")


def mac(n):
    return ns(n, "cat", "/sys/class/net/eth0/address").stdout.strip()


def has_addr(n, addr, dev="eth0"):
    return f" {addr}/" in ns(n, "ip", "-o", "addr", "show", "dev", dev).stdout


def link_local(n, dev="eth0"):
    out = ns(n, "ip", "-6", "-o", "addr", "show", "dev", dev, "scope", "link").stdout
    return out.split()[3].split("/")[0]
