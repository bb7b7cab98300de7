#!/usr/bin/env python3
"""Drive the Skua appliance in QEMU (TCG) from the host: boot, wait for a console line, send
commands to the guest's root console, query DNS from the host side of the tap, power off.

Used by `just vm-test` (this file's `test` command) and the image tests. Every wait is
bounded; the namespace and QEMU are removed on exit, on failure too.

    qemu/vm.py test [--disk DISK] [--queues N] [--timeout S]
    qemu/vm.py tamper [--disk DISK]
    qemu/vm.py upgrade --disk skua_1.raw --good skua_2.update --broken skua_3.update
    qemu/vm.py upgrade-loop --runs N --disk skua_1.raw --good skua_2.update --broken skua_3.update

The guest's console is a unix socket (QEMU `-chardev socket`), logged to WORK/console.log; the
appliance autologins root on it and skuad logs there (StandardError=journal+console).
"""

import argparse
import base64
import glob
import hashlib
import json
import os
import queue
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


class QMP:
    """A QMP client on QEMU's monitor socket. A reader thread files the events (RESET,
    SHUTDOWN, STOP...) with the host time and the console offset at which they arrived, so a
    hung reboot can be placed: did QEMU reset at all, and what did the console show after."""

    def __init__(self, path, console_len, events_log):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.file = self.sock.makefile("rb")
        self.console_len = console_len
        self.events = []  # (monotonic time, console offset, event dict)
        self.events_log = open(events_log, "a")
        self.replies = queue.Queue()
        self.lock = threading.Lock()
        self.next_id = 0
        json.loads(self.file.readline())  # the greeting
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.command("qmp_capabilities")

    def _read(self):
        while True:
            try:
                line = self.file.readline()
            except (OSError, ValueError):
                line = b""
            if not line:
                self.replies.put(None)
                return
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "event" in msg:
                offset = self.console_len()
                self.events.append((time.monotonic(), offset, msg))
                self.events_log.write(f"{time.strftime('%H:%M:%S')} console@{offset} {json.dumps(msg)}\n")
                self.events_log.flush()
            else:
                self.replies.put(msg)

    def command(self, name, timeout=30, **arguments):
        """Runs a QMP command; returns its "return" value, raises on an error or no reply."""
        with self.lock:
            self.next_id += 1
            cmd = {"execute": name, "id": self.next_id}
            if arguments:
                cmd["arguments"] = arguments
            self.sock.sendall(json.dumps(cmd).encode() + b"\n")
            deadline = time.monotonic() + timeout
            while True:
                try:
                    msg = self.replies.get(timeout=max(0.1, deadline - time.monotonic()))
                except queue.Empty:
                    raise TimeoutError(f"no QMP reply to {name} within {timeout} s") from None
                if msg is None:
                    raise OSError("QMP connection closed")
                if msg.get("id") != self.next_id:
                    continue
                if "error" in msg:
                    raise RuntimeError(f"QMP {name}: {msg['error'].get('desc', msg['error'])}")
                return msg.get("return")

    def hmp(self, command_line, timeout=30):
        return self.command("human-monitor-command", timeout=timeout, **{"command-line": command_line})

    def hmp_on(self, command_line, cpu=None, timeout=30):
        """An HMP command, on CPU `cpu` for the commands that take the monitor's CPU."""
        args = {"command-line": command_line}
        if cpu is not None:
            args["cpu-index"] = cpu
        return self.command("human-monitor-command", timeout=timeout, **args)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
        self.events_log.close()


