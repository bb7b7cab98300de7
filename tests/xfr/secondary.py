#!/usr/bin/python3
"""skuad as the secondary of NSD and Knot, with TSIG (docs/zone-transfer.md, "Secondary").

Run inside a network namespace with only loopback (kernel-appliance/skuad/tests/e2e/xfr_interop.rs):
`secondary.py SKUAD_BINARY WORKDIR`. It puts 198.18.2.1-3 on the namespace's loopback and
starts:

- skuad on 198.18.2.1:53, secondary of `nsd.example.` (`primary: 198.18.2.2 KEY`, Unbound's
  directive with the key), of `knot.example.` (`request-xfr: 198.18.2.3@53 KEY`, NSD's) and
  of `bad.example.` (from Knot, with a key whose secret Knot does not share), each with
  `allow-notify:` for the /24 and `provide-xfr:` (so its copies can be compared), an audit
  log, its control socket;
- NSD 4.6 on 198.18.2.2, primary of `nsd.example.` (`provide-xfr:` and `notify:` with the
  key, `create-ixfr:`/`store-ixfr:` so it answers IXFR), its control on a UNIX socket;
- Knot 3.2 on 198.18.2.3, primary of `knot.example.` (NOTIFY and transfers with the key,
  its journal holding the changes made with knotc) and of `bad.example.` (signed with
  the other secret).

Checks: skuad transfers both zones at start (AXFR, audited `xfr-in` with the primary and
the key) and serves them; a change on NSD (zone file edited, serial bumped, `nsd-control
reload`) and one on Knot (`knotc zone-begin`/`zone-set`/`zone-commit`) reach skuad by
NOTIFY and IXFR (audited as IXFR from the old serial to the new, the new record served);
skuad's copies are what the primaries serve (AXFRs compared) and are written to its zone
files; `bad.example.`, whose primary answers BADSIG and whose NOTIFY does not verify, is
never served (SERVFAIL) and both failures are audited (`xfr-in-failed`, `xfr-refused`).
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
BADKEY = "bad.example.org."
SECRET = base64.b64encode(bytes(range(100, 132))).decode()
BAD_SKUAD = base64.b64encode(bytes(range(1, 33))).decode()
BAD_KNOT = base64.b64encode(bytes(range(2, 34))).decode()
SKUAD_IP, NSD_IP, KNOT_IP = "198.18.2.1", "198.18.2.2", "198.18.2.3"
FAILED = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILED.append(what)


def sh(*args):
    subprocess.run(args, check=True, timeout=60)


def run(*args):
    r = subprocess.run(args, capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout + r.stderr


def kdig(*args, timeout=15):
    r = subprocess.run(["kdig", "+retry=0", "+timeout=3", *args], capture_output=True, text=True, timeout=timeout)
    return r.stdout + r.stderr


def soa_serial(server, zone):
    out = kdig(f"@{server}", zone, "SOA", "+short")
    parts = out.split()
    return int(parts[2]) if len(parts) >= 7 and parts[2].isdigit() else None


def a_record(server, name):
    return kdig(f"@{server}", name, "A", "+short").strip()


def status(server, name):
    out = kdig(f"@{server}", name, "A")
    for line in out.splitlines():
        if "status:" in line:
            return line.split("status:")[1].replace(";", ",").split(",")[0].strip()
    return None


def wait_for(pred, seconds, step=0.2):
    t0 = time.monotonic()
    while True:
        v = pred()
        if v or time.monotonic() - t0 > seconds:
            return v, time.monotonic() - t0
        time.sleep(step)


def audit(kind):
    path = os.path.join(WORK, "audit.log")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [e for e in map(json.loads, f) if e["kind"] == kind]


def write(name, text, mode=0o644):
    path = os.path.join(WORK, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def zone(origin, serial, primary_ip, extra=""):
    return f"""$ORIGIN {origin}
