#!/usr/bin/python3
"""DNS over TLS upstreams (RFC 7858): skuad forwarding to Unbound serving DoT.

Run inside a network namespace with only loopback (kernel-appliance/skuad/tests/hostile.rs):
`dot.py SKUAD_BINARY WORKDIR`. It makes a test CA and a server certificate for
`dot.skua.example` with openssl, starts Unbound serving DoT on 127.0.0.1@853 with that
certificate (and local data), and skuad with three forward zones over TLS:

- `good.example.` -> `127.0.0.1@853#dot.skua.example`: answered;
- `wrongname.example.` -> `127.0.0.1@853#other.skua.example`: the certificate does not carry
  that name: SERVFAIL (EDE 23, network error), in bounded time;
- `plain.example.` -> TLS to a port that speaks plain DNS over TCP: SERVFAIL, no crash.

And that a second question reuses the TLS connection (Unbound counts one TLS handshake).
"""

import os
import socket
import subprocess
import sys
import time

import dns.edns
import dns.message
import dns.rcode
import dns.rdatatype

SKUAD, WORK = sys.argv[1], sys.argv[2]
SKUAD_PORT = 5353
FAILED = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILED.append(what)


def run(*args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)


def make_certs():
    ca_key, ca = os.path.join(WORK, "ca.key"), os.path.join(WORK, "ca.pem")
    key, csr, crt = (os.path.join(WORK, n) for n in ("srv.key", "srv.csr", "srv.pem"))
    ext = os.path.join(WORK, "ext.cnf")
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=Skua test CA")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", key, "-out", csr, "-subj", "/CN=dot.skua.example")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:dot.skua.example\nextendedKeyUsage=serverAuth\n")
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
        "-out", crt, "-days", "2", "-extfile", ext)
    return ca, key, crt


def ask(name, timeout=8.0):
    q = dns.message.make_query(name, "A", use_edns=0, payload=1232)
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
    return sorted(str(rd) for rrset in r.answer for rd in rrset if rrset.rdtype == dns.rdatatype.A)


def ede_codes(r):
    return [o.code for o in r.options if o.otype == dns.edns.EDE]


def main():
    ca, key, crt = make_certs()
    ub_conf = os.path.join(WORK, "unbound.conf")
    with open(ub_conf, "w") as f:
        f.write(f"""server:
  interface: 127.0.0.1@853
  interface: 127.0.0.1@5399
  tls-port: 853
  tls-service-key: "{key}"
  tls-service-pem: "{crt}"
  do-daemonize: no
  use-syslog: no
  username: ""
  chroot: ""
  pidfile: ""
  directory: "{WORK}"
  access-control: 127.0.0.0/8 allow
  extended-statistics: yes
  local-zone: "good.example." static
  local-data: "www.good.example. 300 IN A 198.18.7.1"
  local-data: "two.good.example. 300 IN A 198.18.7.2"
  local-zone: "wrongname.example." static
  local-data: "www.wrongname.example. 300 IN A 198.18.7.3"
remote-control:
  control-enable: yes
  control-interface: "{os.path.join(WORK, 'unbound.ctl')}"
  control-use-cert: no
""")
    skuad_conf = os.path.join(WORK, "skuad.conf")
    with open(skuad_conf, "w") as f:
        f.write(f"""server:
  interface: 127.0.0.1@{SKUAD_PORT}
  access-control: 127.0.0.0/8 allow
  do-not-query-localhost: no
  tls-cert-bundle: "{ca}"
api:
  control-socket: no
forward-zone:
  name: "good.example."
  forward-tls-upstream: yes
  forward-addr: 127.0.0.1@853#dot.skua.example
forward-zone:
  name: "wrongname.example."
  forward-tls-upstream: yes
  forward-addr: 127.0.0.1@853#other.skua.example
forward-zone:
  name: "plain.example."
  forward-tls-upstream: yes
  forward-addr: 127.0.0.1@5399#dot.skua.example
""")
    # Count the TCP connections opened to the DoT port (SYNs), to see them reused.
    subprocess.run(["nft", "-f", "-"], check=True, input=(
        "table inet skua_syn {\n"
        "  counter syn853 { }\n"
        "  chain out { type filter hook output priority 0;\n"
        "    tcp dport 853 tcp flags & (syn | ack) == syn counter name syn853\n"
        "  }\n"
        "}\n").encode())
    ub_log = open(os.path.join(WORK, "unbound.log"), "w")
    unbound = subprocess.Popen(["unbound", "-d", "-c", ub_conf], stdout=ub_log, stderr=ub_log)
    log = open(os.path.join(WORK, "skuad.log"), "w")
    skuad = subprocess.Popen([SKUAD, "--config", skuad_conf], stdout=log, stderr=log)
    try:
        for _ in range(100):
            r, _ = ask("ready.invalid.", timeout=0.2)
            if r is not None:
                break
        r, t = ask("www.good.example.")
        check(r is not None and addrs(r) == ["198.18.7.1"],
              f"DoT upstream with a valid certificate for #dot.skua.example: {addrs(r) if r else None} in {t:.2f} s")
        r, _ = ask("two.good.example.")
        check(r is not None and addrs(r) == ["198.18.7.2"], "a second question over DoT")
        stats = subprocess.run(["unbound-control", "-c", ub_conf, "stats_noreset"], capture_output=True,
                               text=True, timeout=20).stdout
        tcp = [l for l in stats.splitlines() if l.startswith("num.query.tls=")]
        check(tcp == ["num.query.tls=2"], f"both went over TLS to Unbound: {tcp}")
        syn = subprocess.run(["nft", "list", "counter", "inet", "skua_syn", "syn853"], capture_output=True,
                             text=True, timeout=20).stdout
        check("packets 1 " in syn, f"...on one connection (RFC 7766 reuse): {syn.split('packets')[-1].strip() if 'packets' in syn else syn}")
        r, t = ask("www.wrongname.example.")
        check(r is not None and r.rcode() == dns.rcode.SERVFAIL and t <= 6.5,
              f"a certificate without the #name: SERVFAIL in {t:.1f} s")
        check(r is not None and 23 in ede_codes(r), f"...with EDE 23: {ede_codes(r) if r else None}")
        r, t = ask("www.plain.example.")
        check(r is not None and r.rcode() == dns.rcode.SERVFAIL and t <= 6.5,
              f"TLS to a plain DNS port: SERVFAIL in {t:.1f} s")
        check(skuad.poll() is None, "skuad is still running")
    finally:
        for p in (skuad, unbound):
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        log.close()
        ub_log.close()
    if FAILED:
        print(f"{len(FAILED)} check(s) failed; logs in {WORK}")
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
