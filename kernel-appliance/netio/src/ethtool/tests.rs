use super::*;
use std::fs::File;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[test]
fn errors_name_the_cause() {
    // `lo` has no ethtool driver info; a missing interface is ENODEV. (Real drivers are
    // exercised by skuad's XDP tests on veth, and by the veth test below.)
    assert_eq!(
        driver("lo").unwrap_err().raw_os_error(),
        Some(libc::EOPNOTSUPP)
    );
    assert_eq!(
        driver("no-such-if0").unwrap_err().raw_os_error(),
        Some(libc::ENODEV)
    );
    assert!(driver("").is_err());
    assert!(driver("name-longer-than-ifnamsiz").is_err());
}

// -----------------------------------------------------------------------------------
// The guard page, against a user-space stand-in for copy_to_user.

/// Writes `data` at `to` in this process the way the kernel's copy_to_user does: through
/// the page tables, forward, stopping at the first page it cannot write.
/// process_vm_writev(2) pins the destination pages for writing (FOLL_WRITE, no
/// FOLL_FORCE), so a PROT_NONE page stops it: it returns how many bytes it wrote, or
/// EFAULT when it could write none.
fn copy_to_user(to: *mut u8, data: &[u8]) -> io::Result<usize> {
    let local = libc::iovec {
        iov_base: data.as_ptr().cast_mut().cast(),
        iov_len: data.len(),
    };
    let remote = libc::iovec {
        iov_base: to.cast(),
        iov_len: data.len(),
    };
    let pid = std::process::id() as libc::pid_t;
    // SAFETY: the syscall reads `data` through `local` (a live slice) and writes at most
    // `data.len()` bytes at `to` in this process, never to a page it cannot write. Every
    // caller passes an address inside a `Guarded` it borrows mutably, so what can be
    // written is that buffer (no other reference reads it during the call) and then its
    // PROT_NONE guard page, which stops the copy; every caller writes less than a page
    // past the buffer, so even a missing guard would only reach our own mapping.
    let r = unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// The protection of the page holding `addr`, from /proc/self/maps (`rw-p`, `---p`).
fn protection(addr: usize) -> String {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (range, perms) = (f.next().unwrap(), f.next().unwrap());
        let (a, b) = range.split_once('-').unwrap();
        let a = usize::from_str_radix(a, 16).unwrap();
        let b = usize::from_str_radix(b, 16).unwrap();
        if (a..b).contains(&addr) {
            return perms.to_string();
        }
    }
    panic!("{addr:#x} is not mapped")
}

#[test]
fn the_guard_page_stops_a_copy_that_runs_past_the_buffer() {
    let page = page_size();
    for len in [1, 100, page - 1, page, page + 12] {
        let mut g = Guarded::new(len).unwrap();
        let base = g.as_mut_ptr() as usize;
        assert_eq!(
            (base + len) % page,
            0,
            "{len}: the buffer ends at a page boundary"
        );
        assert_eq!(protection(base), "rw-p");
        assert_eq!(protection(base + len - 1), "rw-p");
        assert_eq!(protection(base + len), "---p", "{len}: the guard page");
        assert!(g.bytes().iter().all(|&b| b == 0), "zero-initialised");
        // The "kernel" copies 200 bytes more than the buffer holds (a set that grew).
        let data: Vec<u8> = (0..len + 200).map(|i| (i % 251) as u8 + 1).collect();
        let wrote = copy_to_user(g.as_mut_ptr(), &data).unwrap();
        assert_eq!(wrote, len, "{len}: the copy stops at the guard page");
        assert_eq!(
            g.bytes(),
            &data[..len],
            "{len}: the buffer holds the prefix"
        );
        // A copy that starts on the guard page writes nothing: EFAULT, as the ioctl
        // returns when copy_to_user comes short.
        let e = copy_to_user(g.as_mut_ptr().wrapping_add(len), &data[..8]).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EFAULT), "{len}");
        assert_eq!(
            protection(base + len),
            "---p",
            "{len}: still the guard page"
        );
    }
}

// -----------------------------------------------------------------------------------
// stats() against a fake kernel whose statistics change between commands.

