#!/usr/bin/env python3
"""Drive the Skua appliance in QEMU (TCG) from the host: boot, wait for a console line, send
commands to the guest's root console, query DNS from the host side of the tap, power off.

Used by `just vm-test` (this file's `test` command) and the image tests. Every wait is
bounded; the namespace and QEMU are removed on exit, on failure too.

    qemu/vm.py test [--disk DISK] [--queues N] [--timeout S]
    qemu/vm.py tamper [--disk DISK]
    qemu/vm.py upgrade --disk skua_1.raw --good skua_2.update --broken skua_3.update

The guest's console is a unix socket (QEMU `-chardev socket`), logged to WORK/console.log; the
appliance autologins root on it and skuad logs there (StandardError=journal+console).
"""

import argparse
import base64
import glob
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GUEST = "198.18.1.2"
OVMF_CODE = "/usr/share/OVMF/OVMF_CODE_4M.fd"
OVMF_VARS = "/usr/share/OVMF/OVMF_VARS_4M.fd"


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class VM:
    """One QEMU guest on a tap in its own network namespace."""

    def __init__(self, disk, queues=1, name="skua-vmt", snapshot=True, credentials=None, smp=2, drives=(),
                 accel="tcg"):
        self.disk = disk
        # tcg here; kvm where the host can run guests: -cpu host, and vhost-net when present.
        self.accel = accel
        self.cmdline = None
        self.drives = list(drives)
        self.queues = queues
        self.ns = f"{name}-{os.getpid()}"
        self.tap = "skuatap0"
        self.work = tempfile.mkdtemp(prefix="skua-vm-")
        self.console_log = os.path.join(self.work, "console.log")
        self.sock_path = os.path.join(self.work, "console.sock")
        self.snapshot = snapshot
        self.credentials = credentials or {}
        self.smp = smp
        self.proc = None
        self.sock = None
        self.started = None

    # --- lifecycle -------------------------------------------------------------------
    def start(self):
        subprocess.run([os.path.join(HERE, "netns.sh"), "up", self.ns, self.tap, str(self.queues)], check=True)
        vars_fd = os.path.join(self.work, "vars.fd")
        shutil.copy(OVMF_VARS, vars_fd)
        drive = f"if=virtio,format=raw,file={self.disk}"
        if self.snapshot:
            drive += ",snapshot=on"
        nic = "virtio-net-pci,netdev=n0,mac=52:54:00:5c:0a:02"
        if self.queues > 1:
            nic += f",mq=on,vectors={2 * self.queues + 2}"
        kvm = self.accel == "kvm"
        vhost = "on" if kvm and os.path.exists("/dev/vhost-net") else "off"
        cmd = [
            "ip", "netns", "exec", self.ns,
            "qemu-system-x86_64", "-accel", self.accel, "-machine", "q35", "-cpu", "host" if kvm else "max",
            "-m", "1G", "-smp", str(self.smp), "-nodefaults", "-display", "none",
            "-chardev", f"socket,id=con,path={self.sock_path},server=on,wait=off",
            "-serial", "chardev:con",
            "-drive", f"if=pflash,format=raw,readonly=on,file={OVMF_CODE}",
            "-drive", f"if=pflash,format=raw,file={vars_fd}",
            "-drive", drive,
        ]
        # Extra read-only disks (update bundles): /dev/vdb, /dev/vdc... in the guest.
        for extra in self.drives:
            cmd += ["-drive", f"if=virtio,format=raw,readonly=on,file={extra}"]
        cmd += [
            "-netdev", f"tap,id=n0,ifname={self.tap},script=no,downscript=no,vhost={vhost},queues={self.queues}",
            "-device", nic,
        ]
        for name, data in self.credentials.items():
            b64 = base64.b64encode(data.encode()).decode()
            cmd += ["-smbios", f"type=11,value=io.systemd.credential.binary:{name}={b64}"]
        self.qemu_log = open(os.path.join(self.work, "qemu.log"), "w")
        self.proc = subprocess.Popen(cmd, stdout=self.qemu_log, stderr=subprocess.STDOUT, start_new_session=True)
        self.cmdline = cmd[4:]  # without `ip netns exec NS`
        self.started = time.monotonic()
        # The socket appears once QEMU has set up its chardevs.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if os.path.exists(self.sock_path):
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"QEMU exited: {self.read(os.path.join(self.work, 'qemu.log'))}")
            time.sleep(0.1)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.sock_path)
        # Drain the console continuously: a serial port whose host side stops reading stalls
        # the guest on its next write (the UART never empties).
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()
        log(f"QEMU started ({self.disk}, {self.queues} queue(s)); console log {self.console_log}")

    def _drain(self):
        with open(self.console_log + ".raw", "ab") as raw:
            while True:
                try:
                    data = self.sock.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                raw.write(data)
                raw.flush()

    def stop(self, timeout=60):
        """Powers off from the console; kills QEMU if it does not end in time."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                self.send("systemctl poweroff")
            except OSError:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def cleanup(self, keep_logs=False):
        self.kill()
        if self.sock:
            self.sock.close()
        subprocess.run([os.path.join(HERE, "netns.sh"), "down", self.ns], check=False)
        if not keep_logs:
            shutil.rmtree(self.work, ignore_errors=True)

    # --- console -----------------------------------------------------------------------
    @staticmethod
    def read(path):
        try:
            with open(path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def console(self):
        return self.read(self.console_log + ".raw")

    def wait_for(self, pattern, timeout, start=0, what=None):
        """Waits until `pattern` (regex, `.` matching newlines too) appears in the console log
        after offset `start`; returns (match, end offset). Raises on timeout or QEMU exit."""
        rx = re.compile(pattern, re.S)
        deadline = time.monotonic() + timeout
        while True:
            text = self.console()
            m = rx.search(text, start)
            if m:
                return m, m.end()
            if self.proc.poll() is not None:
                raise RuntimeError(f"QEMU exited ({self.proc.returncode}) waiting for {what or pattern}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {what or pattern!r} on the console within {timeout} s")
            time.sleep(0.2)

    def send(self, line):
        self.sock.sendall(line.encode() + b"\n")

    def run(self, command, timeout=30):
        """Runs a shell command on the guest's root console and returns its output (between
        two markers, so that interleaved log lines elsewhere do not matter much)."""
        tag = f"{os.getpid()}{int(time.monotonic() * 1000) % 1000000}"
        start = len(self.console())
        self.send(f"echo BEGIN-{tag}; {command}; echo END-{tag} $?")
        m, _ = self.wait_for(rf"BEGIN-{tag}\r?\n(.*?)END-{tag} (\d+)", timeout, start, what=command)
        return m.group(1), int(m.group(2))

    # --- host side ---------------------------------------------------------------------
    def host(self, args, timeout=20):
        return subprocess.run(["ip", "netns", "exec", self.ns] + args, capture_output=True, text=True, timeout=timeout)

    def kdig(self, name, qtype="A", tcp=False, timeout=3, tries=3):
        args = ["kdig", "+short", f"+timeout={timeout}", f"+retry={tries - 1}", f"@{GUEST}", name, qtype]
        if tcp:
            args.insert(1, "+tcp")
        r = self.host(args, timeout=timeout * tries + 10)
        return r.stdout.strip()


def counters(text):
    """The last SIGUSR1 dump in `text`: program counters and summed queue counters."""
    prog, queues = {}, {}
    for line in text.splitlines():
        m = re.search(r"xdp program on (\S+): (.*)", line)
        if m:
            prog = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
        m = re.search(r"xdp (\S+) queue (\d+): rx (\d+), answered (\d+)", line)
        if m:
            queues[int(m.group(2))] = {"rx": int(m.group(3)), "answered": int(m.group(4))}
    return prog, queues


def dump_counters(vm):
    start = len(vm.console())
    vm.send("kill -USR1 $(pidof skuad)")
    vm.wait_for(r"xdp program on \S+: .*answered=\d+", 30, start, what="the counters after SIGUSR1")
    time.sleep(0.3)
    return counters(vm.console()[start:])


def check_dns_through_xdp(vm):
    """Queries the demo zone from the host side (UDP and TCP, an NXDOMAIN too) and proves with
    the guest's counters that every UDP query was answered through XDP. Returns the seconds
    from QEMU start to the first answer."""
    before_prog, before_q = dump_counters(vm)
    answers = {
        ("www.skua.test.", "A", False): "198.18.1.80",
        ("www.skua.test.", "AAAA", False): "fd00::80",
        ("ns.skua.test.", "A", False): "198.18.1.2",
        ("www.skua.test.", "A", True): "198.18.1.80",
    }
    first = None
    for (name, qtype, tcp), want in answers.items():
        got = vm.kdig(name, qtype, tcp)
        if first is None:
            first = time.monotonic() - vm.started
        if got != want:
            raise RuntimeError(f"kdig {'+tcp ' if tcp else ''}{name} {qtype}: got {got!r}, want {want!r}")
        log(f"kdig {'+tcp ' if tcp else ''}{name} {qtype} -> {got}")
    nx = vm.host(["kdig", "+timeout=3", "+retry=2", f"@{GUEST}", "nope.skua.test.", "A"]).stdout
    if "NXDOMAIN" not in nx:
        raise RuntimeError(f"nope.skua.test.: want NXDOMAIN, got:\n{nx}")
    after_prog, after_q = dump_counters(vm)
    in_prog = after_prog.get("answered", 0) - before_prog.get("answered", 0)
    by_queue = sum(q["answered"] for q in after_q.values()) - sum(q["answered"] for q in before_q.values())
    # The UDP queries above plus the NXDOMAIN; TCP goes to the kernel socket.
    udp_queries = sum(1 for (_, _, tcp) in answers if not tcp) + 1
    log(f"guest counters: answered in the XDP program +{in_prog}, by the AF_XDP queues +{by_queue}")
    if in_prog + by_queue < udp_queries:
        raise RuntimeError(f"only {in_prog + by_queue} of {udp_queries} UDP queries were answered through XDP "
                           f"(program {after_prog}, queues {after_q})")
    return first


def newest_image(outdir=os.path.join(ROOT, "image/mkosi.output")):
    imgs = [p for p in glob.glob(os.path.join(outdir, "skua_*.raw"))
            if re.search(r"skua_\d+\.raw$", p)]
    imgs.sort(key=lambda p: int(re.search(r"skua_(\d+)\.raw$", p).group(1)))
    return imgs[-1] if imgs else None


def test(args):
    """Boot, prove DNS answered through XDP in the guest, power off."""
    disk = args.disk or newest_image()
    if not disk:
        print("vm.py: no image: run 'just image' first", file=sys.stderr)
        return 2
    vm = VM(disk, queues=args.queues)
    ok = False
    try:
        vm.start()
        vm.wait_for(r"root@skua", args.timeout, what="the root console")
        if args.shell:
            out, rc = vm.run("systemctl status skuad --no-pager -l; journalctl -u skuad --no-pager -n 30", 60)
            print(out)
        m, _ = vm.wait_for(r"xdp: self-test passed on eth0|xdp: not used|XDP required but unavailable",
                           args.timeout, what="skuad's XDP start-up")
        if "passed" not in m.group(0):
            raise RuntimeError(f"skuad did not start its XDP plane: {m.group(0)}")
        boot_s = time.monotonic() - vm.started
        log(f"skuad's XDP self-test passed {boot_s:.1f} s after QEMU start")
        time.sleep(1)
        first = check_dns_through_xdp(vm)
        log(f"first answer {first:.1f} s after QEMU start")
        ok = True
    except Exception as e:  # noqa: BLE001 - any failure ends the test with the console shown
        log(f"FAILED: {e}")
        print("---- console (last 60 lines) ----", file=sys.stderr)
        print("\n".join(vm.console().splitlines()[-60:]), file=sys.stderr)
    finally:
        rc = vm.stop()
        log(f"QEMU exited with {rc}")
        vm.cleanup(keep_logs=not ok)
        if not ok:
            log(f"logs kept in {vm.work}")
    return 0 if ok else 1

def padded_copy(src, work):
    """A copy of `src` padded to a whole MiB, so that QEMU can attach it as a raw disk."""
    dst = os.path.join(work, os.path.basename(src))
    shutil.copy(src, dst)
    size = os.path.getsize(dst)
    os.truncate(dst, (size + (1 << 20) - 1) // (1 << 20) * (1 << 20))
    return dst


def image_version(vm):
    out, rc = vm.run(". /usr/lib/os-release; echo IMAGE_VERSION=$IMAGE_VERSION", 60)
    m = re.search(r"IMAGE_VERSION=(\d+)", out)
    if rc != 0 or not m:
        raise RuntimeError(f"cannot read the guest's IMAGE_VERSION: {out!r}")
    return int(m.group(1))


def wait_booted(vm, mark, timeout, version):
    """Waits for the boot that follows console offset `mark`: skuad's XDP self-test, the root
    console; checks that it runs `version`. Returns the console offset after the self-test."""
    _, end = vm.wait_for(r"xdp: self-test passed on eth0", timeout, mark, what=f"skuad on version {version}")
    # The console's root shell: a prompt seen after `mark` may still be the old boot's (printed
    # just after the reboot command was sent), so ask until a command comes back.
    deadline = time.monotonic() + timeout
    while True:
        try:
            vm.run("true", 15)
            break
        except TimeoutError:
            if time.monotonic() > deadline:
                raise
    got = image_version(vm)
    if got != version:
        raise RuntimeError(f"the guest runs version {got}, want {version}")
    log(f"version {version} is up ({time.monotonic() - vm.started:.0f} s since QEMU start)")
    return end


def wait_blessed(vm, version, timeout):
    """systemd-bless-boot drops the boot counter once skua-health passed: skua_N.efi appears."""
    deadline = time.monotonic() + timeout
    while True:
        out, _ = vm.run("ls -1 /efi/EFI/Linux; systemctl is-active skua-health.service systemd-bless-boot.service", 60)
        if re.search(rf"^skua_{version}\.efi\s*$", out, re.M):
            log(f"version {version} blessed (health gate passed): {' '.join(out.split())}")
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"version {version} was not blessed within {timeout} s:\n{out}")
        time.sleep(5)


# An API token for the upgrade test (its SHA-256 goes in the guest's configuration).
VM_TOKEN = "vm-upgrade-test-token-0123456789"


def check_persisted(vm):
    got = vm.kdig("persist.skua.test.", "A")
    if got != "198.18.1.77":
        raise RuntimeError(f"persist.skua.test. (data partition): got {got!r}, want '198.18.1.77'")
    log("persist.skua.test. A -> 198.18.1.77 (from the data partition)")
    got = vm.kdig("api.skua.test.", "A")
    if got != "198.18.1.78":
        raise RuntimeError(f"api.skua.test. (added through the REST API): got {got!r}, want '198.18.1.78'")
    log("api.skua.test. A -> 198.18.1.78 (added through the REST API, kept in its state file)")


def upgrade(args):
    """v1 boots; v2 is installed with `skuactl upgrade` and the VM comes back on v2 (blessed by
    the health gate); a broken v3 is installed, fails its health gate, and systemd-boot
    returns to v2 by itself."""
    work = tempfile.mkdtemp(prefix="skua-upgrade-")
    disk = os.path.join(work, "disk.raw")
    subprocess.run(["cp", "--sparse=always", args.disk, disk], check=True)
    good, bad = padded_copy(args.good, work), padded_copy(args.broken, work)
    vm = VM(disk, snapshot=False, drives=[good, bad])
    ok = False
    try:
        vm.start()
        wait_booted(vm, 0, args.timeout, 1)
        out, rc = vm.run("skuactl slots", 60)
        log("slots on version 1:\n" + out.strip())
        # Operator data on the data partition (created at this first boot) must outlive
        # upgrades and rollbacks.
        mark = len(vm.console())
        token_hash = hashlib.sha256(VM_TOKEN.encode()).hexdigest()
        out, rc = vm.run("findmnt -n -o SOURCE,FSTYPE /var/lib/skua && mkdir -p /var/lib/skua/conf.d && "
                         "printf 'server:\\n    local-data: \"persist.skua.test. 300 IN A 198.18.1.77\"\\n' "
                         "> /var/lib/skua/conf.d/persist.conf && "
                         f"printf 'api:\\n    token: \"vm dns sha256:{token_hash}\"\\n' "
                         "> /var/lib/skua/conf.d/api.conf && systemctl reload skuad", 60)
        if rc != 0:
            raise RuntimeError(f"no data partition at /var/lib/skua, or the reload failed: {out!r}")
        # `systemctl reload` returns once the signal is sent; the reload itself logs.
        vm.wait_for(r"skuad info: reloaded: ", 120, mark, what="skuad's reload")
        log(f"data partition: {out.strip().splitlines()[0]}")
        # A record through the REST API (skuactl in the guest): written to the state file on
        # the data partition, so upgrades and rollbacks keep it too.
        out, rc = vm.run(f"SKUA_TOKEN={VM_TOKEN} skuactl record add 'api.skua.test. 300 IN A 198.18.1.78'", 60)
        if rc != 0:
            raise RuntimeError(f"skuactl record add through the API failed (exit {rc}): {out!r}")
        check_persisted(vm)
        out, rc = vm.run("skuactl upgrade /dev/vdb", 600)
        log(f"skuactl upgrade /dev/vdb (exit {rc}):\n{out.strip()}")
        if rc != 0 or "installed version 2 in slot B" not in out:
            raise RuntimeError("installing version 2 failed")
        mark = len(vm.console())
        t0 = time.monotonic()
        vm.send("systemctl reboot")
        wait_booted(vm, mark, args.timeout, 2)
        log(f"reboot into version 2: {time.monotonic() - t0:.0f} s")
        wait_blessed(vm, 2, 180)
        check_dns_through_xdp(vm)
        check_persisted(vm)
        out, _ = vm.run("skuactl slots", 60)
        log("slots on version 2:\n" + out.strip())
        if not re.search(r"slot B: version 2 .*\[running\]", out):
            raise RuntimeError("version 2 is not running from slot B")

        out, rc = vm.run("skuactl upgrade --tries 1 /dev/vdc", 600)
        log(f"skuactl upgrade --tries 1 /dev/vdc (exit {rc}):\n{out.strip()}")
        if rc != 0 or "installed version 3 in slot A" not in out:
            raise RuntimeError("installing version 3 failed")
        mark = len(vm.console())
        t0 = time.monotonic()
        vm.send("systemctl reboot")
        # Version 3 boots, skuad cannot serve its address, the health gate gives up and the
        # unit's FailureAction reboots; systemd-boot then skips skua_3+0-1.efi.
        m, end = vm.wait_for(r"skuactl: unhealthy: [^\r\n]*", args.timeout + 180, mark,
                             what="version 3's health gate failing")
        log(f"version 3 failed its health gate: {m.group(0).strip()}")
        if "xdp: self-test passed" in vm.console()[mark:end]:
            raise RuntimeError("version 3's skuad passed its self-test: it was meant to be broken")
        wait_booted(vm, end, args.timeout + 120, 2)
        log(f"rolled back to version 2: {time.monotonic() - t0:.0f} s after the reboot into version 3")
        out, _ = vm.run("skuactl slots", 60)
        log("slots after the rollback:\n" + out.strip())
        if not re.search(r"entry skua_3\+0-1\.efi: boots slot A, bad", out):
            raise RuntimeError("version 3's boot entry is not marked bad")
        if not re.search(r"slot B: version 2 .*\[running\]", out):
            raise RuntimeError("version 2 is not running from slot B after the rollback")
        check_dns_through_xdp(vm)
        check_persisted(vm)
        ok = True
        log("upgrade test passed: 1 -> 2 (blessed), 3 (broken) rolled back to 2")
    except Exception as e:  # noqa: BLE001
        log(f"FAILED: {e}")
        print("---- console (last 80 lines) ----", file=sys.stderr)
        print("\n".join(vm.console().splitlines()[-80:]), file=sys.stderr)
    finally:
        rc = vm.stop()
        log(f"QEMU exited with {rc}")
        vm.cleanup(keep_logs=not ok)
        if not ok:
            log(f"logs kept in {vm.work}")
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


def partitions(disk):
    """The disk's GPT partitions: name, type GUID, start and size in bytes."""
    import json
    out = subprocess.run(["sfdisk", "-J", disk], capture_output=True, text=True, check=True).stdout
    table = json.loads(out)["partitiontable"]
    sector = table.get("sectorsize", 512)
    return [(p.get("name", ""), p["type"].upper(), p["start"] * sector, p["size"] * sector)
            for p in table["partitions"]]


