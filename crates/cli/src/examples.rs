//! One or two examples per command, kept beside the clap definitions and
//! shown in two places: under `irqlab COMMAND --help` (attached to the
//! parsed `clap::Command` by [`attach`]) and as the EXAMPLES section of the
//! command's man page (`irqlab man`). A command is found by its path of
//! subcommand names, so a new command needs only one entry here.

/// (path, examples): the path is the subcommand names after `irqlab`
/// (`""` for `irqlab` itself); each example is (command line, what it does).
pub const EXAMPLES: &[(&str, &[(&str, &str)])] = &[
    (
        "",
        &[
            ("irqlab survey --quick", "how much interrupts take from tasks here, where, and what to change (one page)"),
            ("irqlab doctor", "which live commands can run on this machine"),
        ],
    ),
    (
        "analyze",
        &[
            ("irqlab analyze examples/section5-sporadic.toml", "response-time analysis of a task set (exit 1: not schedulable)"),
            ("irqlab analyze examples/section5-sporadic.toml --test load --html out/analysis.html", "the load test (eq. 8), with a page"),
        ],
    ),
    ("bound", &[("irqlab bound --period 7ms --wcet 2ms --from 0.5ms --to 60ms --svg bound.svg", "demand and load bounds of one task")]),
    (
        "fit",
        &[(
            "irqlab fit examples/curve-nic.json --baseline examples/curve-baseline.csv --svg fit.svg",
            "the hyperbola (u, p) of a measured curve, the idle floor subtracted",
        )],
    ),
    (
        "sim",
        &[
            ("irqlab sim scenarios/examples/ping-flood.toml --duration 2s", "where the CPU went, per task and per context"),
            (
                "irqlab sim scenarios/examples/probe-threaded.toml --curve curve.json --trace trace.json",
                "the simulated probe's curve and a Perfetto trace",
            ),
            (
                "irqlab sim --from-survey out/survey --profile out/survey/profile.toml",
                "the surveyed machine simulated beside its measurement, and each CPU predicted with the profile",
            ),
        ],
    ),
    ("bench", &[("irqlab bench sim --duration 10s", "the simulator's events per second")]),
    ("bench sim", &[("irqlab bench sim --duration 10s --json -", "the simulator's speed as JSON")]),
    (
        "reproduce",
        &[
            (
                "irqlab reproduce load-bounds --quick --html out/load-bounds.html",
                "the load-bounds paper in simulation, paper beside simulated",
            ),
            ("sudo irqlab reproduce bh-threshold --live --quick", "the BH-threshold experiment on this machine's testbed"),
        ],
    ),
    ("measure", &[("sudo irqlab measure interference --cpu 1 --duration 10s --svg curve.svg", "the interference probe on CPU 1")]),
    (
        "measure interference",
        &[
            ("sudo irqlab measure interference --cpu 1 --duration 10s --json curve.json", "max load over every window length on CPU 1"),
            ("irqlab fit curve.json", "then fit the hyperbola to it"),
        ],
    ),
    (
        "measure accounting",
        &[
            ("sudo irqlab measure accounting --duration 5s", "who lost CPU time to hard IRQs and softirqs, vs what /proc charged"),
            ("sudo irqlab measure accounting --duration 5s --prometheus acct.prom", "the same as Prometheus text"),
        ],
    ),
    ("measure latency", &[("sudo irqlab measure latency --duration 10s --histogram", "timer latency per CPU, cyclictest's method")]),
    (
        "watch",
        &[
            (
                "sudo irqlab watch --cpu 1 --threshold 100us --json watch.json",
                "timer latency on CPU 1 until Ctrl-C; every wake-up 100 us late or more explained by what ran",
            ),
            ("sudo irqlab watch --threshold 500us --on-threshold stop", "stop at the first spike and name its cause (rtla timerlat -a)"),
        ],
    ),
    ("testbed", &[("sudo irqlab testbed up", "namespaces irqlab-a and irqlab-b linked to this machine by veth")]),
    ("testbed up", &[("sudo irqlab testbed up", "create the testbed (idempotent)")]),
    ("testbed down", &[("sudo irqlab testbed down", "remove every irqlab-* namespace and link")]),
    ("testbed status", &[("irqlab testbed status --json", "the testbed's hosts and addresses (exit 1 if it is down)")]),
    ("traffic", &[("sudo irqlab traffic ping-flood --from a --interval 10us --duration 5s", "one echo request every 10 us from host a")]),
    ("stimulus", &[("sudo irqlab stimulus respond --bind 10.213.1.1:9770 --policy fifo:80", "the target side of a stimulus run")]),
    ("stimulus respond", &[("sudo irqlab stimulus respond --bind 10.213.1.1:9770 --policy fifo:80", "answer each UDP stimulus at once")]),
    (
        "stimulus run",
        &[(
            "sudo irqlab stimulus run --target 10.213.1.1 --rate 1000 --count 10000 --json stim.json",
            "10,000 stimuli at 1 kHz, ICMP and UDP paths",
        )],
    ),
    (
        "load",
        &[
            ("irqlab load cpu --duration 30s", "CPU spinners on every CPU"),
            ("sudo irqlab load net --testbed b --duration 30s", "a UDP flood from testbed host b into this machine"),
        ],
    ),
    ("idletime-model", &[("irqlab idletime-model --resource disk --svg model.svg", "foreground/background throughput over p and i")]),
    (
        "doctor",
        &[
            ("irqlab doctor", "readiness of every live command and the kernel settings behind it"),
            ("irqlab doctor --json -", "the same as JSON"),
            (
                "irqlab doctor --snapshot before.json",
                "the machine's controllable state (thread policies, IRQ affinities, NAPI, qdiscs, ...)",
            ),
            ("irqlab doctor --diff before.json", "what changed on the machine since that snapshot (exit 1 naming each difference)"),
        ],
    ),
    (
        "survey",
        &[
            (
                "sudo irqlab survey --quick --load net --out out/survey",
                "every measurement idle and under a network flood; out/survey/index.html",
            ),
            ("irqlab survey --from out/survey/survey.json --out out/survey", "render the page again"),
            (
                "sudo irqlab survey --quick --load net --compare out/survey --out out/after",
                "survey again after a change: the earlier survey beside this one (before and after)",
            ),
        ],
    ),
    ("export", &[("sudo irqlab export --listen 127.0.0.1:9464", "the BPF accounting on /metrics for Prometheus")]),
    ("control", &[("irqlab control status", "what irqlab changed on this machine, and by which process")]),
    (
        "control threads",
        &[(
            "sudo irqlab control threads napi:irqlab-b --policy deadline:4ms/10ms --duration 60s",
            "a NAPI kthread under SCHED_DEADLINE for a minute",
        )],
    ),
    (
        "control napi",
        &[
            ("irqlab control napi eth0", "the device's NAPI instances and settings"),
            ("sudo irqlab control napi eth0 --threaded on --duration 60s", "threaded NAPI for a minute"),
        ],
    ),
    (
        "control bh-budget",
        &[(
            "sudo irqlab control bh-budget irqlab-b --cpu 1 --duration 10s",
            "the adaptive bottom-half budget on the testbed's NAPI kthread",
        )],
    ),
    (
        "control process-aware",
        &[(
            "sudo irqlab control process-aware irqlab-b --duration 30s",
            "NAPI kthreads at the priority of the process waiting for their data",
        )],
    ),
    (
        "control idletime",
        &[(
            "sudo irqlab control idletime --resource disk --foreground comm:db --interval 5ms --background -- tar czf /tmp/b.tgz /usr",
            "hold a backup back until the disk has been idle 5 ms",
        )],
    ),
    (
        "control sched-feature",
        &[(
            "sudo irqlab control sched-feature HRTICK_DL on --duration 60s",
            "SCHED_DEADLINE runtimes enforced by an hrtimer, not the tick, for a minute",
        )],
    ),
    (
        "control fair-server",
        &[(
            "sudo irqlab control fair-server --cpu 1 --runtime 0 --duration 60s",
            "no fair-class server on CPU 1: real-time tasks may take all of it for a minute",
        )],
    ),
    (
        "control irq",
        &[
            ("sudo irqlab control irq virtio2 --cpu 1 --dry-run", "which IRQs a device has, and where they would go"),
            (
                "sudo irqlab control irq '*' default --cpu 1 --duration 60s",
                "every IRQ the kernel lets move, and new ones, on CPU 1 for a minute",
            ),
        ],
    ),
    (
        "control apply",
        &[
            ("sudo irqlab control apply out/survey/profile.toml --dry-run", "what the survey's profile would change, old -> new"),
            ("sudo irqlab control apply out/survey/profile.toml --persist", "apply it and keep it (undo: irqlab control revert --all)"),
            (
                "sudo irqlab control apply out/survey/profile.toml --predict",
                "predict each CPU after it (kept for survey --compare out/survey), then apply and hold it",
            ),
            ("sudo irqlab control apply out/survey/profile.toml --boot", "write its [boot] kernel options for the next boot (GRUB)"),
        ],
    ),
    (
        "control install",
        &[("sudo irqlab control install out/survey/profile.toml", "apply the profile at every boot (a systemd unit), from now on")],
    ),
    ("control uninstall", &[("sudo irqlab control uninstall", "stop the installed profile's unit, give its settings back, remove it")]),
    (
        "control export",
        &[(
            "irqlab control export out/survey/profile.toml --tuned out/irqlab-rt",
            "the profile as a tuned profile (tuned.conf, script.sh): cp -r out/irqlab-rt/. /etc/tuned/irqlab-rt",
        )],
    ),
    ("control status", &[("irqlab control status --json -", "the journal's entries as JSON")]),
    ("control revert", &[("sudo irqlab control revert --all", "undo what killed runs left behind")]),
    ("lab", &[("irqlab lab kernels", "the kernels irqlab can boot, which are fetched, KVM or emulation")]),
    ("lab kernels", &[("irqlab lab kernels --json", "the list as JSON")]),
    ("lab fetch", &[("irqlab lab fetch debian:6.12-rt", "download and unpack Debian's newest 6.12 PREEMPT_RT kernel into the cache")]),
    (
        "lab run",
        &[
            (
                "sudo irqlab lab run --kernel debian:6.1-rt -- irqlab measure accounting --duration 2s --json -",
                "the BPF accounting on 6.1-rt",
            ),
            (
                "sudo irqlab lab run --kernel debian:6.12-rt --icount --disk /tmp/disk.img -- irqlab doctor",
                "doctor on 6.12-rt, instruction-driven clock, a block device",
            ),
        ],
    ),
    (
        "lab compare",
        &[(
            "sudo irqlab lab compare --kernel debian:6.1-rt --kernel debian:6.12-rt -- survey --quick",
            "one page: both kernels' surveys side by side",
        )],
    ),
    ("completions", &[("irqlab completions bash > /etc/bash_completion.d/irqlab", "bash completion")]),
];

