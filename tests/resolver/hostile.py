#!/usr/bin/python3
"""Hostile and failing upstreams against skuad as a forwarder.

Run inside a network namespace that has only loopback (kernel-appliance/skuad/tests/
e2e/hostile.rs does that): `hostile.py SKUAD_BINARY WORKDIR`. It starts scripted upstreams
(dnspython), one address each so that one upstream's failures do not mark another down
(skuad, like Unbound, stops asking an upstream that keeps timing out), and skuad with one
forward-zone per scenario, then checks what skuad's clients get:

- a reply with a wrong ID, a wrong question, from a wrong address, or garbage (shorter
  than a header, or random bytes under another ID), sent before the real one: the real
  one is answered (a resolver that gives up at the first bad reply lets anyone who finds
  the port deny service, RFC 5452); alone: SERVFAIL within the resolver's budget;
- an upstream answering `aK CNAME aK+1` for ever: SERVFAIL, after at most 12 upstream
  queries (the question and 11 restarts, as Unbound's max-query-restarts), none after;
- a TCP upstream (forward-tcp-upstream) that stops reading, with small socket buffers:
  the connection is closed once a write stalls and a new one opened; the same upstream
  answers again as soon as it reads;
- records outside the zone the upstream was asked in are not cached (the victim zone's own
  upstream answers for them afterwards);
- TC=1 over UDP goes to TCP; a TCP reply announcing 65,535 bytes and sending garbage, and
  one dripping a byte a second, end in SERVFAIL in bounded time;
- a silent upstream: SERVFAIL in bounded time; after an answer expired, a stale answer
  (EDE 3) while the upstream is down;
- 30 % packet loss between skuad and an upstream (nftables dropping a random 30 % of the
  UDP packets to and from it; `tc netem` would do the same, but this machine's kernel has
  no sch_netem): every question still answered;
- skuad is alive at the end and its cache holds no poisoned record.

Exit status 0 when every check passed; every failed check is printed.
"""

import os
import socket
import struct
import subprocess
import sys
import threading
import time

import dns.edns
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import dns.rrset

SKUAD, WORK = sys.argv[1], sys.argv[2]
PORT = 5301
SKUAD_PORT = 5353
FAILED = []

# scenario -> upstream address (127.0.0.x)
SCENARIOS = [
    "good", "wrongid", "wrongq", "spoof", "garbage", "oob", "victim", "trunc", "huge",
    "drip", "silent", "stale", "loss", "chain", "stall",
]
ADDR = {s: f"127.0.0.{10 + i}" for i, s in enumerate(SCENARIOS)}
STALE_ANSWERS = {"count": 0}
# Queries the "chain" upstream got; connections the "stall" upstream accepted.
CHAIN = {"queries": 0}
STALL = {"conns": 0, "held": []}
LOCK = threading.Lock()


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILED.append(what)


def answer(q, ip, ttl=300, n=1):
    r = dns.message.make_response(q)
    r.flags |= dns.flags.RA
    qn = q.question[0].name
    rr = dns.rrset.from_text_list(qn, ttl, "IN", "A", [f"198.18.{ip}.{i + 1}" for i in range(n)])
    r.answer.append(rr)
    return r