class VM:
    """One QEMU guest on a tap in its own network namespace."""

    def __init__(self, disk, queues=1, name="skua-vmt", snapshot=True, credentials=None, smp=2, drives=(),
                 accel="tcg", screen=False):
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
        self.qmp_path = os.path.join(self.work, "qmp.sock")
        self.qmp = None
        # A VGA device only for `screendump` when a wait times out (the guest's console is the
        # serial port): what the firmware drew, if it got that far.
        self.screen = screen
        self.console_bytes = 0
        self.console_last = None  # monotonic time of the last console output
        self.console_closed = None  # why the console reader stopped, if it did
        self.snapshot = snapshot
        self.credentials = credentials or {}
        self.smp = smp
        self.proc = None
        self.sock = None
        self.started = None
        self.last_mark = Mark(0, 0, 0, 0, cold=True)

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
            "-qmp", f"unix:{self.qmp_path},server=on,wait=off",
            # Every CPU reset, with the registers just before it (a few KB per reset).
            "-d", "cpu_reset", "-D", os.path.join(self.work, "qemu-debug.log"),
            "-drive", f"if=pflash,format=raw,readonly=on,file={OVMF_CODE}",
            "-drive", f"if=pflash,format=raw,file={vars_fd}",
            "-drive", drive,
        ]
        # Extra read-only disks (update bundles): /dev/vdb, /dev/vdc... in the guest.
        for extra in self.drives:
            cmd += ["-drive", f"if=virtio,format=raw,readonly=on,file={extra}"]
        if self.screen:
            cmd += ["-device", "VGA"]
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
        # The sockets appear once QEMU has set up its chardevs.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if os.path.exists(self.sock_path) and os.path.exists(self.qmp_path):
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
        self.qmp = QMP(self.qmp_path, lambda: self.console_bytes, os.path.join(self.work, "qmp-events.log"))
        log(f"QEMU started ({self.disk}, {self.queues} queue(s)); console log {self.console_log}")

    def _drain(self):
        """Console bytes to console.log.raw, and to console.timeline when they came (seconds
        since QEMU start, console offset; a line at most every half second)."""
        written = 0
        with open(self.console_log + ".raw", "ab") as raw, \
                open(os.path.join(self.work, "console.timeline"), "a") as timeline:
            while True:
                try:
                    data = self.sock.recv(65536)
                except OSError as e:
                    self.console_closed = f"console socket error: {e}"
                    return
                if not data:
                    self.console_closed = "console socket closed by QEMU"
                    return
                raw.write(data)
                raw.flush()
                self.console_bytes += len(data)
                self.console_last = time.monotonic()
                if self.console_last - written >= 0.5:
                    written = self.console_last
                    timeline.write(f"{self.console_last - self.started:.1f} {self.console_bytes}\n")
                    timeline.flush()

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
        if self.qmp:
            self.qmp.close()
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
            if self.console_closed:
                raise RuntimeError(f"{self.console_closed} waiting for {what or pattern}")
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

    # --- reboots and diagnostics ----------------------------------------------------------
    def mark(self):
        """A point to follow a (re)boot from: console offsets (characters for wait_for, bytes
        for the QMP events), time, QMP events so far. Taken before `systemctl reboot`."""
        self.last_mark = Mark(len(self.console()), self.console_bytes, time.monotonic(),
                              len(self.qmp.events) if self.qmp else 0, cold=False)
        return self.last_mark

    def boot_progress(self, mark=None):
        """How far the boot after `mark` got, as (kind, text): kind "hang" when the machine
        stopped before the kernel (no reset, or no firmware output after it), else "fail"."""
        mark = mark or self.last_mark
        now = time.monotonic()
        raw = self.raw_console()
        resets = [e for e in (self.qmp.events[mark.events:] if self.qmp else []) if e[2].get("event") == "RESET"]
        restarted = RESTART_RX.search(raw, mark.bytes)
        if mark.cold:
            start, t_reset, what = 0, self.started, "QEMU start"
        elif resets:
            t_reset, start, _ = resets[-1]
            what = f"the reset at +{t_reset - self.started:.0f} s"
        elif restarted:
            return "hang", (f"the guest restarted ({restarted.group(0).decode()!r}) but QEMU never reset it "
                            f"(no RESET event in {now - mark.time:.0f} s): QEMU hang")
        else:
            return "fail", f"the guest did not restart in {now - mark.time:.0f} s (its shutdown did not finish)"
        quiet = f"; last console output {now - self.console_last:.0f} s ago" if self.console_last else ""
        firmware = FIRMWARE_RX.search(raw, start)
        kernel = KERNEL_RX.search(raw, start)
        userspace = USERSPACE_RX.search(raw, start)
        if not firmware and not kernel:
            return "hang", (f"no firmware output in {now - t_reset:.0f} s after {what}: firmware/QEMU hang"
                            f" (console {len(raw) - start} bytes since{quiet})")
        if not kernel:
            return "hang", (f"firmware reached ({firmware.group(0).decode()!r}) but no kernel in "
                            f"{now - t_reset:.0f} s after {what}: boot loader or UKI{quiet}")
        if not userspace:
            return "fail", f"the kernel started but not systemd ({now - t_reset:.0f} s after {what}){quiet}"
        return "fail", f"booted to systemd after {what}: the boot went on but not as expected{quiet}"

    def resets(self):
        """Guest-requested resets (reboots) QEMU has done so far."""
        return sum(1 for _, _, e in (self.qmp.events if self.qmp else [])
                   if e.get("event") == "RESET" and e.get("data", {}).get("guest"))

    def raw_console(self):
        try:
            with open(self.console_log + ".raw", "rb") as f:
                return f.read()
        except FileNotFoundError:
            return b""

    def diagnose(self, reason, mark=None):
        """Before QEMU is killed: what the machine is doing, in diagnosis-N.txt in the kept
        work directory (QMP events with console offsets; ten samples of each CPU's state;
        status, CPUs, every CPU's registers twice, each local APIC, the code and stack at each
        PC; the CPU resets QEMU logged) and a screendump; and a verdict: a hang (no reset, no
        firmware output after it) or a boot that went on and failed later. Returns (kind,
        verdict)."""
        kind, verdict = self.boot_progress(mark)
        self.diag_count = getattr(self, "diag_count", 0) + 1
        n = self.diag_count
        path = os.path.join(self.work, f"diagnosis-{n}.txt")
        body = ["QMP events:"]
        body += [f"  +{t - self.started:.1f} s console@{offset} {json.dumps(ev)}"
                 for t, offset, ev in (self.qmp.events if self.qmp else [])]
        if self.qmp and self.proc.poll() is None:
            try:
                cpus = [c["cpu-index"] for c in self.qmp.command("query-cpus-fast")]
            except (OSError, RuntimeError, TimeoutError) as e:
                cpus = []
                body.append(f"query-cpus-fast: {e} (QEMU's monitor does not answer: QEMU itself hangs)")
                verdict += "; QEMU's monitor does not answer"
            # Where each CPU is: ten samples of its state, summed up in the verdict.
            samples = {}
            for _ in range(10 if cpus else 0):
                for c in cpus:
                    try:
                        samples.setdefault(c, []).append(self.qmp.hmp_on("info registers", c))
                    except (OSError, RuntimeError, TimeoutError):
                        pass
                time.sleep(0.3)
            states = cpu_states(samples)
            if states:
                verdict += f"; CPUs: {states}"
                if kind == "hang" and re.search(r"halted [^;]*firmware", states) \
                        and re.search(r"running [^;]*firmware", states):
                    verdict += (" - an application processor halted in the firmware while the boot processor"
                                " spins: its INIT-SIPI wake-up was lost (docs/upgrades.md)")
            sections = [("info status", None), ("info cpus", None), ("info registers -a", None)]
            for c in cpus:
                sections += [("info lapic", c), ("x/12i $pc", c), ("x/32gx $rsp", c)]
            sections += [("info registers -a", "again, 2 s later: a CPU whose RIP moved is spinning")]
            for cmd, arg in sections:
                if isinstance(arg, str):
                    time.sleep(2)
                    body.append(f"\n==== {cmd} ({arg})")
                    arg = None
                else:
                    body.append(f"\n==== {cmd}{'' if arg is None else f' (CPU {arg})'}")
                try:
                    body.append((self.qmp.hmp_on(cmd, arg) or "").rstrip("\n"))
                except (OSError, RuntimeError, TimeoutError) as e:
                    body.append(f"(failed: {e})")
            if self.screen:
                shot = os.path.join(self.work, f"screen-{n}.png")
                try:
                    self.qmp.command("screendump", filename=shot, format="png")
                except (OSError, RuntimeError, TimeoutError):
                    try:
                        self.qmp.command("screendump", filename=shot[:-4] + ".ppm")
                    except (OSError, RuntimeError, TimeoutError) as e:
                        body.append(f"screendump: {e}")
        else:
            body.append(f"QEMU has exited ({self.proc.returncode}): no monitor")
        body.append("\n==== CPU resets QEMU logged (-d cpu_reset: system resets, and each INIT of an AP)")
        body.append(reset_summary(os.path.join(self.work, "qemu-debug.log")))
        with open(path, "w") as f:
            f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} ({time.monotonic() - self.started:.0f} s since QEMU start)\n"
                    f"timed out: {reason}\nverdict: {kind}: {verdict}\n"
                    f"QEMU command line: {' '.join(self.cmdline or [])}\n\n" + "\n".join(body) + "\n")
        log(f"{kind.upper()}: {verdict}")
        log(f"diagnosis (CPU states, registers, APICs, QMP events, CPU resets, screendump) in {path}")
        return kind, verdict

    # --- host side ---------------------------------------------------------------------
    def host(self, args, timeout=20):
        return subprocess.run(["ip", "netns", "exec", self.ns] + args, capture_output=True, text=True, timeout=timeout)

    def kdig(self, name, qtype="A", tcp=False, timeout=3, tries=3):
        args = ["kdig", "+short", f"+timeout={timeout}", f"+retry={tries - 1}", f"@{GUEST}", name, qtype]
        if tcp:
            args.insert(1, "+tcp")
        r = self.host(args, timeout=timeout * tries + 10)
        return r.stdout.strip()