$TTL 300
@ IN SOA ns1.{origin} admin.{origin} {serial} 3600 600 86400 300
@ IN NS ns1.{origin}
ns1 IN A {primary_ip}
www IN A 198.18.8.{1 if origin.startswith('nsd') else 2}
mail IN MX 10 www.{origin}
txt IN TXT "transferred from {origin}"
{extra}"""


def configs():
    write("xfr.key", SECRET + "\n", 0o600)
    write("bad.key", BAD_SKUAD + "\n", 0o600)
    write("audit.key", "ef" * 32 + "\n", 0o600)
    os.makedirs(os.path.join(WORK, "skuad"), exist_ok=True)
    write("skuad.conf", f"""server:
  interface: {SKUAD_IP}@53
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
  secret: file:{WORK}/xfr.key
tsig-key:
  name: {BADKEY}
  secret: file:{WORK}/bad.key
auth-zone:
  name: nsd.example.
  zonefile: "{WORK}/skuad/nsd.example.zone"
  primary: {NSD_IP} {KEY}
  allow-notify: 198.18.2.0/24 {KEY}
  provide-xfr: 198.18.2.0/24 {KEY}
auth-zone:
  name: knot.example.
  zonefile: "{WORK}/skuad/knot.example.zone"
  request-xfr: {KNOT_IP}@53 {KEY}
  allow-notify: 198.18.2.0/24 {KEY}
  provide-xfr: 198.18.2.0/24 {KEY}
auth-zone:
  name: bad.example.
  zonefile: "{WORK}/skuad/bad.example.zone"
  request-xfr: {KNOT_IP} {BADKEY}
  allow-notify: 198.18.2.0/24 {BADKEY}
""")
    write("nsd/nsd.example.zone", zone("nsd.example.", 2024010101, NSD_IP))
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
  control-enable: yes
  control-interface: "{WORK}/nsd/nsd.sock"
key:
  name: "{KEY}"
  algorithm: hmac-sha256
  secret: "{SECRET}"
zone:
  name: "nsd.example."
  zonefile: "nsd.example.zone"
  provide-xfr: 198.18.2.0/24 {KEY}
  notify: {SKUAD_IP} {KEY}
  outgoing-interface: {NSD_IP}
  store-ixfr: yes
  create-ixfr: yes
""")
    os.makedirs(os.path.join(WORK, "knot", "db"), exist_ok=True)
    write("knot/knot.example.zone", zone("knot.example.", 1, KNOT_IP))
    write("knot/bad.example.zone", zone("bad.example.", 1, KNOT_IP))
    write("knot.conf", f"""server:
    listen: {KNOT_IP}@53
    rundir: {WORK}/knot
key:
  - id: {KEY}
    algorithm: hmac-sha256
    secret: {SECRET}
  - id: {BADKEY}
    algorithm: hmac-sha256
    secret: {BAD_KNOT}
remote:
  - id: skuad
    address: {SKUAD_IP}@53
    via: {KNOT_IP}
    key: {KEY}
  - id: skuad-bad
    address: {SKUAD_IP}@53
    via: {KNOT_IP}
    key: {BADKEY}
acl:
  - id: xfr
    address: 198.18.2.0/24
    key: {KEY}
    action: transfer
  - id: xfr-bad
    address: 198.18.2.0/24
    key: {BADKEY}
    action: transfer
template:
  - id: default
    storage: {WORK}/knot
    journal-content: changes
    serial-policy: increment
zone:
  - domain: knot.example.
    notify: skuad
    acl: xfr
  - domain: bad.example.
    notify: skuad-bad
    acl: xfr-bad
database:
    storage: {WORK}/knot/db
log:
  - target: {WORK}/knot.log
    any: debug
""")


def xfr_in(primary_ip, zone_name, kind=None):
    return [e for e in audit("xfr-in")
            if e["source"] == primary_ip and e["detail"]["zone"] == zone_name
            and (kind is None or e["detail"]["type"] == kind)]