/// veth's statistics with `q` queues (drivers/net/veth.c): one, then seven per RX queue,
/// then two per TX queue; one queue more moves every TX name to another index.
fn veth_names(q: usize) -> Vec<String> {
    let mut v = vec!["peer_ifindex".to_string()];
    for i in 0..q {
        for s in [
            "xdp_packets",
            "xdp_bytes",
            "drops",
            "xdp_redirect",
            "xdp_drops",
            "xdp_tx",
            "xdp_tx_errors",
        ] {
            v.push(format!("rx_queue_{i}_{s}"));
        }
    }
    for i in 0..q {
        v.push(format!("tx_queue_{i}_xdp_xmit"));
        v.push(format!("tx_queue_{i}_xdp_xmit_errors"));
    }
    v
}

/// The fake kernel's value of a statistic: a function of its name, so a pair belongs
/// together exactly when `value == value_of(name)`.
fn value_of(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Requires `got` to be the whole set of some queue count, each name with its own value.
fn assert_consistent(got: &[(String, u64)]) {
    let q = got.len().saturating_sub(1) / 9;
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, veth_names(q), "not the set of any queue count");
    for (n, v) in got {
        assert_eq!(*v, value_of(n), "{n} paired with another statistic's value");
    }
}

/// A veth whose queue count is `queues[i]` at its i-th ethtool command (the last entry
/// from then on). It answers like net/ethtool/ioctl.c: the header with the *current*
/// count, then the entries, each part copied with [`copy_to_user`] into the caller's
/// buffer, EFAULT when a copy comes short. `fixed`: like a kernel with the overflow fix,
/// it answers a count of 0 and no entries when the caller's non-zero count differs from
/// the current one; else like an older kernel, it ignores the caller's count.
struct FakeKernel {
    queues: Vec<usize>,
    fixed: bool,
    calls: usize,
    /// Copies that hit the guard page.
    faults: usize,
    /// Answers of a fixed kernel to a count that was no longer current.
    refusals: usize,
    /// Added to the count in the header (a kernel that says more than it copies).
    overstate: u32,
}

impl FakeKernel {
    /// A kernel without the overflow fix.
    fn legacy(queues: impl IntoIterator<Item = usize>) -> FakeKernel {
        FakeKernel {
            queues: queues.into_iter().collect(),
            fixed: false,
            calls: 0,
            faults: 0,
            refusals: 0,
            overstate: 0,
        }
    }

    /// A kernel with it.
    fn fixed(queues: impl IntoIterator<Item = usize>) -> FakeKernel {
        FakeKernel {
            fixed: true,
            ..FakeKernel::legacy(queues)
        }
    }

    /// The count to answer `asked` with, given the current `n`.
    fn answer(&mut self, asked: u32, n: usize) -> usize {
        if self.fixed && asked != 0 && asked as usize != n {
            self.refusals += 1;
            0
        } else {
            n
        }
    }
}

impl Ethtool for FakeKernel {
    fn ioctl(&mut self, _ifname: &str, buf: &mut Guarded) -> io::Result<()> {
        let q = self.queues[self.calls.min(self.queues.len() - 1)];
        self.calls += 1;
        let mut set = veth_names(q);
        // copy_from_user of the command and its header.
        let cmd = u32_at(buf.bytes(), 0);
        let (header, entries): (Vec<u8>, Vec<u8>) = match cmd {
            ETHTOOL_GDRVINFO => {
                let mut info = vec![0u8; DRVINFO_LEN];
                info[..4].copy_from_slice(&cmd.to_ne_bytes());
                info[4..8].copy_from_slice(b"veth");
                info[DRVINFO_N_STATS..DRVINFO_N_STATS + 4]
                    .copy_from_slice(&(set.len() as u32).to_ne_bytes());
                (info, Vec::new())
            }
            ETHTOOL_GSTRINGS => {
                let mut h = buf.bytes()[..GSTRINGS_HDR].to_vec();
                assert_eq!(u32_at(&h, 4), ETH_SS_STATS);
                set.truncate(self.answer(u32_at(&h, 8), set.len()));
                let n = set.len() as u32 + self.overstate;
                h[8..12].copy_from_slice(&n.to_ne_bytes());
                let names = set.iter().flat_map(|s| {
                    let mut b = s.as_bytes().to_vec();
                    b.resize(ETH_GSTRING_LEN, 0);
                    b
                });
                (h, names.collect())
            }
            ETHTOOL_GSTATS => {
                let mut h = buf.bytes()[..GSTATS_HDR].to_vec();
                set.truncate(self.answer(u32_at(&h, 4), set.len()));
                let n = set.len() as u32 + self.overstate;
                h[4..8].copy_from_slice(&n.to_ne_bytes());
                let values = set.iter().flat_map(|s| value_of(s).to_ne_bytes());
                (h, values.collect())
            }
            _ => return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP)),
        };
        let to = buf.as_mut_ptr();
        for (at, part) in [(0, &header), (header.len(), &entries)] {
            if part.is_empty() {
                continue;
            }
            if copy_to_user(to.wrapping_add(at), part).unwrap_or(0) < part.len() {
                self.faults += 1;
                return Err(io::Error::from_raw_os_error(libc::EFAULT));
            }
        }
        Ok(())
    }
}