def cpu_states(samples):
    """'0: running 3fe9e996..3f02b50f (firmware, 64-bit, IF=0); 1: halted 3f059731 (firmware,
    64-bit, IF=0)' from samples of `info registers` per CPU."""
    out = []
    for cpu, regs in sorted(samples.items()):
        rips, halted, modes, ifs = [], [], set(), set()
        for r in regs:
            m = re.search(r"[RE]IP=([0-9a-f]+) [RE]FL=([0-9a-f]+) .*HLT=(\d)", r)
            if not m:
                continue
            rips.append(int(m.group(1), 16))
            ifs.add("IF=1" if int(m.group(2), 16) & 0x200 else "IF=0")
            halted.append(m.group(3) == "1")
            cs = re.search(r"^CS =.*\b(CS64|CS32|CS16)\b", r, re.M)
            modes.add({"CS64": "64-bit", "CS32": "32-bit", "CS16": "16-bit"}.get(cs.group(1)) if cs else "real mode")
        if not rips:
            continue
        where = "kernel" if min(rips) >= 0xffff800000000000 else "firmware" if max(rips) < 1 << 32 else "?"
        state = "halted" if all(halted) else "running" if not any(halted) else "halting"
        span = f"{min(rips):x}" if min(rips) == max(rips) else f"{min(rips):x}..{max(rips):x}"
        out.append(f"{cpu}: {state} {span} ({where}, {'/'.join(sorted(modes))}, {'/'.join(sorted(ifs))})")
    return "; ".join(out)


def reset_summary(path):
    """The CPU resets QEMU logged (-d cpu_reset): each CPU and where it was when reset."""
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except FileNotFoundError:
        return "(no qemu-debug.log)"
    lines = []
    for m in re.finditer(r"CPU Reset \(CPU (\d+)\)\n(?:.*\n){0,4}?.*?[RE]IP=([0-9a-f]+) .*HLT=(\d)", text):
        lines.append(f"CPU {m.group(1)} reset at {m.group(2)}{' (halted)' if m.group(3) == '1' else ''}")
    return "\n".join(lines) or "(none logged)"


class Mark:
    """Where a (re)boot starts: console offsets (characters, bytes), time, QMP events."""

    def __init__(self, offset, nbytes, t, events, cold):
        self.offset, self.bytes, self.time, self.events, self.cold = offset, nbytes, t, events, cold


# What the console shows after a reset, in order: the kernel's last words before it, the
# firmware (OVMF's boot manager; systemd-boot's stub), the kernel, systemd.
RESTART_RX = re.compile(rb"reboot: (?:machine restart|Restarting system)")
FIRMWARE_RX = re.compile(rb"\x1b\[2J\x1b\[01;01H|BdsDxe: [^\r\n]*|EFI stub: [^\r\n]*")
KERNEL_RX = re.compile(rb"Linux version \d[^\r\n]*")
USERSPACE_RX = re.compile(rb"systemd\[1\]|Welcome to |\[  OK  \]")


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
    vm = VM(disk, queues=args.queues, screen=True, smp=args.smp)
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
        # The local control socket: skuactl finds it and needs no token (root is admin).
        out, rc = vm.run("stat -c '%a %U' /run/skua/control.sock; env -u SKUA_TOKEN skuactl status", 60)
        if rc != 0 or "600 root" not in out or "dataplane" not in out:
            raise RuntimeError(f"skuactl status over the control socket (exit {rc}): {out!r}")
        log("skuactl status over /run/skua/control.sock (mode 600, root), no token: ok")
        ok = True
    except Exception as e:  # noqa: BLE001 - any failure ends the test with the console shown
        log(f"FAILED: {e}")
        if isinstance(e, TimeoutError) and vm.proc is not None and vm.proc.poll() is None:
            vm.diagnose(str(e))
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


