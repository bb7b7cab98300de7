#!/usr/bin/python3
"""forward-host: and stub-host: resolved and used, against real upstreams.

Run inside a network namespace with only loopback (kernel-appliance/skuad/tests/e2e/hostile.rs):
`fwdhost.py SKUAD_BINARY WORKDIR`. It puts 198.18.53.1-3 and fd53::2 on the namespace's
loopback and starts:

- Unbound "R" on 198.18.53.1, holding `net.example.` (the hosts' names: dns.net.example. A
  198.18.53.2 and AAAA fd53::2, ns.net.example. A 198.18.53.3, mv.net.example. A 198.18.53.2
  with TTL 2, lo.net.example. A 127.0.0.1), logging the questions it gets;
- Unbound "U" on 198.18.53.2 and [fd53::2], holding `corp.example.` and `moving.example.`
  (www: 198.18.7.1 and 198.18.7.2);
- NSD on 198.18.53.3, authoritative for `stub.example.` and `moving.example.` (www:
  198.18.7.3 and 198.18.7.4);
- skuad (do-not-query-localhost left at its default, yes) with `net.example.` and
  `example.` forwarded to R by address (`example.` holds no name asked: it surrounds
  `loop.example.`, so that the loop's names, if skuad sent them anywhere, would reach R and
  its log), and every other zone given by name only: `corp.example.`
  (forward-host: dns.net.example), `stub.example.` (stub-host: ns.net.example.),
  `moving.example.` (forward-host: mv.net.example), `loop.example.` (forward-host:
  ns.loop.example: inside its own zone, a loop) and `local.example.` (forward-host:
  lo.net.example, which resolves to the loopback).

Checks: the load warns about the loop only (with file and line: the host, and its zone
having no usable address), never about the hosts that resolve or their zones; skuad asked R
for the hosts' A and AAAA, and never anything of `loop.example.`; names of `corp.example.` and of the stub
zone are answered through the resolved addresses (nobody else serves them); the control
socket's `/resolver/upstreams` lists the resolved addresses with their zones; the loop and
the loopback-only host answer SERVFAIL with EDE 22 at once; when R's record for
mv.net.example. changes, skuad follows it after its TTL (and the 5 s floor), and when the
name goes, `moving.example.` answers SERVFAIL (EDE 22) and the log says why.
"""

import json
import os
import socket
import subprocess
import sys
import time

import dns.edns
import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype

SKUAD, WORK = sys.argv[1], sys.argv[2]
SKUAD_PORT = 5353
CTL = os.path.join(WORK, "control.sock")
FAILED = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILED.append(what)


def sh(*args):
    subprocess.run(args, check=True, timeout=60)


def ask(name, qtype="A", timeout=8.0):
    q = dns.message.make_query(name, qtype, use_edns=0, payload=1232)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(timeout)
    t0 = time.monotonic()
    try:
        s.sendto(q.to_wire(), ("127.0.0.1", SKUAD_PORT))
        data, _ = s.recvfrom(65535)
        return dns.message.from_wire(data), time.monotonic() - t0
    except socket.timeout:
        return None, time.monotonic() - t0
    finally:
        s.close()


def addrs(r):
    if r is None:
        return None
    return sorted(str(rd) for rrset in r.answer for rd in rrset if rrset.rdtype == dns.rdatatype.A)


def ede_codes(r):
    return [o.code for o in r.options if o.otype == dns.edns.EDE] if r is not None else None


def rcode(r):
    return dns.rcode.to_text(r.rcode()) if r is not None else None


