//! The survey's recommendations as a profile (`DIR/profile.toml`): each
//! recommendation irqlab can apply, as the setting it declares, with the
//! finding it answers; `irqlab control apply DIR/profile.toml` applies them
//! as one change.

use crate::doc::{Declared, Survey};
use irqlab_control::profile::{unplaced, BootSetting, DefaultIrq, IrqSetting, NapiSetting, Profile, ThreadsSetting};

/// The file's name beside survey.json.
pub const FILE: &str = "profile.toml";

/// The profile of `survey`'s recommendations, in their order (a later
/// setting of the same object wins when applied).
pub fn of(survey: &Survey) -> Profile {
    let mut profile = Profile::new();
    profile.boot_id = survey.boot_id.clone();
    for r in &survey.recommendations {
        let Some(setting) = &r.setting else { continue };
        let reason = format!("{}: {}", r.answers().join(", "), r.title);
        let because = Some(reason.clone());
        match setting {
            Declared::Irq { irqs, cpus } => {
                for irq in irqs {
                    if irq == "default" {
                        profile.default_irq = Some(DefaultIrq { cpus: unplaced(cpus.clone()), because: because.clone() });
                    } else {
                        profile.irqs.push(IrqSetting {
                            irq: unplaced(irq.clone()),
                            cpus: unplaced(cpus.clone()),
                            because: because.clone(),
                        });
                    }
                }
            }
            Declared::Threads { matched, policy, cpus, kernel_thread } => profile.threads.push(ThreadsSetting {
                matched: unplaced(matched.clone()),
                policy: unplaced(policy.clone()),
                cpus: cpus.clone().map(unplaced),
                all_matching: *kernel_thread,
                // A thread the survey named by itself (`Survey::thread_selector`):
                // one thread, by a name no other had or by this boot's pid.
                this_boot: matched.starts_with("pid:"),
                surveyed: (matched.starts_with("pid:") || matched.starts_with("comm:")).then_some(1),
                because,
            }),
            Declared::NapiThreaded { dev } => profile.napi.push(NapiSetting {
                dev: unplaced(dev.clone()),
                threaded: Some(true),
                defer_hard_irqs: None,
                gro_flush_timeout: None,
                because,
            }),
            Declared::Boot { option } => {
                let boot =
                    profile.boot.get_or_insert_with(|| BootSetting { cmdline: unplaced(String::new()), because: Default::default() });
                let mut words: Vec<&str> = boot.cmdline.get_ref().split_whitespace().collect();
                if !words.contains(&option.as_str()) {
                    words.push(option);
                }
                boot.cmdline = unplaced(words.join(" "));
                let key = option.split_once('=').map_or(option.as_str(), |(k, _)| k);
                boot.because.insert(key.to_string(), reason);
            }
        }
    }
    profile
}

/// The file's text: a header saying where it came from and how to apply it.
pub fn text(survey: &Survey, dir: &std::path::Path) -> String {
    let path = dir.join(FILE);
    let mut header = format!(
        "irqlab profile: the recommendations of the survey in {} as settings.\n\
         Apply (held until Ctrl-C): irqlab control apply {}\n\
         Keep (undo with irqlab control revert): irqlab control apply {} --persist\n\
         Then measure again: irqlab survey --compare {}",
        dir.join("survey.json").display(),
        path.display(),
        path.display(),
        dir.join("survey.json").display()
    );
    let profile = of(survey);
    if profile.boot.is_some() {
        header.push_str(&format!(
            "\nIts [boot] options take effect at a boot: irqlab control apply {} --boot writes them for the boot loader",
            path.display()
        ));
    }
    if profile.is_empty() {
        header.push_str("\nThe survey recommended nothing irqlab applies: this profile declares no setting.");
    }
    profile.to_toml(&header)
}