#[test]
fn a_set_that_outgrew_the_buffer_hits_the_guard_page_and_is_read_again() {
    // An older kernel. GDRVINFO counts 1 queue (10 statistics); by GSTRINGS there are 64
    // (577): more than the buffer's margin. The copy stops at the guard page, and
    // stats() re-counts.
    let mut k = FakeKernel::legacy([1, 64]);
    let got = stats_with(&mut k, "fake0").unwrap();
    assert_eq!(k.faults, 1);
    assert_consistent(&got);
    assert_eq!(got.len(), veth_names(64).len());
}

#[test]
fn names_and_values_of_different_sets_are_read_again() {
    // An older kernel. GDRVINFO, GSTRINGS: 4 queues; GSTATS: 2 (shrunk), then 2.
    let mut k = FakeKernel::legacy([4, 4, 2]);
    let got = stats_with(&mut k, "fake0").unwrap();
    assert_eq!(k.faults, 0);
    assert_consistent(&got);
    assert_eq!(got.len(), veth_names(2).len());
    // Grown within the margin between the two commands: no fault, still a mismatch.
    let mut k = FakeKernel::legacy([2, 2, 3]);
    let got = stats_with(&mut k, "fake0").unwrap();
    assert_eq!(k.faults, 0);
    assert_consistent(&got);
    assert_eq!(got.len(), veth_names(3).len());
}

#[test]
fn a_fixed_kernel_answering_nothing_for_a_changed_set_is_read_again() {
    // Counted with 4 queues, GSTRINGS with 1: a kernel with the fix answers 0 entries,
    // which does not mean an empty set.
    let mut k = FakeKernel::fixed([4, 1]);
    let got = stats_with(&mut k, "fake0").unwrap();
    assert_eq!((k.refusals, k.faults), (1, 0));
    assert_consistent(&got);
    assert_eq!(got.len(), veth_names(1).len());
    // Changed between GSTRINGS and GSTATS: GSTATS answers nothing.
    let mut k = FakeKernel::fixed([2, 2, 3]);
    let got = stats_with(&mut k, "fake0").unwrap();
    assert_eq!((k.refusals, k.faults), (1, 0));
    assert_consistent(&got);
    assert_eq!(got.len(), veth_names(3).len());
}

#[test]
fn a_set_that_never_settles_is_an_error_not_mismatched_pairs() {
    for fixed in [false, true] {
        let kernel = |queues: Vec<usize>| {
            if fixed {
                FakeKernel::fixed(queues)
            } else {
                FakeKernel::legacy(queues)
            }
        };
        // Names and values always from different queue counts.
        let mut k = kernel((0..100).map(|i| 1 + i % 2).collect());
        let e = stats_with(&mut k, "fake0").unwrap_err();
        assert!(
            e.to_string().contains("changed during each of 4 attempts"),
            "{e}"
        );
        // Always much larger than at the last count: on an older kernel every GSTRINGS
        // hits the guard page.
        let mut k = kernel((0..100).map(|i| 1 + 100 * i).collect());
        let e = stats_with(&mut k, "fake0").unwrap_err();
        assert!(
            e.to_string().contains("changed during each of 4 attempts"),
            "{e}"
        );
        let expect = if fixed { (0, ATTEMPTS) } else { (ATTEMPTS, 0) };
        assert_eq!((k.faults, k.refusals), expect, "fixed: {fixed}");
    }
}