def wait_shell(vm, timeout):
    """The console's root shell answers. A prompt seen after a reboot may still be the old
    boot's, and a line typed before the autologin shell reads its terminal is lost (the tty
    is flushed), so ask until a command comes back."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            vm.run("true", 15)
            return
        except TimeoutError:
            if time.monotonic() > deadline:
                raise


def wait_booted(vm, mark, timeout, version):
    """Waits for the boot that follows console offset `mark`: skuad's XDP self-test, the root
    console; checks that it runs `version`. Returns the console offset after the self-test."""
    _, end = vm.wait_for(r"xdp: self-test passed on eth0", timeout, mark, what=f"skuad on version {version}")
    wait_shell(vm, timeout)
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


# --- certificates by ACME on the data partition ------------------------------------------
# pebble (Debian's package, Let's Encrypt's test ACME server) runs on the host side of the
# VM's namespace; the guest's skuad orders a certificate from it by HTTP-01 (pebble resolves
# the name through the guest's skuad and fetches the token from the guest's port 80), keeps
# it and its ACME account under /var/lib/skua/tls on the data partition, and serves DNS over
# TLS with it. An upgrade and a rollback must keep serving that very certificate, without a
# new order (docs/image.md, "Certificates").
HOST = "198.18.1.1"
ACME_NAME = "dot.skua.test"
ACME_DIR = f"https://{HOST}:14000/dir"
TLS_DIR = "/var/lib/skua/tls"


def sh(cmd, cwd, timeout=60):
    subprocess.run(cmd, shell=True, cwd=cwd, check=True, timeout=timeout,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class Pebble:
    """pebble in the VM's namespace: its HTTPS certificate from a test CA made here (the
    guest trusts that CA with `ca-bundle:`), HTTP-01 validated on the guest's port 80, names
    resolved through the guest's skuad. Its log counts accounts, orders and certificates."""

    def __init__(self, vm, work):
        self.vm, self.work, self.proc = vm, work, None
        self.ca = os.path.join(work, "acme-ca.pem")
        self.log_path = os.path.join(work, "pebble.log")
        sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout acme-ca.key "
           "-out acme-ca.pem -days 2 -subj '/CN=Skua VM test ACME CA'", work)
        with open(os.path.join(work, "pebble.cnf"), "w") as f:
            f.write(f"subjectAltName=IP:{HOST}\nextendedKeyUsage=serverAuth\n")
        sh("openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout pebble.key -out pebble.csr "
           "-subj '/CN=pebble' && openssl x509 -req -in pebble.csr -CA acme-ca.pem -CAkey acme-ca.key "
           "-CAcreateserial -out pebble.pem -days 2 -extfile pebble.cnf", work)
        with open(os.path.join(work, "pebble.json"), "w") as f:
            json.dump({"pebble": {
                "listenAddress": f"{HOST}:14000", "managementListenAddress": f"{HOST}:15000",
                "certificate": os.path.join(work, "pebble.pem"), "privateKey": os.path.join(work, "pebble.key"),
                "httpPort": 80, "tlsPort": 443, "ocspResponderURL": "",
                "externalAccountBindingRequired": False}}, f)

    def start(self):
        env = dict(os.environ, PEBBLE_VA_NOSLEEP="1", PEBBLE_WFE_NONCEREJECT="0")
        self.logf = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", self.vm.ns, "pebble", "-config", os.path.join(self.work, "pebble.json"),
             "-dnsserver", f"{GUEST}:53"],
            stdout=self.logf, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + 30
        while True:
            r = self.vm.host(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "3",
                              "--cacert", self.ca, ACME_DIR])
            if r.stdout.strip() == "200":
                log(f"pebble serves its directory at {ACME_DIR} (log {self.log_path})")
                return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"pebble did not come up: {self.read_log()[-2000:]}")
            time.sleep(0.5)

    def read_log(self):
        return VM.read(self.log_path)

    def counts(self):
        """(accounts, orders, certificates issued) from pebble's log."""
        text = self.read_log()
        return (len(re.findall(r"There are now \d+ accounts in memory", text)),
                len(re.findall(r"Added order \S+ to the db", text)),
                len(re.findall(r"Issued certificate serial \S+", text)))

    def root(self):
        """pebble's issuing root (made anew at each pebble start), as a PEM file here."""
        out = os.path.join(self.work, "pebble-root.pem")
        r = self.vm.host(["curl", "-s", "-S", "--max-time", "5", "--cacert", self.ca, "-o", out,
                          f"https://{HOST}:15000/roots/0"])
        if r.returncode != 0:
            raise RuntimeError(f"pebble's root: {r.stderr.strip()}")
        return out

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        if self.proc is not None:
            self.logf.close()


def guest_write(vm, path, text, mode):
    """Writes `text` (printable, no single quotes) to `path` in the guest, line by line over
    the console (a tty line holds 4095 characters: certificates fit)."""
    lines = " ".join(f"'{line}'" for line in text.strip().splitlines())
    if "'" in text or len(lines) > 3500:
        raise ValueError(f"{path}: cannot be written over the console")
    out, rc = vm.run(f"printf '%s\\n' {lines} > {path} && chmod {mode} {path}", 60)
    if rc != 0:
        raise RuntimeError(f"writing {path} in the guest failed: {out!r}")