/// The examples of the command at `path` (subcommand names joined by spaces).
pub fn for_path(path: &str) -> Option<&'static [(&'static str, &'static str)]> {
    EXAMPLES.iter().find(|(p, _)| *p == path).map(|(_, e)| *e)
}

/// The examples as `--help` shows them (after the options).
pub fn help_text(examples: &[(&str, &str)]) -> String {
    let mut text = String::from("Examples:");
    for (line, what) in examples {
        text.push_str(&format!("\n  {line}\n      {what}"));
    }
    text
}

/// Adds each command's examples to its `--help`, after any text it already has.
pub fn attach(cmd: clap::Command) -> clap::Command {
    attach_at(cmd, "")
}

fn attach_at(mut cmd: clap::Command, path: &str) -> clap::Command {
    if let Some(examples) = for_path(path) {
        let text = match cmd.get_after_help() {
            Some(own) => format!("{own}\n\n{}", help_text(examples)),
            None => help_text(examples),
        };
        cmd = cmd.after_help(text);
    }
    let names: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_string()).collect();
    for name in names {
        let sub_path = if path.is_empty() { name.clone() } else { format!("{path} {name}") };
        cmd = cmd.mut_subcommand(&name, |sub| attach_at(sub, &sub_path));
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every visible command's path, `""` for `irqlab` itself.
    fn paths(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        out.push(path.to_string());
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
            let sub_path = if path.is_empty() { sub.get_name().to_string() } else { format!("{path} {}", sub.get_name()) };
            paths(sub, &sub_path, out);
        }
    }

    #[test]
    fn every_command_has_examples() {
        let mut all = Vec::new();
        paths(&crate::Cli::command(), "", &mut all);
        let missing: Vec<&String> = all.iter().filter(|p| for_path(p).is_none()).collect();
        assert!(missing.is_empty(), "add one or two examples to EXAMPLES in crates/cli/src/examples.rs for: {missing:?}");
        for (path, _) in EXAMPLES {
            assert!(all.iter().any(|p| p == path), "EXAMPLES names {path:?}, which is not a command");
        }
    }

    /// The examples are real command lines: each parses (up to a redirect).
    #[test]
    fn every_example_parses() {
        for (path, examples) in EXAMPLES {
            for (line, _) in *examples {
                let words: Vec<&str> =
                    line.split_whitespace().skip_while(|w| *w == "sudo").take_while(|w| !matches!(*w, ">" | "|" | "&&")).collect();
                assert_eq!(words.first(), Some(&"irqlab"), "{path}: {line}");
                let parsed = attach(crate::Cli::command()).try_get_matches_from(&words);
                assert!(parsed.is_ok(), "{path}: `{line}` does not parse: {}", parsed.err().unwrap());
            }
        }
    }

    #[test]
    fn help_ends_with_the_examples() {
        let mut cmd = attach(crate::Cli::command());
        let survey = cmd.find_subcommand_mut("survey").unwrap();
        let help = survey.render_help().to_string();
        assert!(help.contains("Examples:\n  sudo irqlab survey --quick"), "{help}");
    }
}