def axfr(server, zone_name):
    o = kdig("-y", f"hmac-sha256:{KEY}:{SECRET}", f"@{server}", zone_name, "AXFR", "+nostats")
    return sorted(set(l.split(None, 4)[0].lower() + " " + " ".join(l.split()[2:])
                      for l in o.splitlines() if l and not l.startswith(";") and "TSIG" not in l))


def checks():
    # First transfers: AXFR, signed, served.
    for name, ip, z, serial in (("NSD", NSD_IP, "nsd.example.", 2024010101), ("Knot", KNOT_IP, "knot.example.", 1)):
        ok, t = wait_for(lambda: soa_serial(SKUAD_IP, z) == serial, 40)
        check(ok, f"skuad serves {z} serial {serial} transferred from {name} ({t:.1f} s)")
        check(a_record(SKUAD_IP, f"www.{z}") == ("198.18.8.1" if name == "NSD" else "198.18.8.2"),
              f"skuad answers www.{z} from the transfer")
        entries = xfr_in(ip, z, "AXFR")
        check(bool(entries) and entries[0]["actor"] == KEY and entries[0]["detail"]["serial"] == serial,
              f"audit: xfr-in AXFR of {z} from {name} with {KEY}: {[e['detail'] for e in xfr_in(ip, z)]}")

    # A change on NSD: zone file edited, serial bumped, nsd-control reload: NOTIFY, IXFR.
    write("nsd/nsd.example.zone", zone("nsd.example.", 2024010102, NSD_IP, "added IN A 198.18.8.11\n"))
    rc, out = run("nsd-control", "-c", os.path.join(WORK, "nsd.conf"), "reload", "nsd.example.")
    check(rc == 0, f"nsd-control reload nsd.example.: {out.strip()}")
    ok, t = wait_for(lambda: a_record(SKUAD_IP, "added.nsd.example.") == "198.18.8.11", 30)
    check(ok, f"skuad serves the record added on NSD ({t:.1f} s: NOTIFY, then a transfer)")
    check(soa_serial(SKUAD_IP, "nsd.example.") == 2024010102, "skuad serves NSD's new serial")
    ixfr = [e for e in xfr_in(NSD_IP, "nsd.example.", "IXFR")
            if e["detail"]["from_serial"] == 2024010101 and e["detail"]["serial"] == 2024010102]
    check(bool(ixfr), f"audit: IXFR 2024010101 -> 2024010102 from NSD: {[e['detail'] for e in xfr_in(NSD_IP, 'nsd.example.')]}")

    # A change on Knot through knotc (a dynamic change, serial incremented): NOTIFY, IXFR.
    knotc = ["knotc", "-c", os.path.join(WORK, "knot.conf")]
    rc1, o1 = run(*knotc, "zone-begin", "knot.example.")
    rc2, o2 = run(*knotc, "zone-set", "knot.example.", "added", "300", "A", "198.18.8.22")
    rc3, o3 = run(*knotc, "zone-commit", "knot.example.")
    check(rc1 == rc2 == rc3 == 0, f"knotc zone-begin/zone-set/zone-commit: {o1.strip()} {o2.strip()} {o3.strip()}")
    ok, t = wait_for(lambda: a_record(SKUAD_IP, "added.knot.example.") == "198.18.8.22", 30)
    check(ok, f"skuad serves the record added on Knot ({t:.1f} s)")
    check(soa_serial(SKUAD_IP, "knot.example.") == soa_serial(KNOT_IP, "knot.example.") == 2,
          "skuad and Knot serve serial 2")
    ixfr = [e for e in xfr_in(KNOT_IP, "knot.example.", "IXFR")
            if e["detail"]["from_serial"] == 1 and e["detail"]["serial"] == 2]
    check(bool(ixfr) and ixfr[0]["detail"]["added"] == 1,
          f"audit: IXFR 1 -> 2 from Knot, one record added: {[e['detail'] for e in xfr_in(KNOT_IP, 'knot.example.')]}")

    # skuad's copies are the primaries' zones, in memory and in its zone files.
    for name, ip, z in (("NSD", NSD_IP, "nsd.example."), ("Knot", KNOT_IP, "knot.example.")):
        mine, theirs = axfr(SKUAD_IP, z), axfr(ip, z)
        check(len(mine) >= 7 and mine == theirs, f"skuad's copy of {z} equals {name}'s: {set(mine) ^ set(theirs)}")
        path = os.path.join(WORK, "skuad", z + "zone")
        text = open(path).read() if os.path.exists(path) else ""
        check(f"added.{z}" in text, f"skuad wrote {z} to {path}")

    # bad.example.: Knot answers skuad's signed SOA query BADSIG and signs its NOTIFY with
    # a secret skuad does not have: never served, both audited.
    check(status(SKUAD_IP, "www.bad.example.") == "SERVFAIL", "bad.example. is not served (SERVFAIL)")
    # skuad's signed SOA query reaches Knot (after the back-off if Knot was not up at
    # skuad's first tries), which refuses it; Knot says so in its log.
    def knot_refused():
        with open(os.path.join(WORK, "knot.log")) as f:
            return "[bad.example.] TSIG, key 'bad.example.org.', verification failed 'BADSIG'" in f.read()
    ok, t = wait_for(knot_refused, 30)
    check(ok, f"Knot refuses skuad's SOA query for bad.example. with BADSIG ({t:.1f} s)")
    time.sleep(1)  # skuad reads the answer and reports the failure
    # skuad's failure may be counted in an aggregated entry (the first failure of that
    # primary and key this minute may be Knot not listening yet): it is checked after
    # skuad stops, when every window is written (after_stop).
    ok, _ = wait_for(lambda: [e for e in audit("xfr-refused") if e["detail"].get("type") == "NOTIFY"], 20)
    refused = [e for e in audit("xfr-refused") if e["detail"].get("type") == "NOTIFY"]
    check(bool(refused) and refused[0]["detail"]["zone"] == "bad.example."
          and "tsig-badsig" in refused[0]["detail"]["reason"],
          f"audit: Knot's NOTIFY for bad.example. refused (BADSIG): {[e['detail'] for e in refused]}")
    check(not xfr_in(KNOT_IP, "bad.example."), "nothing transferred for bad.example.")