def served_certificate(vm, root):
    """DNS over TLS from the host to the guest: the certificate's serial and SHA-256
    fingerprint (openssl s_client), and kdig's answer over TLS with the chain checked against
    pebble's root for the ACME name."""
    r = vm.host(["sh", "-c", f"echo | timeout 30 openssl s_client -connect {GUEST}:853 -servername {ACME_NAME} "
                 "-alpn dot 2>/dev/null | openssl x509 -noout -serial -fingerprint -sha256"], timeout=40)
    serial = re.search(r"serial=([0-9A-Fa-f]+)", r.stdout)
    fpr = re.search(r"Fingerprint=([0-9A-F:]+)", r.stdout)
    if not serial or not fpr:
        raise RuntimeError(f"no certificate from {GUEST}:853: {r.stdout!r} {r.stderr!r}")
    k = vm.host(["kdig", "+short", "+timeout=5", "+retry=1", "+tls", f"+tls-ca={root}",
                 f"+tls-hostname={ACME_NAME}", f"@{GUEST}", "-p", "853", "www.skua.test.", "A"], timeout=40)
    if k.stdout.strip() != "198.18.1.80":
        raise RuntimeError(f"kdig +tls (pebble's root, {ACME_NAME}): {k.stdout!r} {k.stderr!r}")
    return serial.group(1).upper(), fpr.group(1)


def account_digest(vm):
    out, rc = vm.run(f"sha256sum {TLS_DIR}/acme-account.json; stat -c '%a %U' {TLS_DIR} {TLS_DIR}/acme-account.json "
                     f"{TLS_DIR}/key.pem", 60)
    m = re.search(r"^([0-9a-f]{64})\s", out, re.M)
    if rc != 0 or not m:
        raise RuntimeError(f"no ACME account file in {TLS_DIR}: {out!r}")
    modes = re.findall(r"^(\d+) (\S+)\s*$", out, re.M)
    if modes != [("700", "root"), ("600", "root"), ("600", "root")]:
        raise RuntimeError(f"{TLS_DIR} must be 0700 and its account file and key 0600, root's: {modes}")
    return m.group(1)


def acme_setup(vm, pebble, timeout):
    """The guest's skuad gets a certificate by ACME from pebble; returns what to compare after
    the upgrade: (serial, fingerprint, account file digest, pebble's counts)."""
    # The image makes the directory (tmpfiles.d/skua.conf, applied by skuad.service after the
    # data partition is mounted) on the data partition.
    out, rc = vm.run(f"findmnt -n -o SOURCE --target {TLS_DIR}; stat -c '%a %U' {TLS_DIR}", 60)
    if rc != 0 or "700 root" not in out or "/dev/" not in out:
        raise RuntimeError(f"{TLS_DIR} is not a 0700 directory of root's on the data partition: {out!r}")
    pebble.start()
    with open(pebble.ca) as f:
        guest_write(vm, f"{TLS_DIR}/acme-ca.pem", f.read(), "644")
    conf = "\n".join([
        "server:",
        f"    local-data: \"{ACME_NAME}. 300 IN A {GUEST}\"",
        f"    interface: {GUEST}@853",
        "    tls-port: 853",
        # DNS over QUIC stays off here: quic-port: points at a port with no interface.
        "    quic-port: 8853",
        f"    tls-service-pem: {TLS_DIR}/cert.pem",
        f"    tls-service-key: {TLS_DIR}/key.pem",
        "acme:",
        f"    directory: {ACME_DIR}",
        "    contact: mailto:ops@skua.test",
        f"    name: {ACME_NAME}",
        "    challenge: http-01",
        f"    http-01-interface: {GUEST}@80",
        f"    ca-bundle: {TLS_DIR}/acme-ca.pem",
        f"    account-file: {TLS_DIR}/acme-account.json",
    ])
    guest_write(vm, "/var/lib/skua/conf.d/tls.conf", conf, "644")
    # The ACME task starts with the process: a restart (the XDP self-test again).
    mark = len(vm.console())
    out, rc = vm.run("systemctl restart skuad", 120)
    if rc != 0:
        raise RuntimeError(f"systemctl restart skuad: {out!r}")
    vm.wait_for(r"xdp: self-test passed on eth0", timeout, mark, what="skuad after its restart with acme:")
    deadline = time.monotonic() + timeout
    while True:
        out, _ = vm.run(f"test -s {TLS_DIR}/cert.pem && echo CERT-PRESENT", 30)
        if "CERT-PRESENT" in out and pebble.counts()[2] >= 1:
            break
        if time.monotonic() > deadline:
            st, _ = vm.run("skuactl tls status", 30)
            raise RuntimeError(f"no certificate from pebble within {timeout} s: {st.strip()!r}; pebble:\n"
                               f"{pebble.read_log()[-2000:]}")
        time.sleep(3)
    root = pebble.root()
    # The reload that puts the certificate in force follows its writing: ask until served.
    deadline = time.monotonic() + 60
    while True:
        try:
            serial, fpr = served_certificate(vm, root)
            break
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(2)
    digest = account_digest(vm)
    counts = pebble.counts()
    if counts != (1, 1, 1):
        raise RuntimeError(f"pebble's log: want 1 account, 1 order, 1 certificate, got {counts}")
    log(f"ACME: certificate serial {serial} (SHA-256 {fpr[:23]}...) issued by pebble, served over DoT; "
        f"account file sha256 {digest[:16]}...")
    return serial, fpr, digest, counts


