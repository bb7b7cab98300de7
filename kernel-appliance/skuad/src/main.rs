//! `skuad`: command-line entry point. See the crate docs of the `skuad` library.

use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "\
usage: skuad [--config FILE]            serve (no --config: embedded demo config on 127.0.0.1:5353)
       skuad --check-config [FILE]      check a configuration and print its warnings
       skuad bench [options] QUERYFILE  measure the engine in-process (see skuad bench --help)
       skuad --version";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut config: Option<PathBuf> = None;
    let mut check = false;
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
        Some(p) => skuad::server::Source::File(p),
        None => skuad::server::Source::Default,
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
    if matches!(source, skuad::server::Source::Default) {
        eprintln!(
            "skuad: no --config given: serving the embedded demo configuration on 127.0.0.1:5353 (UDP and TCP).\n\
             skuad: try   dig @127.0.0.1 -p 5353 www.skua.test   or   dig @127.0.0.1 -p 5353 +tcp skua.test MX"
        );
    }
    match skuad::server::run(source) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("skuad: {e}");
            ExitCode::from(1)
        }
    }
}