ROOT_X86_64 = "4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709"


def tamper(args):
    """Flip one byte of the active root partition (in its erofs superblock, which every boot
    reads) in a copy of the image: dm-verity must refuse it, the boot must not reach skuad,
    and nothing may answer DNS."""
    disk = args.disk or newest_image()
    if not disk:
        print("vm.py: no image: run 'just image' first", file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="skua-tamper-")
    copy = os.path.join(work, "tampered.raw")
    subprocess.run(["cp", "--sparse=always", disk, copy], check=True)
    root = [p for p in partitions(copy) if p[1] == ROOT_X86_64 and p[0] != "_empty"]
    if not root:
        print(f"vm.py: no populated root partition in {disk}", file=sys.stderr)
        return 2
    name, _, start, _ = root[0]
    offset = start + 1024 + 8  # erofs superblock (RFC-less: EROFS_SUPER_OFFSET 1024), past its magic
    with open(copy, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x01]))
    log(f"flipped the byte at {offset} (partition {name} + 1032) of a copy of {disk}")
    vm = VM(copy, snapshot=True)
    ok = False
    try:
        vm.start()
        # "device-mapper: verity: ... data block N is corrupted" is the refusal; an intact
        # image never prints it (the boot test would see it too).
        m, _ = vm.wait_for(r"verity: [^\n]*is corrupted|xdp: self-test passed", args.timeout,
                           what="a verity refusal (or skuad starting)")
        if "self-test passed" in m.group(0):
            raise RuntimeError("the tampered image booted to skuad")
        log(f"refused: {m.group(0).strip()[:120]}")
        # Give a broken boot time to go wrong further; DNS must stay silent throughout.
        time.sleep(20)
        got = vm.kdig("www.skua.test.", "A")
        if got:
            raise RuntimeError(f"the tampered image answered DNS: {got!r}")
        if "self-test passed" in vm.console():
            raise RuntimeError("skuad started on the tampered root")
        ok = True
        log("tamper test passed: verity refused the modified root, nothing answered")
    except Exception as e:  # noqa: BLE001
        log(f"FAILED: {e}")
        print("\n".join(vm.console().splitlines()[-40:]), file=sys.stderr)
    finally:
        vm.kill()
        vm.cleanup(keep_logs=not ok)
        if not ok:
            log(f"logs kept in {vm.work}")
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("test", help="boot, query DNS through XDP in the guest, power off")
    t.add_argument("--disk")
    t.add_argument("--queues", type=int, default=1)
    t.add_argument("--timeout", type=int, default=240, help="seconds to wait for skuad's XDP start-up")
    t.add_argument("--shell", action="store_true", help="print skuad's status from the guest first")
    t = sub.add_parser("tamper", help="a byte flipped in the root partition must make verity refuse the boot")
    t.add_argument("--disk")
    t.add_argument("--timeout", type=int, default=240)
    t = sub.add_parser("upgrade", help="A/B upgrade: v1 -> v2 blessed, broken v3 rolled back to v2")
    t.add_argument("--disk", required=True, help="version 1's disk image (skua_1.raw)")
    t.add_argument("--good", required=True, help="version 2's update bundle (skua_2.update)")
    t.add_argument("--broken", required=True, help="a broken version 3's bundle (image/build.sh --broken 3)")
    t.add_argument("--timeout", type=int, default=240)
    args = p.parse_args()
    if args.cmd == "test":
        sys.exit(test(args))
    if args.cmd == "tamper":
        sys.exit(tamper(args))
    if args.cmd == "upgrade":
        sys.exit(upgrade(args))


if __name__ == "__main__":
    main()
