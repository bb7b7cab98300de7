//! `sriov CONFIG.toml status|plan|apply [--force]`: the control path on its own, reading the
//! `[[sriov]]` tables of a file (other keys are ignored) and printing JSON. Used by
//! `qemu/sriov-igb.sh` inside the guest; handy on a host before the agent runs.
//! Exit status: 0 done, 1 refused or failed (the JSON says why), 2 usage.

use std::process::ExitCode;

use serde::Deserialize;
use skua_sriov::{Host, PfConfig, PlanOptions, validate};

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    sriov: Vec<PfConfig>,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let force = args.iter().any(|a| a == "--force");
    let rest: Vec<&str> = args
        .iter()
        .filter(|a| *a != "--force")
        .map(String::as_str)
        .collect();
    let [path, cmd] = rest.as_slice() else {
        eprintln!("usage: sriov CONFIG.toml status|plan|apply [--force]");
        return ExitCode::from(2);
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::from(2);
        }
    };
    let config = match toml::from_str::<File>(&text) {
        Ok(f) => f.sriov,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = validate(&config) {
        eprintln!("{path}: {e}");
        return ExitCode::FAILURE;
    }
    let Some((out, ok)) = skua_sriov::command(&Host::system(), &config, cmd, PlanOptions { force })
    else {
        eprintln!("unknown command {cmd:?}: status, plan or apply");
        return ExitCode::from(2);
    };
    println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
