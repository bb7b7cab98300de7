#!/usr/bin/python3
"""skuad as the primary of NSD and Knot, with TSIG (docs/zone-transfer.md).

Run inside a network namespace with only loopback (kernel-appliance/skuad/tests/e2e/xfr_interop.rs):
`interop.py SKUAD_BINARY WORKDIR`. It puts 198.18.1.1-4 on the namespace's loopback and
starts:

- skuad on 198.18.1.1:53, primary of `example.org.` (zone file serial 10) with
  `provide-xfr:` and `notify:` for both secondaries and the key `xfr.example.org.`, an
  API state file, an audit log, its control socket;
- NSD 4.6 on 198.18.1.2, secondary (`request-xfr:` with the key, `allow-notify:` with it,
  outgoing transfers from 198.18.1.2);
- Knot 3.2 on 198.18.1.3, secondary (remote with the key, `via` 198.18.1.3, an ACL that
  allows NOTIFY signed with the key).

Checks: both secondaries transfer the zone at start (AXFR) and serve serial 10 and its
records; a record added through skuad's API (control socket) reaches both by NOTIFY and
IXFR (skuad's audit log shows an IXFR 10 -> 11 to each, the secondaries serve serial 11
and the record); a zone file change without a serial bump, then SIGHUP, reaches both as
serial 12; a request from 198.18.1.4 signed with a wrong secret is answered BADSIG (kdig),
one with an unknown key BADKEY, an unsigned one REFUSED, and the audit log records them
as `xfr-refused` from 198.18.1.4; a request kdig signs with the right key transfers the
zone and kdig verifies every message's TSIG; the audit log verifies (skuactl-free: its
entries are counted by kind).
"""

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time

SKUAD, WORK = sys.argv[1], sys.argv[2]
CTL = os.path.join(WORK, "control.sock")
KEY = "xfr.example.org."
SECRET = base64.b64encode(bytes(range(100, 132))).decode()
WRONG = base64.b64encode(bytes(range(32))).decode()
PRIMARY, NSD_IP, KNOT_IP, OTHER = "198.18.1.1", "198.18.1.2", "198.18.1.3", "198.18.1.4"
FAILED = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILED.append(what)


def sh(*args):
    subprocess.run(args, check=True, timeout=60)


def kdig(*args, timeout=15):
    r = subprocess.run(["kdig", "+retry=0", "+timeout=3", *args], capture_output=True, text=True, timeout=timeout)
    return r.stdout + r.stderr


def soa_serial(server):
    out = kdig(f"@{server}", "example.org.", "SOA", "+short")
    parts = out.split()
    return int(parts[2]) if len(parts) >= 7 and parts[2].isdigit() else None


def a_record(server, name):
    return kdig(f"@{server}", name, "A", "+short").strip()


def wait_for(pred, seconds, step=0.2):
    t0 = time.monotonic()
    while True:
        v = pred()
        if v or time.monotonic() - t0 > seconds:
            return v, time.monotonic() - t0
        time.sleep(step)


def api(method, path, body=None):
    """A request over skuad's control socket (root: role admin), as (status, JSON)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(CTL)
    data = json.dumps(body).encode() if body is not None else b""
    head = f"{method} {path} HTTP/1.1\r\nHost: skuad\r\nConnection: close\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
    s.sendall(head.encode() + b"\r\n" + data)
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        out += chunk
    s.close()
    head, _, body = out.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    if b"transfer-encoding: chunked" in head.lower():
        plain = b""
        while body:
            size, _, rest = body.partition(b"\r\n")
            n = int(size.split(b";")[0], 16)
            if n == 0:
                break
            plain += rest[:n]
            body = rest[n + 2:]
        body = plain
    return status, (json.loads(body) if body.strip() else None)


def audit(kind):
    path = os.path.join(WORK, "audit.log")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [e for e in map(json.loads, f) if e["kind"] == kind]


ZONE = """$ORIGIN example.org.
$TTL 300
@ IN SOA ns1.example.org. admin.example.org. 10 3600 600 86400 300
@ IN NS ns1.example.org.
@ IN NS ns2.example.org.
ns1 IN A 198.18.1.1
ns2 IN A 198.18.1.2
www IN A 198.18.7.1
mail IN MX 10 www.example.org.
txt IN TXT "zone transfer interop"
"""


def write(name, text, mode=0o644):
    path = os.path.join(WORK, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def configs():
    write("xfr.key", SECRET + "\n", 0o600)
    write("audit.key", "cd" * 32 + "\n", 0o600)
    write("example.org.zone", ZONE)
    write("skuad.conf", f"""server:
  interface: {PRIMARY}@53
  access-control: 198.18.0.0/15 allow
  access-control: 127.0.0.0/8 allow
api:
  enable: no
  control-socket: "{CTL}"
  state-file: "{WORK}/state.conf"
audit:
  log: "{WORK}/audit.log"
  key: file:{WORK}/audit.key
