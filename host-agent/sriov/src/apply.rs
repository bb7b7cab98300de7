//! Carrying out a plan ([`apply`]), and the whole loop for a configuration ([`reconcile`]).

use crate::config::{PfConfig, PfRef, validate};
use crate::observe::{Host, Observed, observe};
use crate::plan::{Action, PlanOptions, plan};
use crate::{Error, config::PciAddr};

/// Runs `actions` (from [`plan`] on `observed`) in order, stopping at the first failure,
/// which is reported as [`Error::Step`] (which step, how many were done, why).
pub fn apply(host: &Host, observed: &Observed, actions: &[Action]) -> Result<(), Error> {
    for (i, action) in actions.iter().enumerate() {
        run(host, observed, action).map_err(|e| Error::Step {
            step: i + 1,
            total: actions.len(),
            action: action.to_string(),
            source: Box::new(e),
        })?;
    }
    Ok(())
}

fn vf_addr(host: &Host, observed: &Observed, vf: u16) -> Result<PciAddr, Error> {
    host.sys
        .vfs(observed.pci)?
        .get(&vf)
        .copied()
        .ok_or_else(|| Error::NoSuchVf {
            pf: observed.label(),
            pci: observed.pci,
            vf,
        })
}

fn run(host: &Host, observed: &Observed, action: &Action) -> Result<(), Error> {
    let sys = &host.sys;
    let dev = sys.pci_dev(observed.pci);
    match action {
        Action::SetAutoprobe { enabled } => sys.write(
            &dev.join("sriov_drivers_autoprobe"),
            if *enabled { "1" } else { "0" },
        ),
        Action::SetNumVfs { to, .. } => {
            sys.write(&dev.join("sriov_numvfs"), &to.to_string())?;
            sys.wait_for_vfs(observed.pci, &observed.label(), *to, host.vf_timeout)
                .map(drop)
        }
        Action::SetVf { vf, attr } => {
            let ifname = observed
                .ifname
                .as_deref()
                .ok_or(Error::NoNetdev { pci: observed.pci })?;
            host.net.set_vf(ifname, *vf, attr)
        }
        Action::BindVfio { vf } => {
            let addr = vf_addr(host, observed, *vf)?;
            sys.bind_vfio(addr, &format!("VF {vf} ({addr}) of {}", observed.label()))
                .map(drop)
        }
        Action::ProbeHostDriver { vf } => sys.probe(vf_addr(host, observed, *vf)?),
    }
}

/// What [`reconcile`] did for one PF.
#[derive(Debug)]
pub struct PfOutcome {
    /// The PF as configured.
    pub pf: PfRef,
    /// The steps carried out (empty: it was in the configured state), or why not.
    pub result: Result<Vec<Action>, Error>,
}

/// Validates `config`, then for each PF: [`observe`], [`plan`], [`apply`]. A PF that fails
/// does not stop the others. Running it again on an unchanged host does nothing.
pub fn reconcile(
    host: &Host,
    config: &[PfConfig],
    opts: PlanOptions,
) -> Result<Vec<PfOutcome>, Error> {
    validate(config)?;
    Ok(config
        .iter()
        .map(|pf| PfOutcome {
            pf: pf.pf.clone(),
            result: reconcile_pf(host, pf, opts),
        })
        .collect())
}

/// [`observe`], [`plan`] and [`apply`] for one PF (no validation).
pub fn reconcile_pf(host: &Host, pf: &PfConfig, opts: PlanOptions) -> Result<Vec<Action>, Error> {
    let observed = observe(host, pf)?;
    let actions = plan(pf, &observed, opts)?;
    apply(host, &observed, &actions)?;
    Ok(actions)
}