def check_certificate(vm, pebble, want):
    """The certificate ordered on version 1 is still the one served, from the same account
    file, and pebble saw no new account or order."""
    serial, fpr, digest, counts = want
    got_serial, got_fpr = served_certificate(vm, pebble.root())
    if (got_serial, got_fpr) != (serial, fpr):
        raise RuntimeError(f"DoT serves serial {got_serial}, want {serial} (the certificate from before the upgrade)")
    got_digest = account_digest(vm)
    if got_digest != digest:
        raise RuntimeError(f"the ACME account file changed: sha256 {got_digest}, want {digest}")
    got_counts = pebble.counts()
    if got_counts != counts:
        raise RuntimeError(f"pebble saw new ACME requests: (accounts, orders, certificates) {got_counts}, "
                           f"want {counts}")
    log(f"ACME: the same certificate (serial {serial}) served, account file unchanged, no new order")


class StageFailed(Exception):
    pass


class Stages:
    """Runs the scenario's stages and records each one's outcome: pass, fail, or hang (the
    machine stopped: no reset, no firmware output after it, or a silent console), with its
    cause and the diagnosis kept in the VM's work directory."""

    def __init__(self, vm):
        self.vm = vm
        self.results = []  # dicts: stage, outcome, seconds, cause

    def run(self, name, fn, boot=False):
        t0 = time.monotonic()
        try:
            value = fn()
        except Exception as e:  # noqa: BLE001 - any failure is the stage's
            outcome, cause = self.classify(e, boot)
            self.results.append({"stage": name, "outcome": outcome, "seconds": round(time.monotonic() - t0),
                                 "cause": cause})
            log(f"stage '{name}': {outcome.upper()}: {cause}")
            raise StageFailed(f"{name}: {cause}") from e
        self.results.append({"stage": name, "outcome": "pass", "seconds": round(time.monotonic() - t0), "cause": ""})
        return value

    def classify(self, e, boot):
        vm = self.vm
        if isinstance(e, TimeoutError) and vm.proc is not None and vm.proc.poll() is None:
            kind, verdict = vm.diagnose(str(e))
            if not boot:
                # Not a boot: the machine hangs if its console went silent, else it failed.
                silent = vm.console_last is None or time.monotonic() - vm.console_last > 60
                kind = "hang" if silent else "fail"
                verdict = f"{e}; {'console silent' if silent else 'console alive'}"
            else:
                verdict = f"{e}; {verdict}"
            return kind, verdict
        return "fail", str(e)


def upgrade_once(args):
    """v1 boots; v2 is installed with `skuactl upgrade` and the VM comes back on v2 (blessed by
    the health gate); a broken v3 is installed, fails its health gate, and systemd-boot
    returns to v2 by itself. Returns (ok, stage results, guest resets seen, work dir kept)."""
    work = tempfile.mkdtemp(prefix="skua-upgrade-")
    disk = os.path.join(work, "disk.raw")
    subprocess.run(["cp", "--sparse=always", args.disk, disk], check=True)
    good, bad = padded_copy(args.good, work), padded_copy(args.broken, work)
    vm = VM(disk, snapshot=False, drives=[good, bad], screen=True, smp=args.smp, accel=args.accel)
    st = Stages(vm)
    pebble = Pebble(vm, work)
    cert = None
    ok = False
    try:
        st.run("boot version 1", lambda: (vm.start(), wait_booted(vm, 0, args.timeout, 1)), boot=True)

        def data_and_api():
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

        st.run("data partition and API record", data_and_api)
        cert = st.run("certificate by ACME on the data partition", lambda: acme_setup(vm, pebble, args.timeout))

        def install(dev, tries, version, slot):
            opt = f"--tries {tries} " if tries else ""
            out, rc = vm.run(f"skuactl upgrade {opt}{dev}", 600)
            log(f"skuactl upgrade {opt}{dev} (exit {rc}):\n{out.strip()}")
            if rc != 0 or f"installed version {version} in slot {slot}" not in out:
                raise RuntimeError(f"installing version {version} failed")

        st.run("install version 2", lambda: install("/dev/vdb", None, 2, "B"))

        def reboot_into_2():
            mark = vm.mark()
            vm.send("systemctl reboot")
            wait_booted(vm, mark.offset, args.timeout, 2)
            log(f"reboot into version 2: {time.monotonic() - mark.time:.0f} s")

        st.run("reboot into version 2", reboot_into_2, boot=True)

        def blessed_2():
            wait_blessed(vm, 2, 180)
            check_dns_through_xdp(vm)
            check_persisted(vm)
            check_certificate(vm, pebble, cert)
            out, _ = vm.run("skuactl slots", 60)
            log("slots on version 2:\n" + out.strip())
            if not re.search(r"slot B: version 2 .*\[running\]", out):
                raise RuntimeError("version 2 is not running from slot B")

        st.run("version 2 blessed, serving", blessed_2)
        st.run("install version 3 (broken, 1 try)", lambda: install("/dev/vdc", 1, 3, "A"))

        def reboot_into_3():
            mark = vm.mark()
            vm.send("systemctl reboot")
            # Version 3 boots, skuad cannot serve its address, the health gate gives up and the
            # unit's FailureAction reboots; systemd-boot then skips skua_3+0-1.efi.
            m, end = vm.wait_for(r"skuactl: unhealthy: [^\r\n]*", args.timeout + 180, mark.offset,
                                 what="version 3's health gate failing")
            log(f"version 3 failed its health gate: {m.group(0).strip()}")
            if "xdp: self-test passed" in vm.console()[mark.offset:end]:
                raise RuntimeError("version 3's skuad passed its self-test: it was meant to be broken")
            return mark, end

        mark3, end = st.run("reboot into version 3, health gate fails", reboot_into_3, boot=True)

        def rollback():
            # The health gate's FailureAction reboots by itself: follow that boot from here.
            vm.mark()
            wait_booted(vm, end, args.timeout + 120, 2)
            log(f"rolled back to version 2: {time.monotonic() - mark3.time:.0f} s after the reboot into version 3")

        st.run("rollback to version 2", rollback, boot=True)

        def after_rollback():
            out, _ = vm.run("skuactl slots", 60)
            log("slots after the rollback:\n" + out.strip())
            if not re.search(r"entry skua_3\+0-1\.efi: boots slot A, bad", out):
                raise RuntimeError("version 3's boot entry is not marked bad")
            if not re.search(r"slot B: version 2 .*\[running\]", out):
                raise RuntimeError("version 2 is not running from slot B after the rollback")
            check_dns_through_xdp(vm)
            check_persisted(vm)
            check_certificate(vm, pebble, cert)

        st.run("version 2 serving after the rollback", after_rollback)
        ok = True
        log("upgrade test passed: 1 -> 2 (blessed), 3 (broken) rolled back to 2")
    except Exception as e:  # noqa: BLE001
        if not isinstance(e, StageFailed):
            st.results.append({"stage": "harness", "outcome": "fail", "seconds": 0, "cause": repr(e)})
        log(f"FAILED: {e}")
        print("---- console (last 80 lines) ----", file=sys.stderr)
        print("\n".join(vm.console().splitlines()[-80:]), file=sys.stderr)
    finally:
        resets = vm.resets()
        if any(s["outcome"] == "hang" for s in st.results):
            vm.kill()  # no console to power off from
        rc = vm.stop()
        log(f"QEMU exited with {rc}")
        pebble.stop()
        if not ok and os.path.exists(pebble.log_path):
            shutil.copy(pebble.log_path, vm.work)
        vm.cleanup(keep_logs=not ok)
        if not ok:
            log(f"logs kept in {vm.work}")
        shutil.rmtree(work, ignore_errors=True)
    return ok, st.results, resets, None if ok else vm.work