def api(path):
    """GET path over skuad's control socket (root: role admin), as JSON."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(CTL)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: skuad\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" in head.lower():
        out = b""
        while body:
            size, _, rest = body.partition(b"\r\n")
            n = int(size.split(b";")[0], 16)
            if n == 0:
                break
            out += rest[:n]
            body = rest[n + 2:]
        body = out
    return json.loads(body)


def zone_upstreams(zone):
    return sorted(u["address"] for u in api("/resolver/upstreams")["upstreams"] if u["zone"] == zone)


def unbound_conf(tag, interfaces, zones, extra=""):
    path = os.path.join(WORK, f"unbound-{tag}.conf")
    lines = [
        "server:",
        *[f"  interface: {i}" for i in interfaces],
        "  port: 53",
        "  do-daemonize: no",
        "  use-syslog: no",
        f'  logfile: "{os.path.join(WORK, f"unbound-{tag}.log")}"',
        '  username: ""',
        '  chroot: ""',
        '  pidfile: ""',
        f'  directory: "{WORK}"',
        "  access-control: 0.0.0.0/0 allow",
        "  access-control: ::/0 allow",
        extra,
    ]
    for zone, records in zones.items():
        lines.append(f'  local-zone: "{zone}" static')
        lines += [f'  local-data: "{r}"' for r in records]
    lines += [
        "remote-control:",
        "  control-enable: yes",
        f'  control-interface: "{os.path.join(WORK, f"unbound-{tag}.ctl")}"',
        "  control-use-cert: no",
    ]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def nsd_conf():
    for zone, ip in (("stub.example.", "198.18.7.3"), ("moving.example.", "198.18.7.4")):
        with open(os.path.join(WORK, f"{zone}zone"), "w") as f:
            f.write(f"$ORIGIN {zone}\n$TTL 1\n"
                    f"@ IN SOA ns.net.example. admin.{zone} 1 3600 600 86400 1\n"
                    f"@ IN NS ns.net.example.\n"
                    f"www IN A {ip}\n")
    path = os.path.join(WORK, "nsd.conf")
    with open(path, "w") as f:
        f.write(f"""server:
  ip-address: 198.18.53.3
  port: 53
  do-ip6: no
  server-count: 1
  username: ""
  chroot: ""
  zonesdir: "{WORK}"
  database: ""
  zonelistfile: "{WORK}/nsd.zonelist"
  xfrdfile: "{WORK}/nsd.xfrd.state"
  xfrdir: "{WORK}"
  pidfile: "{WORK}/nsd.pid"
  logfile: "{WORK}/nsd.log"
  verbosity: 0
remote-control:
  control-enable: no
zone:
  name: "stub.example."
  zonefile: "stub.example.zone"
zone:
  name: "moving.example."
  zonefile: "moving.example.zone"
""")
    return path


SKUAD_CONF = f"""server:
  interface: 127.0.0.1@{SKUAD_PORT}
  access-control: 127.0.0.0/8 allow
api:
  enable: no
  control-socket: "{CTL}"
forward-zone:
  name: "net.example."
  forward-addr: 198.18.53.1
forward-zone:
  name: "example."
  forward-addr: 198.18.53.1
forward-zone:
  name: "corp.example."
  forward-host: dns.net.example
stub-zone:
  name: "stub.example."
  stub-host: ns.net.example.
forward-zone:
  name: "moving.example."
  forward-host: mv.net.example
forward-zone:
  name: "loop.example."
  forward-host: ns.loop.example
forward-zone:
  name: "local.example."
  forward-host: lo.net.example
