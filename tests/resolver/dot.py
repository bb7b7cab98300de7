#!/usr/bin/python3
"""DNS over TLS upstreams (RFC 7858): skuad forwarding to Unbound serving DoT.

Run inside a network namespace with only loopback (kernel-appliance/skuad/tests/e2e/hostile.rs):
`dot.py SKUAD_BINARY WORKDIR`. It makes a test CA and a server certificate for
`dot.skua.example` with openssl, starts Unbound serving DoT on 127.0.0.1@853 with that
certificate (and local data), and skuad with three forward zones over TLS:

- `good.example.` -> `127.0.0.1@853#dot.skua.example`: answered;
- `wrongname.example.` -> `127.0.0.1@853#other.skua.example`: the certificate does not carry
  that name: SERVFAIL (EDE 23, network error), in bounded time;
- `plain.example.` -> TLS to a port that speaks plain DNS over TCP: SERVFAIL, no crash;
- three DoT upstreams (Python, ssl) whose certificates carry the right name but must not be
  believed: signed by another CA, expired (signed by the trusted CA), and self-signed:
  SERVFAIL (EDE 23), and none of them ever receives the query (the handshake fails first).

And that a second question reuses the TLS connection (Unbound counts one TLS handshake).
"""

import datetime
import os
import socket
import ssl
import subprocess
import sys
import threading
import time

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

import dns.edns
import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
import dns.exception

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


def load_ca(ca_pem, ca_key_pem):
    with open(ca_pem, "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read())
    with open(ca_key_pem, "rb") as f:
        key = serialization.load_pem_private_key(f.read(), None)
    return cert, key


def issue(tag, issuer=None, days=(-1, 2), ca=False):
    """A certificate for dot.skua.example valid from now+days[0] to now+days[1] (days),
    signed by `issuer` (cert, key), or self-signed; written as TAG.pem / TAG.key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dot.skua.example")])
    now = datetime.datetime.now(datetime.timezone.utc)
    icert, ikey = issuer if issuer else (None, key)
    cert = (x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(icert.subject if icert else name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now + datetime.timedelta(days=days[0]))
            .not_valid_after(now + datetime.timedelta(days=days[1]))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("dot.skua.example")]), False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), True)
            .sign(ikey, hashes.SHA256()))
    crt, kf = os.path.join(WORK, f"{tag}.pem"), os.path.join(WORK, f"{tag}.key")
    with open(crt, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(kf, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return crt, kf


class DotResponder:
    """A DoT server on ADDR:853 with the given certificate: answers A 198.18.7.9 to every
    query that gets through the handshake, and counts them."""

    def __init__(self, addr, crt, key):
        self.queries = 0
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(crt, key)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((addr, 853))
        self.sock.listen(16)
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            conn, _ = self.sock.accept()
            threading.Thread(target=self.one, args=(conn,), daemon=True).start()

    def one(self, conn):
        conn.settimeout(5)
        try:
            with self.ctx.wrap_socket(conn, server_side=True) as t:
                while True:
                    n = int.from_bytes(t.recv(2), "big")
                    data = b""
                    while len(data) < n:
                        chunk = t.recv(n - len(data))
                        if not chunk:
                            return
                        data += chunk
                    q = dns.message.from_wire(data)
                    self.queries += 1
                    r = dns.message.make_response(q)
                    r.answer.append(dns.rrset.from_text(q.question[0].name, 300, "IN", "A", "198.18.7.9"))
                    w = r.to_wire()
                    t.sendall(len(w).to_bytes(2, "big") + w)
        except (OSError, ValueError, dns.exception.DNSException):
            pass


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
    trusted = load_ca(ca, os.path.join(WORK, "ca.key"))
    other_ca = x509.load_pem_x509_certificate(open(issue("otherca", ca=True)[0], "rb").read())
    other_key = serialization.load_pem_private_key(open(os.path.join(WORK, "otherca.key"), "rb").read(), None)
    bad = {
        # zone label: (responder address, certificate)
        "untrusted": ("127.0.0.31", issue("untrusted", (other_ca, other_key))),
        "expired": ("127.0.0.32", issue("expired", trusted, days=(-3, -1))),
        "selfsigned": ("127.0.0.33", issue("selfsigned")),
        # The control: the same responder with a good certificate is believed.
        "trusted": ("127.0.0.34", issue("trusted", trusted)),
    }
    responders = {z: DotResponder(a, *c) for z, (a, c) in bad.items()}
    bad_zones = "".join(f"""forward-zone:
  name: "{z}.example."
  forward-tls-upstream: yes
  forward-addr: {a}@853#dot.skua.example
""" for z, (a, _) in bad.items())
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
{bad_zones}""")
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
        r, _ = ask("www.trusted.example.")
        check(r is not None and addrs(r) == ["198.18.7.9"] and responders["trusted"].queries == 1,
              f"the control: the same DoT responder with a trusted certificate is believed "
              f"({addrs(r) if r else None}, {responders['trusted'].queries} queries)")
        for z, resp in responders.items():
            if z == "trusted":
                continue
            r, t = ask(f"www.{z}.example.")
            check(r is not None and r.rcode() == dns.rcode.SERVFAIL and 23 in ede_codes(r) and t <= 6.5,
                  f"a DoT upstream whose certificate is {z}: SERVFAIL with EDE 23 in {t:.1f} s "
                  f"({dns.rcode.to_text(r.rcode()) if r else None}, EDE {ede_codes(r) if r else None})")
            check(resp.queries == 0, f"...and the {z} upstream never got the query ({resp.queries})")
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
