//! `sriov CONFIG.toml status|plan|apply [--force]`: the control path on its own, reading the
//! `[[sriov]]` tables of a file (other keys are ignored) and printing JSON. Used by
//! `qemu/sriov-igb.sh` inside the guest; handy on a host before the agent runs.
//! Exit status: 0 done, 1 refused or failed (the JSON says why), 2 usage.

use std::process::ExitCode;

use serde::Deserialize;
use serde_json::json;
use skua_sriov::{Host, PfConfig, PlanOptions, observe, plan, reconcile, status, validate};

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
    let host = Host::system();
    let opts = PlanOptions { force };
    let (out, ok) = match *cmd {
        "status" => {
            let st = status(&host, &config, opts);
            let ok = st.iter().all(|p| p.error.is_none());
            (json!(st), ok)
        }
        "plan" => {
            let plans: Vec<_> = config
                .iter()
                .map(
                    |pf| match observe(&host, pf).and_then(|o| plan(pf, &o, opts)) {
                        Ok(steps) => json!({"pf": pf.pf, "plan": steps,
                        "steps": steps.iter().map(|s| s.to_string()).collect::<Vec<_>>()}),
                        Err(e) => json!({"pf": pf.pf, "error": e.to_string()}),
                    },
                )
                .collect();
            let ok = plans.iter().all(|p| p.get("error").is_none());
            (json!(plans), ok)
        }
        "apply" => match reconcile(&host, &config, opts) {
            Ok(outcomes) => {
                let ok = outcomes.iter().all(|o| o.result.is_ok());
                let v: Vec<_> = outcomes
                    .iter()
                    .map(|o| match &o.result {
                        Ok(done) => json!({"pf": o.pf, "applied": done,
                            "steps": done.iter().map(|s| s.to_string()).collect::<Vec<_>>()}),
                        Err(e) => json!({"pf": o.pf, "error": e.to_string()}),
                    })
                    .collect();
                (json!(v), ok)
            }
            Err(e) => (json!({"error": e.to_string()}), false),
        },
        other => {
            eprintln!("unknown command {other:?}: status, plan or apply");
            return ExitCode::from(2);
        }
    };
    println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