def after_stop():
    failed = [e for e in audit("xfr-in-failed") if e["source"] == KNOT_IP and e["actor"] == BADKEY]
    check(bool(failed) and "BADSIG" in json.dumps([e["detail"] for e in failed])
          and failed[0]["detail"]["zone"] == "bad.example.",
          f"audit: xfr-in-failed from Knot for bad.example. (BADSIG): {[e['detail'] for e in failed]}")


def main():
    for a in (SKUAD_IP, NSD_IP, KNOT_IP):
        sh("ip", "addr", "add", f"{a}/32", "dev", "lo")
    configs()
    logs = {n: open(os.path.join(WORK, f"{n}.out"), "w") for n in ("skuad", "nsd", "knot")}
    skuad = subprocess.Popen([SKUAD, "--no-xdp", "--config", os.path.join(WORK, "skuad.conf")],
                             stdout=logs["skuad"], stderr=logs["skuad"])
    procs = [skuad]
    try:
        ok, _ = wait_for(lambda: status(SKUAD_IP, "www.nsd.example.") == "SERVFAIL", 20)
        check(ok, "skuad is up; nothing transferred yet: SERVFAIL")
        procs.append(subprocess.Popen(["nsd", "-d", "-c", os.path.join(WORK, "nsd.conf")],
                                      stdout=logs["nsd"], stderr=logs["nsd"]))
        procs.append(subprocess.Popen(["knotd", "-c", os.path.join(WORK, "knot.conf")],
                                      stdout=logs["knot"], stderr=logs["knot"]))
        checks()
    finally:
        # skuad first: its audit log gets every aggregated entry when it stops.
        procs.sort(key=lambda p: p is not skuad)
        for p in procs:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        for f in logs.values():
            f.close()
    after_stop()
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


main()
