//! `skua-sriov`: the NIC passthrough control path of `skua-agent`.
//!
//! It turns the agent's `[[sriov]]` tables ([`PfConfig`]) into SR-IOV virtual functions
//! configured and bound to vfio-pci, ready for the appliance VM:
//!
//! ```text
//!  [[sriov]] ─validate─▶ PfConfig ──┐
//!  sysfs + /proc + rtnetlink ─observe─▶ Observed ─plan (pure)─▶ [Action] ─apply─▶ kernel
//!                                    └──────────── status ─▶ PfStatus (JSON) + QEMU / qm lines
//! ```
//!
//! - **sysfs** (root injectable, `/sys` by default): the PF's PCI device (from
//!   `/sys/class/net/IF/device` or a PCI address), `sriov_totalvfs`, `sriov_numvfs`,
//!   `sriov_drivers_autoprobe`, the VFs' `virtfnN` links, `driver`, `iommu_group`,
//!   `driver_override`, `drivers_probe`.
//! - **rtnetlink**: VF MAC, port VLAN and priority, spoof checking, trust, link state
//!   ([`Rtnetlink`], through `netlink-packet-route` and `netlink-sys`).
//! - **/proc**: which process holds a VF's `/dev/vfio` device open, to say so when a
//!   `sriov_numvfs` change is refused.
//!
//! What it does NOT do: load modules (`modprobe vfio-pci` is the operator's or the unit's
//! `ExecStartPre`), turn the IOMMU on, persist anything across reboots (the agent applies
//! the configuration at each start), give a VF back to the host driver once on vfio-pci
//! (`vfio = false` means "leave the driver alone"), clear attributes removed from the
//! configuration, rate limits, 802.1ad VLANs, or start VMs (it prints the QEMU and `qm`
//! lines). The VF data path (VLAN insertion, spoof checks on the wire) is the NIC's; it is
//! not emulated by QEMU 10.0's igb and is checked only on real hardware.
//!
//! Entry points for the agent: [`validate`], [`Host::system`], [`reconcile`] (or
//! [`observe`] + [`plan`] + [`apply`] to show a plan before applying it), [`status`],
//! [`passthrough_lines`]. All calls are blocking and bounded (sysfs writes excepted: the
//! kernel may hold a `sriov_numvfs` write while a VM keeps a VF; [`plan`] refuses that case
//! unless forced).
#![forbid(unsafe_code)]

mod apply;
pub mod config;
mod error;
mod netlink;
mod observe;
mod plan;
mod status;
mod sysfs;

pub use apply::{PfOutcome, apply, reconcile, reconcile_pf};
pub use config::{
    ConfigError, LinkState, MacAddr, PciAddr, PfConfig, PfRef, ProxmoxTarget, VfConfig, validate,
};
pub use error::{Error, IOMMU_HINT};
pub use netlink::{Rtnetlink, VfAttr, VfControl, VfLinkInfo};
pub use observe::{Host, Observed, ObservedVf, observe};
pub use plan::{Action, PlanOptions, plan};
pub use status::{
    Passthrough, PfStatus, VfStatus, passthrough_lines, proxmox_command, qemu_device_arg, status,
};
pub use sysfs::{GroupUser, KernelWriter, SysfsWriter};

/// The operator commands (`skua-agent sriov status|plan|apply`, the `sriov` example):
/// their JSON output and whether everything went through; `None` for an unknown command.
pub fn command(
    host: &Host,
    config: &[PfConfig],
    cmd: &str,
    opts: PlanOptions,
) -> Option<(serde_json::Value, bool)> {
    use serde_json::json;
    Some(match cmd {
        "status" => {
            let st = status(host, config, opts);
            let ok = st.iter().all(|p| p.error.is_none());
            (json!(st), ok)
        }
        "plan" => {
            let plans: Vec<_> = config
                .iter()
                .map(
                    |pf| match observe(host, pf).and_then(|o| plan(pf, &o, opts)) {
                        Ok(steps) => json!({"pf": pf.pf, "plan": steps,
                            "steps": steps.iter().map(|s| s.to_string()).collect::<Vec<_>>()}),
                        Err(e) => json!({"pf": pf.pf, "error": e.to_string()}),
                    },
                )
                .collect();
            let ok = plans.iter().all(|p| p.get("error").is_none());
            (json!(plans), ok)
        }
        "apply" => match reconcile(host, config, opts) {
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
        _ => return None,
    })
}