def upgrade(args):
    ok, _, _, _ = upgrade_once(args)
    return 0 if ok else 1


# The scenario's stages in order (the loop's table lists them so, with any others after).
UPGRADE_STAGES = ["boot version 1", "data partition and API record", "certificate by ACME on the data partition",
                  "install version 2", "reboot into version 2",
                  "version 2 blessed, serving", "install version 3 (broken, 1 try)",
                  "reboot into version 3, health gate fails", "rollback to version 2",
                  "version 2 serving after the rollback"]


def upgrade_loop(args):
    """The upgrade scenario N times: per stage pass/fail/hang counts with their causes, the
    guest reboots (QEMU resets) done, and the wall time. Results, one JSON line per run, in
    --results; failed runs keep their logs (and diagnosis) in /tmp/skua-vm-*."""
    results = args.results or f"/tmp/skua-upgrade-loop-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
    t0 = time.monotonic()
    runs, reboots = [], 0
    for i in range(1, args.runs + 1):
        log(f"==== run {i}/{args.runs} ({reboots} reboots so far)")
        r0 = time.monotonic()
        ok, stages, resets, kept = upgrade_once(args)
        reboots += resets
        run = {"run": i, "ok": ok, "seconds": round(time.monotonic() - r0), "reboots": resets,
               "stages": stages, "logs": kept}
        runs.append(run)
        with open(results, "a") as f:
            f.write(json.dumps(run) + "\n")
        log(f"==== run {i}: {'PASS' if ok else 'FAIL'} in {run['seconds']} s, {resets} reboots")
    wall = time.monotonic() - t0
    print(loop_summary(runs, wall))
    log(f"results: {results}")
    return 0 if all(r["ok"] for r in runs) else 1


def loop_summary(runs, wall):
    table = {}
    for r in runs:
        for s in r["stages"]:
            t = table.setdefault(s["stage"], {"pass": 0, "fail": 0, "hang": 0, "causes": [], "seconds": []})
            t[s["outcome"]] += 1
            if s["outcome"] == "pass":
                t["seconds"].append(s["seconds"])
            else:
                t["causes"].append(f"run {r['run']}: {s['cause']}" + (f" (logs {r['logs']})" if r["logs"] else ""))
    order = [s for s in UPGRADE_STAGES if s in table] + [s for s in table if s not in UPGRADE_STAGES]
    reboots = sum(r["reboots"] for r in runs)
    lines = [f"upgrade loop: {len(runs)} runs, {sum(r['ok'] for r in runs)} passed, {reboots} reboots "
             f"(guest resets), wall time {wall / 60:.1f} min",
             f"{'stage':44} {'pass':>5} {'fail':>5} {'hang':>5} {'median s':>9}"]
    for name in order:
        t = table[name]
        sec = sorted(t["seconds"])
        med = f"{sec[len(sec) // 2]}" if sec else "-"
        lines.append(f"{name:44} {t['pass']:5} {t['fail']:5} {t['hang']:5} {med:>9}")
        lines += [f"    {c}" for c in t["causes"]]
    return "\n".join(lines)