def behave(scn, q, tcp):
    """What the upstream of scenario `scn` sends for query q: a list of (bytes, from_addr,
    delay) for UDP; for TCP a single bytes or a special action."""
    qn = q.question[0].name
    good = answer(q, 1).to_wire()
    if scn == "good" or scn == "loss":
        return [(good, None, 0)]
    # "mixed.*": the bad reply first, then the real one.
    mixed = qn.labels[0] == b"mixed"
    then_good = [(good, None, 0.05)] if mixed else []
    if scn == "wrongid":
        bad = answer(q, 6)
        bad.id ^= 0x5A5A
        return [(bad.to_wire(), None, 0)] + then_good
    if scn == "wrongq":
        other = dns.message.make_query(dns.name.from_text("other." + str(qn)), "A")
        other.id = q.id
        return [(answer(other, 6).to_wire(), None, 0)] + then_good
    if scn == "spoof":
        # Poison from the wrong source first, then the truth.
        return [(answer(q, 6).to_wire(), "127.0.0.2", 0), (good, None, 0.05)]
    if scn == "garbage":
        # Shorter than a header, and random bytes under another ID: what an off-path
        # sender who found the port can send without knowing the ID.
        junk = struct.pack(">H", q.id ^ 0x5A5A) + os.urandom(38)
        return [(os.urandom(5), None, 0), (junk, None, 0)] + then_good
    if scn == "chain":
        # Never the answer, always one more link, and no SOA: the upstream "did not
        # follow" and the resolver asks for the target itself.
        with LOCK:
            CHAIN["queries"] += 1
        first = qn.labels[0].decode()
        k = int(first[1:]) if first[:1] == "a" and first[1:].isdigit() else 0
        r = dns.message.make_response(q)
        r.flags |= dns.flags.RA
        target = dns.name.from_text(f"a{k + 1}.chain.example.")
        r.answer.append(dns.rrset.from_text(qn, 300, "IN", "CNAME", target.to_text()))
        return [(r.to_wire(), None, 0)]
    if scn == "stall":
        return [(good, None, 0)]
    if scn == "oob":
        r = answer(q, 1)
        # Out of bailiwick: the victim zone's name, in the answer and additional sections.
        victim = dns.name.from_text("www.victim.example.")
        r.answer.append(dns.rrset.from_text(victim, 86400, "IN", "A", "6.6.6.6"))
        r.additional.append(dns.rrset.from_text(victim, 86400, "IN", "A", "6.6.6.7"))
        r.authority.append(dns.rrset.from_text("victim.example.", 86400, "IN", "NS", "ns.evil.net."))
        return [(r.to_wire(), None, 0)]
    if scn == "victim":
        return [(answer(q, 9).to_wire(), None, 0)]
    if scn == "trunc":
        if not tcp:
            r = dns.message.make_response(q)
            r.flags |= dns.flags.TC
            return [(r.to_wire(), None, 0)]
        return [(answer(q, 2, n=50).to_wire(), None, 0)]
    if scn in ("huge", "drip"):
        if not tcp:
            r = dns.message.make_response(q)
            r.flags |= dns.flags.TC
            return [(r.to_wire(), None, 0)]
        return scn  # handled by the TCP server
    if scn == "silent":
        return []
    if scn == "stale":
        STALE_ANSWERS["count"] += 1
        if STALE_ANSWERS["count"] == 1:
            return [(answer(q, 3, ttl=2).to_wire(), None, 0)]
        return []
    return []


def udp_server(scn, addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, PORT))
    spoofer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    spoofer.bind(("127.0.0.2", 0))
    while True:
        data, peer = s.recvfrom(65535)
        try:
            q = dns.message.from_wire(data)
        except Exception:
            continue
        for wire, src, delay in behave(scn, q, False):
            if delay:
                time.sleep(delay)
            try:
                (spoofer if src else s).sendto(wire, peer)
            except OSError:
                pass


def tcp_conn(scn, c):
    try:
        while True:
            ln = c.recv(2)
            if len(ln) < 2:
                return
            (n,) = struct.unpack(">H", ln)
            data = b""
            while len(data) < n:
                more = c.recv(n - len(data))
                if not more:
                    return
                data += more
            q = dns.message.from_wire(data)
            out = behave(scn, q, True)
            if out == "huge":
                c.sendall(struct.pack(">H", 65535) + os.urandom(65535) + os.urandom(4096))
                continue
            if out == "drip":
                wire = answer(q, 4).to_wire()
                for b in struct.pack(">H", len(wire)) + wire:
                    c.sendall(bytes([b]))
                    time.sleep(1)
                continue
            for wire, _, _ in out:
                c.sendall(struct.pack(">H", len(wire)) + wire)
    except OSError:
        return
    finally:
        c.close()