tsig-key:
  name: {KEY}
  algorithm: hmac-sha256
  secret: file:{WORK}/xfr.key
auth-zone:
  name: example.org.
  zonefile: "{WORK}/example.org.zone"
  provide-xfr: {NSD_IP} {KEY}
  provide-xfr: {KNOT_IP} {KEY}
  provide-xfr: {OTHER} {KEY}
  notify: {NSD_IP} {KEY}
  notify: {KNOT_IP}@53 {KEY}
""")
    os.makedirs(os.path.join(WORK, "nsd"), exist_ok=True)
    write("nsd.conf", f"""server:
  ip-address: {NSD_IP}
  port: 53
  do-ip6: no
  server-count: 1
  username: ""
  chroot: ""
  zonesdir: "{WORK}/nsd"
  database: ""
  zonelistfile: "{WORK}/nsd/zone.list"
  xfrdfile: "{WORK}/nsd/xfrd.state"
  xfrdir: "{WORK}/nsd"
  pidfile: "{WORK}/nsd/nsd.pid"
  logfile: "{WORK}/nsd.log"
  verbosity: 2
remote-control:
  control-enable: no
key:
  name: "{KEY}"
  algorithm: hmac-sha256
  secret: "{SECRET}"
zone:
  name: "example.org."
  zonefile: "example.org.zone"
  request-xfr: {PRIMARY} {KEY}
  allow-notify: 198.18.1.0/24 {KEY}
  outgoing-interface: {NSD_IP}
""")
    # Knot's journal (where an IXFR's changes are stored) needs its directory.
    os.makedirs(os.path.join(WORK, "knot", "db"), exist_ok=True)
    write("knot.conf", f"""server:
    listen: {KNOT_IP}@53
    rundir: {WORK}/knot
key:
  - id: {KEY}
    algorithm: hmac-sha256
    secret: {SECRET}
remote:
  - id: skuad
    address: {PRIMARY}@53
    via: {KNOT_IP}
    key: {KEY}
acl:
  - id: notify-from-skuad
    address: 198.18.1.0/24
    key: {KEY}
    action: notify
  - id: transfer-with-key
    key: {KEY}
    action: transfer
template:
  - id: default
    storage: {WORK}/knot
zone:
  - domain: example.org.
    master: skuad
    acl: [notify-from-skuad, transfer-with-key]
database:
    storage: {WORK}/knot/db
log:
  - target: {WORK}/knot.log
    any: debug
