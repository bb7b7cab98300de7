#!/usr/bin/python3
"""The capture run by capture-peers.sh inside its namespace: `capture_peers.py WORK OUT`."""

import base64
import os
import socket
import struct
import subprocess
import sys
import time

import dns.message
import dns.name
import dns.rdatatype
import dns.tsig
import dns.tsigkeyring

WORK, OUT = sys.argv[1], sys.argv[2]
SECRET = base64.b64encode(bytes(range(32))).decode()
KEYNAME = "xfr.example."
LINES = [f"secret {SECRET}"]


def zone_text(serial):
    lines = ["$ORIGIN example.", "$TTL 300",
             f"@ IN SOA ns.example. admin.example. {serial} 3600 600 86400 300",
             "@ IN NS ns.example.", "ns IN A 198.18.0.2"]
    lines += [f"h{i} IN TXT \"record {i} padded to make the zone span messages\"" for i in range(2000)]
    return "\n".join(lines) + "\n"


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def capture_kdig(tag, qtype):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("198.18.0.1", 5300))
    srv.listen(1)
    kdig = subprocess.Popen(["kdig", "-y", f"hmac-sha256:{KEYNAME}:{SECRET}", "@198.18.0.1", "-p", "5300",
                             "+tcp", "+retry=0", "+timeout=2", "example.", qtype],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    srv.settimeout(10)
    conn, _ = srv.accept()
    n = struct.unpack("!H", recv_exact(conn, 2))[0]
    LINES.append(f"kdig-{tag} {recv_exact(conn, n).hex()}")
    conn.close()
    srv.close()
    kdig.wait(10)


def axfr(tag, server):
    keyring = dns.tsigkeyring.from_text({KEYNAME: SECRET})
    q = dns.message.make_query("example.", dns.rdatatype.AXFR)
    q.use_tsig(keyring, keyname=KEYNAME, algorithm=dns.tsig.HMAC_SHA256)
    wire = q.to_wire()
    s = socket.create_connection((server, 53), timeout=10)
    s.sendall(struct.pack("!H", len(wire)) + wire)
    LINES.append(f"{tag}-request {wire.hex()}")
    LINES.append(f"{tag}-request-mac {q.mac.hex()}")
    soas, i = 0, 0
    while soas < 2:
        n = struct.unpack("!H", recv_exact(s, 2))[0]
        m = recv_exact(s, n)
        LINES.append(f"{tag}-response-{i} {m.hex()}")
        i += 1
        # The stream ends with the second SOA: counted on the bytes (type SOA, class IN
        # after a name), which in this zone occur nowhere else.
        soas += m.count(b"\x00\x06\x00\x01")
        if i > 100:
            raise RuntimeError("too many messages")
    s.close()


def wait_port(ip, port):
    for _ in range(100):
        try:
            socket.create_connection((ip, port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{ip}:{port} does not answer")


def main():
    capture_kdig("axfr", "AXFR")
    capture_kdig("ixfr", "IXFR=5")
    with open(os.path.join(WORK, "example.zone"), "w") as f:
        f.write(zone_text(7))
    with open(os.path.join(WORK, "knot.conf"), "w") as f:
        f.write(f"""server:
    listen: 198.18.0.2@53
    rundir: {WORK}
key:
  - id: {KEYNAME}
    algorithm: hmac-sha256
    secret: {SECRET}
acl:
  - id: xfr
    key: {KEYNAME}
    action: transfer
template:
  - id: default
    storage: {WORK}
    file: example.zone
    zonefile-sync: -1
    journal-content: none
zone:
  - domain: example.
    acl: xfr
database:
    storage: {WORK}/knotdb
log:
  - target: {WORK}/knot.log
    any: info
""")
    with open(os.path.join(WORK, "nsd.conf"), "w") as f:
        f.write(f"""server:
  ip-address: 198.18.0.3
  port: 53
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
remote-control:
  control-enable: no
key:
  name: "{KEYNAME}"
  algorithm: hmac-sha256
  secret: "{SECRET}"
zone:
  name: "example."
  zonefile: "example.zone"
  provide-xfr: 198.18.0.0/24 {KEYNAME}
""")
    knot = subprocess.Popen(["knotd", "-c", os.path.join(WORK, "knot.conf")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    nsd = subprocess.Popen(["nsd", "-d", "-c", os.path.join(WORK, "nsd.conf")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port("198.18.0.2", 53)
        wait_port("198.18.0.3", 53)
        time.sleep(1)
        axfr("knot", "198.18.0.2")
        axfr("nsd", "198.18.0.3")
    finally:
        for p in (knot, nsd):
            p.terminate()
            p.wait(10)
    with open(OUT, "w") as f:
        f.write("\n".join(LINES) + "\n")


main()
