//! `irqlab testbed up|down|status`: the network-namespace testbed.

use crate::error::{CliError, Status};
use crate::output::print;
use irqlab_host::testbed::{Layout, Testbed};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
    /// Print the layout as JSON (`irqlab/testbed/v1`) instead of text
    #[arg(long, global = true)]
    json: bool,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Create namespaces irqlab-a and irqlab-b with veth links to this
    /// namespace (idempotent); kept until `irqlab testbed down`
    Up,
    /// Remove every namespace and link named irqlab-*
    Down,
    /// Show the testbed if it is up (exit 1 if it is not)
    Status,
}

pub fn run(args: Args) -> Result<Status, CliError> {
    match args.action {
        Action::Up => {
            let layout = Testbed::up_persistent()?;
            print(&layout_text(&layout, args.json))?;
            Ok(Status::Success)
        }
        Action::Down => {
            Testbed::down()?;
            if !args.json {
                print("testbed down: no irqlab-* namespaces or links left\n")?;
            }
            Ok(Status::Success)
        }
        Action::Status => match Testbed::status()? {
            Some(layout) if !layout.complete => {
                print(&layout_text(&layout, args.json))?;
                Ok(Status::Negative)
            }
            Some(layout) => {
                print(&layout_text(&layout, args.json))?;
                Ok(Status::Success)
            }
            None => {
                if args.json {
                    print(&format!("{}\n", serde_json::json!({"schema": "irqlab/testbed/v1", "up": false})))?;
                } else {
                    print("testbed is down\n")?;
                }
                Ok(Status::Negative)
            }
        },
    }
}

fn layout_text(layout: &Layout, json: bool) -> String {
    use std::fmt::Write;
    if json {
        let mut v = serde_json::to_value(layout).expect("layout serialises");
        v["schema"] = "irqlab/testbed/v1".into();
        v["up"] = layout.complete.into();
        return format!("{}\n", serde_json::to_string_pretty(&v).expect("json"));
    }
    let mut out = String::new();
    if layout.complete {
        let kept = if layout.persistent { " (kept until `irqlab testbed down`)" } else { "" };
        let _ = writeln!(out, "testbed up in {}{kept}", layout.subnet);
    } else {
        let left: Vec<&str> = layout.hosts.iter().map(|h| h.netns.as_str()).collect();
        let _ = writeln!(
            out,
            "testbed half-made, left by a run that was killed: {} ({}); `irqlab testbed down` removes it",
            if left.is_empty() { "links without namespaces".to_string() } else { format!("namespaces {}", left.join(", ")) },
            if layout.subnet.starts_with("0.0.0.") { "no addresses".to_string() } else { layout.subnet.clone() }
        );
    }
    for h in &layout.hosts {
        let napi: Vec<String> = h.napi_threads.iter().map(|t| format!("{} (pid {})", t.comm, t.pid)).collect();
        let _ = writeln!(
            out,
            "  {:8} root {} {:<12} <-> {} {} | gro {} threaded-napi {} | {}",
            h.netns,
            h.root_device,
            h.root_addr,
            h.netns,
            h.host_addr,
            on_off(h.gro),
            on_off(h.threaded_napi),
            if napi.is_empty() { "no napi thread".to_string() } else { napi.join(", ") }
        );
    }
    out
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}