def reboot_loop(args):
    """Reboots a VM `--count` times (`systemctl reboot`, as the upgrade does); each boot must
    come back to skuad's XDP self-test and a root shell that answers. A boot that does not is
    diagnosed (hang or failure, logs kept in /tmp/skua-vm-*), and a fresh VM takes over until
    the count is reached. About three times as many reboots an hour as the upgrade loop."""
    disk = args.disk or newest_image()
    t0 = time.monotonic()
    done, times, failures, boots = 0, [], [], 0
    while done < args.count:
        vm = VM(disk, snapshot=True, smp=args.smp, screen=True, accel=args.accel)
        ok = False
        try:
            vm.start()
            mark = vm.last_mark
            vm.wait_for(r"xdp: self-test passed on eth0", args.timeout, what="skuad at the cold boot")
            wait_shell(vm, args.timeout)
            boots += 1
            while done < args.count:
                mark = vm.mark()
                vm.send("systemctl reboot")
                _, end = vm.wait_for(r"reboot: machine restart", args.timeout, mark.offset, what="the restart")
                vm.wait_for(r"xdp: self-test passed on eth0", args.timeout, end, what="skuad after the reboot")
                wait_shell(vm, args.timeout)
                done += 1
                boots += 1
                times.append(time.monotonic() - mark.time)
                log(f"reboot {done}/{args.count}: up in {times[-1]:.0f} s")
            ok = True
        except Exception as e:  # noqa: BLE001 - a boot that did not come back
            if isinstance(e, TimeoutError) and vm.proc is not None and vm.proc.poll() is None:
                kind, verdict = vm.diagnose(str(e), mark)
            else:
                kind, verdict = "fail", str(e)
            failures.append(f"{kind}: {verdict} (logs {vm.work})")
            log(f"boot {boots}: {kind.upper()}; a fresh VM goes on")
            vm.kill()
        finally:
            if ok:
                vm.stop()
            vm.cleanup(keep_logs=not ok)
    med = f", median {sorted(times)[len(times) // 2]:.0f} s a reboot" if times else ""
    print(f"reboot loop: {done} reboots; {boots} boots came up (cold ones included), {len(failures)} did not; "
          f"smp {args.smp}, accel {args.accel}, {(time.monotonic() - t0) / 60:.1f} min{med}")
    for f in failures:
        print(f"    {f}")
    return 0 if not failures else 1


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
    vm = VM(copy, snapshot=True, screen=True, smp=args.smp, accel=args.accel)
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
        if isinstance(e, TimeoutError) and vm.proc is not None and vm.proc.poll() is None:
            vm.diagnose(str(e))
        print("\n".join(vm.console().splitlines()[-40:]), file=sys.stderr)
    finally:
        vm.kill()
        vm.cleanup(keep_logs=not ok)
        if not ok:
            log(f"logs kept in {vm.work}")
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


def vm_options(parser):
    # One vCPU: with two, QEMU 7.2's multi-threaded TCG loses a vCPU's wake-up now and then
    # (an AP that never starts on OVMF's INIT-SIPI, an interrupt acknowledged and never run)
    # and the boot stops for good: about one boot in 17 on a busy host (docs/upgrades.md).
    parser.add_argument("--smp", type=int, default=1, help="vCPUs (default 1: see docs/upgrades.md)")
    parser.add_argument("--accel", default="tcg", help="QEMU -accel (tcg, tcg,thread=single, kvm)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("test", help="boot, query DNS through XDP in the guest, power off")
    t.add_argument("--disk")
    t.add_argument("--queues", type=int, default=1)
    t.add_argument("--timeout", type=int, default=240, help="seconds to wait for skuad's XDP start-up")
    t.add_argument("--shell", action="store_true", help="print skuad's status from the guest first")
    # Two: the queues on two CPUs (virtio-net's XDP_TX in its locked mode). Under TCG that
    # keeps the lost-wake-up risk of docs/upgrades.md for this one boot.
    t.add_argument("--smp", type=int, default=2, help="vCPUs (default 2)")
    t = sub.add_parser("tamper", help="a byte flipped in the root partition must make verity refuse the boot")
    t.add_argument("--disk")
    t.add_argument("--timeout", type=int, default=240)
    vm_options(t)
    t = sub.add_parser("upgrade", help="A/B upgrade: v1 -> v2 blessed, broken v3 rolled back to v2")
    t.add_argument("--disk", required=True, help="version 1's disk image (skua_1.raw)")
    t.add_argument("--good", required=True, help="version 2's update bundle (skua_2.update)")
    t.add_argument("--broken", required=True, help="a broken version 3's bundle (image/build.sh --broken 3)")
    t.add_argument("--timeout", type=int, default=240)
    vm_options(t)
    t = sub.add_parser("upgrade-loop", help="the upgrade test N times: per-stage pass/fail/hang counts and causes")
    t.add_argument("--disk", required=True, help="version 1's disk image (skua_1.raw)")
    t.add_argument("--good", required=True, help="version 2's update bundle (skua_2.update)")
    t.add_argument("--broken", required=True, help="a broken version 3's bundle (image/build.sh --broken 3)")
    t.add_argument("--timeout", type=int, default=240)
    t.add_argument("--runs", type=int, default=10, help="scenario runs (3 guest reboots each)")
    t.add_argument("--results", help="JSON lines file, one line per run (default /tmp/skua-upgrade-loop-*.jsonl)")
    vm_options(t)
    t = sub.add_parser("reboot-loop", help="reboot one VM N times; a boot that does not come back is diagnosed")
    t.add_argument("--disk")
    t.add_argument("--count", type=int, default=30)
    t.add_argument("--timeout", type=int, default=240)
    vm_options(t)
    args = p.parse_args()
    # A TERM (kill PID, a CI timeout) ends like Ctrl-C: QEMU killed, the namespace removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.cmd == "test":
        sys.exit(test(args))
    if args.cmd == "tamper":
        sys.exit(tamper(args))
    if args.cmd == "upgrade":
        sys.exit(upgrade(args))
    if args.cmd == "upgrade-loop":
        sys.exit(upgrade_loop(args))
    if args.cmd == "reboot-loop":
        sys.exit(reboot_loop(args))


if __name__ == "__main__":
    main()