#[test]
fn a_count_past_the_buffer_is_never_read_as_entries() {
    // A header that claims more entries than the buffer holds, without an EFAULT.
    let mut k = FakeKernel::legacy([2]);
    k.overstate = MAX_STATS as u32;
    let e = stats_with(&mut k, "fake0").unwrap_err();
    assert!(e.to_string().contains("more than"), "{e}");
}

#[test]
fn any_schedule_gives_a_consistent_set_or_an_error() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut ok, mut err) = (0, 0);
    for i in 0..400 {
        // Mostly stable, sometimes changing, sometimes by a lot.
        let queues: Vec<usize> = (0..1 + next() % 12)
            .map(|_| match next() % 8 {
                0 => 60 + (next() % 40) as usize,
                _ => (next() % 5) as usize,
            })
            .collect();
        let mut k = if i % 2 == 0 {
            FakeKernel::fixed(queues.clone())
        } else {
            FakeKernel::legacy(queues.clone())
        };
        match stats_with(&mut k, "fake0") {
            Ok(got) => {
                assert_consistent(&got);
                ok += 1;
            }
            Err(e) => {
                assert!(e.to_string().contains("changed during"), "{queues:?}: {e}");
                err += 1;
            }
        }
    }
    assert!(ok > 100, "{ok} consistent reads, {err} errors");
}

// -----------------------------------------------------------------------------------
// A real veth, in a network namespace of its own: root only.

/// Namespaces and veth need root. Without it the test fails instead of skipping, as
/// skuad's and skua-xdp's root tests do: CI runs as root, and a skipped test would prove
/// nothing.
fn require_root() {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "the veth test needs root (network namespaces, veth); it does not skip: run it \
         as root, e.g. `sudo -E cargo test -p skua-netio`"
    );
}