"""


def r_ctl(*args):
    conf = os.path.join(WORK, "unbound-r.conf")
    out = subprocess.run(["unbound-control", "-c", conf, *args], capture_output=True, text=True, timeout=20)
    check(out.returncode == 0, f"unbound-control {' '.join(args)}: {out.stdout.strip()} {out.stderr.strip()}")


def wait_for(pred, seconds, step=0.25):
    t0 = time.monotonic()
    while True:
        v = pred()
        if v or time.monotonic() - t0 > seconds:
            return v, time.monotonic() - t0
        time.sleep(step)


def main():
    for a in ("198.18.53.1/32", "198.18.53.2/32", "198.18.53.3/32"):
        sh("ip", "addr", "add", a, "dev", "lo")
    sh("ip", "-6", "addr", "add", "fd53::2/128", "dev", "lo", "nodad")
    r_conf = unbound_conf("r", ["198.18.53.1"], {"net.example.": [
        "dns.net.example. 300 IN A 198.18.53.2",
        "dns.net.example. 300 IN AAAA fd53::2",
        "ns.net.example. 300 IN A 198.18.53.3",
        "mv.net.example. 2 IN A 198.18.53.2",
        "lo.net.example. 300 IN A 127.0.0.1",
    ]}, extra="  log-queries: yes")
    u_conf = unbound_conf("u", ["198.18.53.2", "fd53::2"], {
        "corp.example.": ["www.corp.example. 1 IN A 198.18.7.1"],
        "moving.example.": ["www.moving.example. 1 IN A 198.18.7.2"],
    })
    skuad_conf = os.path.join(WORK, "skuad.conf")
    with open(skuad_conf, "w") as f:
        f.write(SKUAD_CONF)
    loop_line = SKUAD_CONF.splitlines().index("  forward-host: ns.loop.example") + 1
    # The loop's zone clause (`forward-zone:`), the line before its name.
    loop_zone_line = SKUAD_CONF.splitlines().index('  name: "loop.example."')
    logs = {n: open(os.path.join(WORK, f"{n}.out"), "w") for n in ("r", "u", "nsd")}
    procs = [
        subprocess.Popen(["unbound", "-d", "-c", r_conf], stdout=logs["r"], stderr=logs["r"]),
        subprocess.Popen(["unbound", "-d", "-c", u_conf], stdout=logs["u"], stderr=logs["u"]),
        subprocess.Popen(["/usr/sbin/nsd", "-d", "-c", nsd_conf()], stdout=logs["nsd"], stderr=logs["nsd"]),
    ]
    # The upstreams answer before skuad starts (skuad resolves its hosts at once).
    for ip in ("198.18.53.1", "198.18.53.2", "198.18.53.3"):
        def up():
            try:
                q = dns.message.make_query("www.stub.example." if ip.endswith(".3") else "x.invalid.", "A")
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.settimeout(0.2)
                s.sendto(q.to_wire(), (ip, 53))
                s.recvfrom(65535)
                return True
            except OSError:
                return False
        ok, _ = wait_for(up, 10, 0.1)
        check(ok, f"upstream {ip} answers")
    log_path = os.path.join(WORK, "skuad.log")
    log = open(log_path, "w")
    skuad = subprocess.Popen([SKUAD, "--config", skuad_conf], stdout=log, stderr=log)
    try:
        wait_for(lambda: ask("ready.invalid.", timeout=0.2)[0] is not None, 20, 0.05)
        checks(skuad, log_path, loop_line, loop_zone_line)
    finally:
        for p in [skuad, *procs]:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        log.close()
        for f in logs.values():
            f.close()
    if FAILED:
        print(f"{len(FAILED)} check(s) failed; logs in {WORK}")
        sys.exit(1)
    print("all checks passed")


def checks(skuad, log_path, loop_line, loop_zone_line):
    # Names given by host only: answered through the addresses the hosts resolved to.
    r, t = ask("www.corp.example.")
    check(addrs(r) == ["198.18.7.1"],
          f"forward-host: www.corp.example. answered through dns.net.example.'s address: {addrs(r)} in {t:.2f} s")
    r, t = ask("www.stub.example.")
    check(addrs(r) == ["198.18.7.3"] and r.flags & dns.flags.RA,
          f"stub-host: www.stub.example. answered by NSD at ns.net.example.'s address: {addrs(r)} in {t:.2f} s")
    with open(os.path.join(WORK, "unbound-r.log")) as f:
        r_log = f.read()
    for name, qtype in (("dns.net.example.", "A"), ("dns.net.example.", "AAAA"), ("ns.net.example.", "A")):
        check(f"{name} {qtype} IN" in r_log, f"skuad asked R (net.example.'s forwarder) for {name} {qtype}")

    # The upstream list shows the resolved addresses under their zones.
    ups = zone_upstreams("corp.example.")
    check(ups == ["198.18.53.2:53", "[fd53::2]:53"], f"/resolver/upstreams for corp.example.: {ups}")
    ups = zone_upstreams("stub.example.")
    check(ups == ["198.18.53.3:53"], f"/resolver/upstreams for stub.example.: {ups}")
    ups = zone_upstreams("local.example.")
    check(ups == [], f"lo.net.example.'s 127.0.0.1 is not an upstream (do-not-query-localhost): {ups}")
    # Each resolved address names the host it came from (copied from the resolver each second).
    def hosts_of(zone):
        return sorted({u.get("host") for u in api("/resolver/upstreams")["upstreams"] if u["zone"] == zone})
    deadline = time.monotonic() + 3
    while hosts_of("corp.example.") != ["dns.net.example."] and time.monotonic() < deadline:
        time.sleep(0.2)
    check(hosts_of("corp.example.") == ["dns.net.example."] and hosts_of("stub.example.") == ["ns.net.example."],
          f"/resolver/upstreams names the hosts: {hosts_of('corp.example.')} {hosts_of('stub.example.')}")
    # Both of corp.example.'s addresses work (IPv4 and IPv6): ask until both replied (the
    # list's counters are copied from the resolver about once a second).
    for i in range(12):
        for j in range(10):
            ask(f"n{i}-{j}.corp.example.")
        time.sleep(1.1)
        rows = [u for u in api("/resolver/upstreams")["upstreams"] if u["zone"] == "corp.example."]
        if all(u["replies"] > 0 for u in rows):
            break
    check(all(u["replies"] > 0 and u["state"] == "up" for u in rows),
          f"both resolved addresses answered: {[(u['address'], u['replies'], u['state']) for u in rows]}")

    # What cannot work fails fast, and the load said so (with the line) only for the loop.
    r, t = ask("www.loop.example.")
    check(rcode(r) == "SERVFAIL" and ede_codes(r) == [22] and t < 1.0,
          f"a host inside its own zone: {rcode(r)} EDE {ede_codes(r)} in {t:.2f} s")
    r, t = ask("www.local.example.")
    check(rcode(r) == "SERVFAIL" and ede_codes(r) == [22] and t < 1.0,
          f"a host that resolves to the loopback only: {rcode(r)} EDE {ede_codes(r)} in {t:.2f} s")
    with open(log_path) as f:
        text = f.read()
    warned = [l for l in text.splitlines() if "cannot be resolved" in l]
    check(len(warned) == 1 and f"skuad.conf:{loop_line}: forward-zone host 'ns.loop.example'" in warned[0],
          f"one load warning, for the loop, with its line: {warned}")
    unusable = [l for l in text.splitlines() if "has no usable address" in l]
    check(len(unusable) == 1
          and f"skuad.conf:{loop_zone_line}: forward-zone 'loop.example.' has no usable address" in unusable[0],
          f"one zone without a usable address, the loop's, with its line: {unusable}")
    about_resolving = [l for l in text.splitlines() if " warning: " in l
                       and any(z in l for z in ("corp.example.", "stub.example.", "moving.example."))]
    check(about_resolving == [], f"no warning about the hosts that resolve or their zones: {about_resolving}")
    check("127.0.0.1 not used: a loopback address (do-not-query-localhost is yes)" in text,
          "the log names the loopback address left out, and why")
    check("forward-host dns.net.example. (port 53, forward-zone corp.example.): upstreams" in text,
          "the log names the resolved addresses")

    # Re-resolution: mv.net.example. (TTL 2) moves from U to NSD; skuad follows it.
    r, _ = ask("www.moving.example.")
    check(addrs(r) == ["198.18.7.2"], f"www.moving.example. through mv.net.example. = U: {addrs(r)}")
    r_ctl("local_data_remove", "mv.net.example.")
    r_ctl("local_data", "mv.net.example. 2 IN A 198.18.53.3")
    moved, t = wait_for(lambda: addrs(ask("www.moving.example.")[0]) == ["198.18.7.4"], 12, 0.5)
    check(moved and t <= 8.0, f"after mv.net.example. changed at R: answered by NSD within {t:.1f} s")
    ups = zone_upstreams("moving.example.")
    check(ups == ["198.18.53.3:53"], f"...the old address dropped: {ups}")
    # The name goes (NXDOMAIN at R): the zone has no upstream left.
    r_ctl("local_data_remove", "mv.net.example.")
    gone, t = wait_for(lambda: rcode(ask("www.moving.example.")[0]) == "SERVFAIL", 12, 0.5)
    r, t2 = ask("www.moving.example.")
    check(gone and rcode(r) == "SERVFAIL" and ede_codes(r) == [22] and t2 < 1.0,
          f"mv.net.example. removed: SERVFAIL EDE {ede_codes(r)} after {t:.1f} s, then at once ({t2:.2f} s)")
    check(zone_upstreams("moving.example.") == [], "...and no upstream listed for moving.example.")
    with open(log_path) as f:
        text = f.read()
    check("mv.net.example. (port 53, forward-zone moving.example.): the name has no address" in text,
          "the log says mv.net.example. has no address")
    # Over the whole run (the loop's host is never resolved, its zone's questions never
    # sent): R, which holds the zone around loop.example., never heard of it.
    with open(os.path.join(WORK, "unbound-r.log")) as f:
        r_log = f.read()
    check("loop.example" not in r_log, "R was never asked the loop's host name, nor any name of its zone")
    check(skuad.poll() is None, "skuad is still running")


if __name__ == "__main__":
    main()