def tcp_server(scn, addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if scn == "stall":
        # Small buffers (inherited by the accepted sockets): a small receive window, and
        # small segments, so that little of what skuad sends is taken in.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
    s.bind((addr, PORT))
    s.listen(16)
    while True:
        c, _ = s.accept()
        if scn == "stall":
            with LOCK:
                STALL["conns"] += 1
                first = STALL["conns"] == 1
            if first:
                # The first connection is never read from (kept open, so skuad sees no
                # error, only a window that stays shut); later ones are answered.
                STALL["held"].append(c)
                continue
        threading.Thread(target=tcp_conn, args=(scn, c), daemon=True).start()


def ask(name, qtype="A", timeout=8.0, tries=1, payload=1232):
    """(response or None, seconds) from skuad over UDP."""
    q = dns.message.make_query(name, qtype, use_edns=0, payload=payload)
    t0 = time.monotonic()
    for _ in range(tries):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(timeout)
        s.sendto(q.to_wire(), ("127.0.0.1", SKUAD_PORT))
        try:
            data, _ = s.recvfrom(65535)
            return dns.message.from_wire(data), time.monotonic() - t0
        except socket.timeout:
            continue
        finally:
            s.close()
    return None, time.monotonic() - t0


def addrs(r):
    return sorted(str(rd) for rrset in r.answer for rd in rrset if rrset.rdtype == dns.rdatatype.A)


def ede_codes(r):
    return [o.code for o in r.options if o.otype == dns.edns.EDE]


def main():
    for scn, addr in ADDR.items():
        threading.Thread(target=udp_server, args=(scn, addr), daemon=True).start()
        threading.Thread(target=tcp_server, args=(scn, addr), daemon=True).start()
    conf = [
        "server:",
        f"  interface: 127.0.0.1@{SKUAD_PORT}",
        "  access-control: 127.0.0.0/8 allow",
        "  do-not-query-localhost: no",
        "  serve-expired: yes",
        "api:",
        "  control-socket: no",
    ]
    for scn, addr in ADDR.items():
        conf += ["forward-zone:", f'  name: "{scn}.example."', f"  forward-addr: {addr}@{PORT}"]
        if scn == "stall":
            conf += ["  forward-tcp-upstream: yes"]
    path = os.path.join(WORK, "skuad.conf")
    with open(path, "w") as f:
        f.write("\n".join(conf) + "\n")
    log = open(os.path.join(WORK, "skuad.log"), "w")
    skuad = subprocess.Popen([SKUAD, "--config", path], stdout=log, stderr=log)
    try:
        for _ in range(100):
            r, _ = ask("www.good.example.", timeout=0.2)
            if r is not None:
                break
        run_checks(skuad)
    finally:
        skuad.terminate()
        try:
            skuad.wait(10)
        except subprocess.TimeoutExpired:
            skuad.kill()
        log.close()
    if FAILED:
        print(f"{len(FAILED)} check(s) failed; skuad's log: {os.path.join(WORK, 'skuad.log')}")
        sys.exit(1)
    print("all checks passed")


BOUND = 6.5  # the resolver's budget (5 s) plus scheduling slack


def run_checks(skuad):
    r, _ = ask("www.good.example.")
    check(r is not None and r.rcode() == dns.rcode.NOERROR and addrs(r) == ["198.18.1.1"],
          "a good upstream is forwarded")

    for scn in ("wrongid", "wrongq", "garbage"):
        r, t = ask(f"www.{scn}.example.")
        check(r is not None and r.rcode() == dns.rcode.SERVFAIL and t <= BOUND,
              f"{scn}: only bad replies -> SERVFAIL in {t:.1f} s (<= {BOUND})")
        check(r is not None and any(c in (22, 23) for c in ede_codes(r)),
              f"{scn}: the SERVFAIL says why (EDE 22/23): {ede_codes(r) if r else None}")
    for scn in ("wrongid", "wrongq", "garbage"):
        r, _ = ask(f"mixed.{scn}.example.")
        check(r is not None and r.rcode() == dns.rcode.NOERROR and addrs(r) == ["198.18.1.1"],
              f"{scn} then the real reply: the real one is answered: "
              f"{(dns.rcode.to_text(r.rcode()), addrs(r)) if r else None}")

    r, _ = ask("www.spoof.example.")
    check(r is not None and addrs(r) == ["198.18.1.1"],
          f"a reply from another address is ignored, the real one answered: {addrs(r) if r else None}")

    r, _ = ask("www.oob.example.")
    check(r is not None and addrs(r) == ["198.18.1.1"],
          f"out-of-bailiwick records are not passed on: {addrs(r) if r else None}")
    r, _ = ask("www.victim.example.")
    check(r is not None and addrs(r) == ["198.18.9.1"],
          f"...nor cached: the victim zone's upstream answers www.victim.example.: {addrs(r) if r else None}")

    r, _ = ask("www.trunc.example.", payload=4096)
    check(r is not None and len(addrs(r)) == 50, f"TC=1 over UDP is retried over TCP: {len(addrs(r)) if r else None} records")
    for scn in ("huge", "drip"):
        r, t = ask(f"www.{scn}.example.")
        check(r is not None and r.rcode() == dns.rcode.SERVFAIL and t <= BOUND,
              f"{scn} TCP reply -> SERVFAIL in {t:.1f} s")

    r, t = ask("www.silent.example.")
    check(r is not None and r.rcode() == dns.rcode.SERVFAIL and t <= BOUND,
          f"a silent upstream -> SERVFAIL in {t:.1f} s")

    r, _ = ask("www.stale.example.")
    check(r is not None and addrs(r) == ["198.18.3.1"], "stale: first answer (TTL 2)")
    time.sleep(3)
    r, t = ask("www.stale.example.")
    check(r is not None and addrs(r) == ["198.18.3.1"] and 3 in ede_codes(r) and r.answer[0].ttl == 30,
          f"stale: served expired with EDE 3 and TTL 30 while the upstream is down ({t:.1f} s): "
          f"{(addrs(r), ede_codes(r), r.answer[0].ttl if r and r.answer else None) if r else None}")

    # 30 % loss between skuad and the upstream, both ways: every question answered. skuad
    # retries within its budget; a client whose resolution still failed asks again, as a
    # stub resolver does.
    nft = ["nft", "-f", "-"]
    rules = (
        "table inet skua_loss {\n"
        "  chain inp { type filter hook input priority 0;\n"
        f"    udp dport {PORT} numgen random mod 10 < 3 drop\n"
        f"    udp sport {PORT} numgen random mod 10 < 3 drop\n"
        "  }\n"
        "}\n"
    )
    subprocess.run(nft, input=rules.encode(), check=True)
    try:
        answered = 0
        for i in range(20):
            for _ in range(6):
                r, _ = ask(f"n{i}.loss.example.", timeout=BOUND)
                if r is not None and r.rcode() == dns.rcode.NOERROR:
                    break
            answered += r is not None and addrs(r) == ["198.18.1.1"]
        check(answered == 20, f"30 % loss: {answered}/20 questions answered")
    finally:
        subprocess.run(["nft", "delete", "table", "inet", "skua_loss"], check=False)

    check_chain()
    check_stall()

    check(skuad.poll() is None, "skuad is still running")
    r, _ = ask("www.victim.example.")
    check(r is not None and "6.6.6.6" not in addrs(r) and "6.6.6.7" not in addrs(r),
          "no poisoned record in the cache at the end")


def check_chain():
    r, t = ask("a0.chain.example.")
    with LOCK:
        at_answer = CHAIN["queries"]
    check(r is not None and r.rcode() == dns.rcode.SERVFAIL and t <= BOUND,
          f"an endless CNAME chain -> SERVFAIL in {t:.1f} s "
          f"({dns.rcode.to_text(r.rcode()) if r else None})")
    check(2 <= at_answer <= 12,
          f"an endless CNAME chain: {at_answer} upstream queries (at most 12: 11 restarts)")
    # Nothing goes on after the client's SERVFAIL: another question through skuad's
    # resolver (one task: it runs after whatever the chain left queued), then the count.
    ask("www.good.example.")
    with LOCK:
        after = CHAIN["queries"]
    check(after == at_answer, f"an endless CNAME chain: no query after the SERVFAIL ({after})")


def check_stall():
    # Small send buffers for the connections skuad opens from now on (tcp_wmem is this
    # network namespace's own): with the upstream's small receive window, a few dozen
    # queries fill both and a write stalls. (On loopback skuad's send buffer would grow to
    # megabytes first.)
    with open("/proc/sys/net/ipv4/tcp_wmem") as f:
        wmem = f.read()
    with open("/proc/sys/net/ipv4/tcp_wmem", "w") as f:
        f.write("4096 4096 16384")
    # Questions with long names, 128 at a time (skuad pipelines at most 128 queries on a
    # connection), until the stalled connection is closed and another opened: an event,
    # awaited with a bound (the write timeout is 3 s; here it takes 10-30 s, the time for
    # the queries skuad still writes to fill its buffer). Their answers (SERVFAIL) are
    # not waited for.
    labels = ".".join(c * 63 for c in "xyz") + "." + "w" * 40
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    deadline = time.monotonic() + 60
    n = 0
    try:
        while time.monotonic() < deadline:
            with LOCK:
                if STALL["conns"] >= 2:
                    break
            for _ in range(128):
                q = dns.message.make_query(f"s{n}.{labels}.stall.example.", "A")
                s.sendto(q.to_wire(), ("127.0.0.1", SKUAD_PORT))
                n += 1
            ask("www.stall.example.", timeout=1)
    finally:
        s.close()
        with open("/proc/sys/net/ipv4/tcp_wmem", "w") as f:
            f.write(wmem)
    with LOCK:
        conns = STALL["conns"]
    check(conns >= 2, f"an upstream that stops reading: its connection reopened "
                      f"({conns} connections, {n} questions)")
    # The same upstream reads on the new connection: answered (a stub asks again a few
    # times while skuad's retries on the stalled connection end).
    ok = False
    for _ in range(10):
        r, _ = ask("www.stall.example.", timeout=BOUND)
        if r is not None and r.rcode() == dns.rcode.NOERROR and addrs(r) == ["198.18.1.1"]:
            ok = True
            break
    check(ok, "an upstream that stops reading: answered again once it reads "
              f"({(dns.rcode.to_text(r.rcode()), addrs(r)) if r else None})")


if __name__ == "__main__":
    main()