""")


def main():
    for a in (PRIMARY, NSD_IP, KNOT_IP, OTHER):
        sh("ip", "addr", "add", f"{a}/32", "dev", "lo")
    configs()
    logs = {n: open(os.path.join(WORK, f"{n}.out"), "w") for n in ("skuad", "nsd", "knot")}
    skuad = subprocess.Popen([SKUAD, "--no-xdp", "--config", os.path.join(WORK, "skuad.conf")],
                             stdout=logs["skuad"], stderr=logs["skuad"])
    procs = [skuad]
    try:
        ok, _ = wait_for(lambda: soa_serial(PRIMARY) == 10, 20)
        check(ok, "skuad serves example.org. serial 10")
        procs.append(subprocess.Popen(["nsd", "-d", "-c", os.path.join(WORK, "nsd.conf")],
                                      stdout=logs["nsd"], stderr=logs["nsd"]))
        procs.append(subprocess.Popen(["knotd", "-c", os.path.join(WORK, "knot.conf")],
                                      stdout=logs["knot"], stderr=logs["knot"]))
        checks(skuad)
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        for f in logs.values():
            f.close()
    if FAILED:
        print(f"{len(FAILED)} check(s) failed; logs in {WORK}")
        for n in ("skuad.out", "nsd.log", "knot.log"):
            p = os.path.join(WORK, n)
            if os.path.exists(p):
                print(f"--- {n} (last 40 lines)")
                with open(p) as f:
                    print("".join(f.readlines()[-40:]))
        sys.exit(1)
    print("all checks passed")


def transfers_to(ip, kind=None, serial=None):
    return [e for e in audit("xfr-out")
            if e["source"] == ip and (kind is None or e["detail"]["type"] == kind)
            and (serial is None or e["detail"]["serial"] == serial)]


def checks(skuad):
    # Initial transfer: AXFR (nothing held yet), TSIG-signed.
    for name, ip in (("NSD", NSD_IP), ("Knot", KNOT_IP)):
        ok, t = wait_for(lambda: soa_serial(ip) == 10, 30)
        check(ok, f"{name} serves serial 10 after its first transfer ({t:.1f} s)")
        check(a_record(ip, "www.example.org.") == "198.18.7.1", f"{name} serves www.example.org. from the transfer")
        check(any(e["detail"]["type"] == "AXFR" and e["actor"] == KEY for e in transfers_to(ip)),
              f"skuad's audit log: AXFR to {name} signed with {KEY}")

    # An API write: NOTIFY, then IXFR 10 -> 11 to both.
    status, body = api("POST", "/records", {"rr": "api.example.org. 300 A 198.18.7.77"})
    check(status in (200, 201), f"POST /records: {status} {body}")
    writes = audit("api-write")
    check(bool(writes) and writes[-1]["detail"].get("zone_serials") == {"example.org.": 11},
          f"api-write entry names the zone's new serial: {writes[-1]['detail'] if writes else None}")
    check(soa_serial(PRIMARY) == 11, "skuad serves serial 11 at once")
    for name, ip in (("NSD", NSD_IP), ("Knot", KNOT_IP)):
        ok, t = wait_for(lambda: soa_serial(ip) == 11, 30)
        check(ok, f"{name} serves serial 11 after the API write ({t:.1f} s: NOTIFY, then a transfer)")
        check(a_record(ip, "api.example.org.") == "198.18.7.77", f"{name} serves the record added through the API")
        ixfr = [e for e in transfers_to(ip, "IXFR", 11) if e["detail"]["from_serial"] == 10]
        check(bool(ixfr), f"skuad's audit log: IXFR 10 -> 11 to {name}: {[e['detail'] for e in transfers_to(ip)]}")
        # ...and only that: the secondary applied the IXFR (no AXFR of serial 11 after it).
        check(not transfers_to(ip, "AXFR", 11), f"{name} applied the IXFR (no AXFR fallback)")

    # A zone file change without a serial bump, then SIGHUP: serial 12 everywhere.
    with open(os.path.join(WORK, "example.org.zone"), "a") as f:
        f.write("reload IN A 198.18.7.12\n")
    skuad.send_signal(signal.SIGHUP)
    ok, _ = wait_for(lambda: soa_serial(PRIMARY) == 12, 10)
    check(ok, "after SIGHUP skuad serves serial 12 (the file still says 10)")
    for name, ip in (("NSD", NSD_IP), ("Knot", KNOT_IP)):
        ok, t = wait_for(lambda: a_record(ip, "reload.example.org.") == "198.18.7.12" and soa_serial(ip) == 12, 30)
        check(ok, f"{name} follows the reload: serial 12 and the new record ({t:.1f} s)")
        check(bool([e for e in transfers_to(ip, "IXFR", 12) if e["detail"]["from_serial"] == 11]),
              f"skuad's audit log: IXFR 11 -> 12 to {name}")

    # Bad TSIG from another address: refused, answered with the TSIG error, audited.
    out = kdig("-b", OTHER, "-y", f"hmac-sha256:{KEY}:{WRONG}", f"@{PRIMARY}", "example.org.", "AXFR")
    check("BADSIG" in out, f"a wrong secret is answered BADSIG: {out.strip().splitlines()[:2]}")
    out = kdig("-b", OTHER, "-y", f"hmac-sha256:stranger.example.:{SECRET}", f"@{PRIMARY}", "example.org.", "AXFR")
    check("BADKEY" in out, f"an unknown key is answered BADKEY: {out.strip().splitlines()[:2]}")
    out = kdig("-b", OTHER, f"@{PRIMARY}", "example.org.", "AXFR")
    check("REFUSED" in out, f"no key: REFUSED: {out.strip().splitlines()[:2]}")
    ok, _ = wait_for(lambda: [e for e in audit("xfr-refused") if e["source"] == OTHER], 5)
    refused = [e for e in audit("xfr-refused") if e["source"] == OTHER]
    check(bool(refused) and refused[0]["actor"] == "anonymous"
          and refused[0]["detail"]["reason"] == f"tsig-badsig (key {KEY})",
          f"xfr-refused audited for {OTHER}: {[e['detail'] for e in refused]}")
    # The right key from there: the whole zone, every message's TSIG verified by kdig.
    out = kdig("-b", OTHER, "-y", f"hmac-sha256:{KEY}:{SECRET}", f"@{PRIMARY}", "example.org.", "AXFR")
    soas = [l for l in out.splitlines() if "\tSOA\t" in l and not l.startswith(";")]
    check(len(soas) == 2 and "api.example.org." in out and ";; ERROR" not in out,
          f"kdig AXFR with the key: {len(soas)} SOA records, no TSIG error")
    # What the secondaries wrote is what skuad serves: compare the three AXFRs' records.
    def axfr(server, extra=()):
        o = kdig(*extra, "-y", f"hmac-sha256:{KEY}:{SECRET}", f"@{server}", "example.org.", "AXFR", "+nostats")
        return sorted(set(l.split(None, 4)[0].lower() + " " + " ".join(l.split()[2:])
                          for l in o.splitlines() if l and not l.startswith(";") and "TSIG" not in l))
    mine = axfr(PRIMARY, ("-b", OTHER))
    theirs = axfr(KNOT_IP)
    check(len(mine) == 10 and theirs == mine, f"Knot's copy of the zone equals skuad's: {set(mine) ^ set(theirs)}")


main()
