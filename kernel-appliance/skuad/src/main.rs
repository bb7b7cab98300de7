//! `skuad`: command-line entry point. See the crate docs of the `skuad` library.

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "\
usage: skuad [--config FILE] [XDP options]   serve (no --config: embedded demo config on 127.0.0.1:5353)
       skuad --check-config [FILE]      check a configuration and print its warnings
       skuad bench [options] QUERYFILE  measure the engine in-process (see skuad bench --help)
       skuad --version
XDP options (AF_XDP dataplane on the interfaces holding the served addresses):
  --no-xdp                kernel sockets only
  --xdp-required          exit with an error if XDP cannot start (default: fall back to sockets)
  --xdp-mode MODE         auto (native, then generic), native, generic
  --xdp-queues N          use at most N queues per interface (default: all)
  --xdp-copy              never try zero-copy
  --xdp-self-test HOW     how the start proves queries reach the AF_XDP sockets: auto (a live
                          frame injected where the kernel allows it, else a test run of the
                          program and the first real queries; default) or traffic (never
                          inject)
  --xdp-interface IF      attach to IF (repeatable) instead of the interfaces holding the
                          served addresses: e.g. the parent of a VLAN interface
  --xdp-answers N         precompile up to N answers into the XDP program, which then sends
                          them itself (XDP_TX); 0 = off (default: 65536)
  --xdp-cache-answers N   let the XDP program send up to N of the resolver's cached answers
                          itself, the names the AF_XDP workers see asked most, TTLs counting
                          down; 0 = off (default: 16384; about 850 bytes each, allocated
                          at start; none when --xdp-answers is 0)
signals: HUP reloads, USR1 logs the counters, TERM/INT stop";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut config: Option<PathBuf> = None;
    let mut check = false;
    let mut xdp = skuad::dataplane::xdp::XdpOptions::default();
    let mut i = 0;
    if args.first().map(String::as_str) == Some("bench") {
        return match skuad::bench::main(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("skuad bench: {e}");
                ExitCode::from(2)
            }
        };
    }
    while i < args.len() {
        match args[i].as_str() {
            "-c" | "--config" => {
                i += 1;
                let Some(f) = args.get(i) else {
                    eprintln!("skuad: --config needs a file\n{USAGE}");
                    return ExitCode::from(2);
                };
                config = Some(PathBuf::from(f));
            }
            "--check-config" => {
                check = true;
                if let Some(f) = args.get(i + 1).filter(|a| !a.starts_with('-')) {
                    config = Some(PathBuf::from(f));
                    i += 1;
                }
            }
            "--no-xdp" => xdp.policy = skuad::dataplane::xdp::XdpPolicy::Off,
            "--xdp-required" => xdp.policy = skuad::dataplane::xdp::XdpPolicy::Required,
            "--xdp-copy" => xdp.copy_only = true,
            "--xdp-self-test" => {
                i += 1;
                xdp.self_test = match args.get(i).map(String::as_str) {
                    Some("auto") => skuad::dataplane::xdp::SelfTest::Auto,
                    Some("traffic") => skuad::dataplane::xdp::SelfTest::Traffic,
                    _ => {
                        eprintln!("skuad: --xdp-self-test must be auto or traffic\n{USAGE}");
                        return ExitCode::from(2);
                    }
                };
            }
            "--xdp-interface" => {
                i += 1;
                let Some(v) = args.get(i) else {
                    eprintln!("skuad: --xdp-interface needs an interface name\n{USAGE}");
                    return ExitCode::from(2);
                };
                xdp.interfaces.push(v.clone());
            }
            "--xdp-mode" | "--xdp-queues" | "--xdp-answers" | "--xdp-cache-answers" => {
                let flag = args[i].clone();
                i += 1;
                let Some(v) = args.get(i) else {
                    eprintln!("skuad: {flag} needs a value\n{USAGE}");
                    return ExitCode::from(2);
                };
                if flag == "--xdp-answers" || flag == "--xdp-cache-answers" {
                    match v.parse::<u32>() {
                        Ok(n) if flag == "--xdp-answers" => xdp.answers = n,
                        // Slots are preallocated: bounded to a few hundred megabytes.
                        Ok(n) if n <= 1 << 20 => xdp.cached = n,
                        _ => {
                            eprintln!(
                                "skuad: {flag} must be a number (0 = off; at most 1048576 cached)"
                            );
                            return ExitCode::from(2);
                        }
                    }
                } else if flag == "--xdp-mode" {
                    xdp.attach = match v.as_str() {
                        "auto" => skua_xdp::bpf::AttachMode::Auto,
                        "native" => skua_xdp::bpf::AttachMode::Native,
                        "generic" => skua_xdp::bpf::AttachMode::Generic,
                        _ => {
                            eprintln!("skuad: --xdp-mode must be auto, native or generic");
                            return ExitCode::from(2);
                        }
                    };
                } else {
                    match v.parse::<usize>() {
                        Ok(n) if n > 0 => xdp.max_queues = Some(n),
                        _ => {
                            eprintln!("skuad: --xdp-queues must be a positive number");
                            return ExitCode::from(2);
                        }
                    }
                }
            }
            "-V" | "--version" => {
                println!("skuad {}", env!("CARGO_PKG_VERSION"));
                return ExitCode::SUCCESS;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("skuad: unknown argument '{other}'\n{USAGE}");
                return ExitCode::from(2);
            }
        }
        i += 1;
    }
    let source = match config {
        Some(p) => skuad::control::source::Source::File(p),
        None => skuad::control::source::Source::Default,
    };
    if check {
        return match source.load() {
            Ok(l) => {
                for w in &l.warnings {
                    eprintln!("warning: {w}");
                }
                println!(
                    "configuration OK: {} records, {} names, {} warnings",
                    l.records,
                    l.engine.name_count(),
                    l.warnings.len()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        };
    }
    if matches!(source, skuad::control::source::Source::Default) {
        eprintln!(
            "skuad: no --config given: serving the embedded demo configuration on 127.0.0.1:5353 (UDP and TCP).\n\
             skuad: try   dig @127.0.0.1 -p 5353 www.skua.test   or   dig @127.0.0.1 -p 5353 +tcp skua.test MX"
        );
    }
    match skuad::supervisor::run(source, &xdp) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("skuad: {e}");
            ExitCode::from(1)
        }
    }
}