/// Runs `prog args`, requires success, returns stdout.
fn run(prog: &str, args: &[&str]) -> String {
    let out = Command::new(prog)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{prog}`: {e} (apt-get install iproute2 ethtool)"));
    assert!(
        out.status.success(),
        "`{prog} {}`: {}\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace, deleted (with the interfaces in it) when dropped, on failure too.
struct Netns(String);

impl Netns {
    fn new(name: String) -> Netns {
        // A leftover of an earlier run with the same PID.
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        let ns = Netns(name);
        run("ip", &["netns", "add", &ns.0]);
        ns
    }

    /// Runs `f` on a thread of its own that joined the namespace (setns changes the
    /// calling thread only; the thread ends with `f`).
    fn enter<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let file = File::open(format!("/run/netns/{}", self.0)).unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: setns(2) with an open descriptor of a network namespace
                // (`file` outlives the scoped thread); it moves only this thread, which
                // runs `f` and ends.
                let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(r, 0, "setns: {}", io::Error::last_os_error());
                f()
            })
            .join()
            .unwrap()
        })
    }

    /// Runs a command (words separated by spaces) in the namespace.
    fn exec(&self, cmd: &str) -> String {
        let mut args = vec!["netns", "exec", &self.0];
        args.extend(cmd.split_whitespace());
        run("ip", &args)
    }

    /// A veth pair `a`, `b` with `queues` RX and TX queues on each side, left down.
    fn veth(&self, a: &str, b: &str, queues: usize) {
        let q = format!("numtxqueues {queues} numrxqueues {queues}");
        self.exec(&format!("ip link add {a} {q} type veth peer name {b} {q}"));
    }

    /// `ethtool -S ifname`, names and values.
    fn ethtool_s(&self, ifname: &str) -> Vec<(String, u64)> {
        self.exec(&format!("ethtool -S {ifname}"))
            .lines()
            .skip_while(|l| !l.starts_with("NIC statistics"))
            .skip(1)
            .map(|l| {
                let (k, v) = l.trim().rsplit_once(": ").unwrap();
                (k.to_string(), v.trim().parse().unwrap())
            })
            .collect()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// The real kernel, counting its ioctls.
struct Counting(Kernel, usize);

impl Ethtool for Counting {
    fn ioctl(&mut self, ifname: &str, buf: &mut Guarded) -> io::Result<()> {
        self.1 += 1;
        self.0.ioctl(ifname, buf)
    }
}

/// How many names match `prefix{N}suffix`.
fn per_queue(got: &[(String, u64)], prefix: &str, suffix: &str) -> usize {
    got.iter()
        .filter(|(n, _)| {
            n.strip_prefix(prefix)
                .and_then(|r| r.strip_suffix(suffix))
                .is_some_and(|q| q.bytes().all(|b| b.is_ascii_digit()))
        })
        .count()
}

#[test]
fn stats_of_a_real_veth_match_ethtool_s_whatever_its_queue_count() {
    require_root();
    let ns = Netns::new(format!("skua-ethtool-{}", std::process::id()));
    // Down, without addresses: no traffic, so the counters hold still between our read
    // and ethtool's.
    ns.veth("ske0", "ske1", 4);
    for q in [4, 1, 3, 2] {
        ns.exec(&format!("ethtool -L ske0 rx {q} tx {q}"));
        let (drv, got) = ns.enter(|| (driver("ske0").unwrap(), stats("ske0").unwrap()));
        assert_eq!(drv, "veth");
        assert_eq!(got, ns.ethtool_s("ske0"), "{q} queues");
        assert_eq!(per_queue(&got, "rx_queue_", "_xdp_packets"), q);
        assert_eq!(per_queue(&got, "rx_queue_", "_xdp_tx"), q);
        assert_eq!(per_queue(&got, "tx_queue_", "_xdp_xmit"), q);
    }
}

#[test]
fn stats_of_a_real_veth_stay_consistent_while_its_queues_change() {
    // The race of review item 7 for real: `ethtool -L` in a loop while stats() reads.
    // Every read is the whole set of one queue count or an error (values are all zero on
    // an idle veth, so consistency here is about the names).
    require_root();
    let ns = Netns::new(format!("skua-ethtool-race-{}", std::process::id()));
    ns.veth("skr0", "skr1", 16);
    /// Stops the flipper when dropped: also when a read panics, else the scope would
    /// wait for the flipper forever.
    struct Stop(Arc<AtomicBool>);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let (reads, errors, ioctls, flips) = std::thread::scope(|s| {
        let stop = Stop(Arc::new(AtomicBool::new(false)));
        let flag = Arc::clone(&stop.0);
        let ns = &ns;
        let flipper = s.spawn(move || {
            let mut flips = 0;
            // Bounded on its own too.
            let deadline = Instant::now() + Duration::from_secs(30);
            while !flag.load(Ordering::Relaxed) && Instant::now() < deadline {
                let q = if flips % 2 == 0 { 1 } else { 16 };
                ns.exec(&format!("ethtool -L skr0 rx {q} tx {q}"));
                flips += 1;
            }
            flips
        });
        let (reads, errors, ioctls) = ns.enter(|| {
            let (mut reads, mut errors) = (0, 0);
            let mut k = Counting(Kernel, 0);
            let deadline = Instant::now() + Duration::from_secs(2);
            while Instant::now() < deadline {
                match stats_with(&mut k, "skr0") {
                    Ok(got) => {
                        let q = per_queue(&got, "tx_queue_", "_xdp_xmit");
                        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
                        assert_eq!(names, veth_names(q), "not the set of {q} queues");
                        reads += 1;
                    }
                    Err(e) => {
                        assert!(e.to_string().contains("changed during"), "{e}");
                        errors += 1;
                    }
                }
            }
            (reads, errors, k.1)
        });
        drop(stop);
        (reads, errors, ioctls, flipper.join().unwrap())
    });
    // Three ioctls per read that found the set unchanged; more were retries.
    let retries = ioctls.saturating_sub(3 * (reads + errors));
    eprintln!(
        "{reads} consistent reads, {errors} errors, {retries} extra ioctls (retries), \
         {flips} queue changes"
    );
    assert!(flips > 2, "the queue count changed while reading");
    assert!(reads > 0, "{reads} consistent reads, {errors} errors");
}
