//! `irqlab testbed up|down|status`: the network-namespace testbed.

use crate::error::{CliError, Status};
use irqlab_live::testbed::{Layout, Testbed};

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
            print_layout(&layout, args.json);
            Ok(Status::Success)
        }
        Action::Down => {
            Testbed::down()?;
            if !args.json {
                println!("testbed down: no irqlab-* namespaces or links left");
            }
            Ok(Status::Success)
        }
        Action::Status => match Testbed::status()? {
            Some(layout) if !layout.complete => {
                print_layout(&layout, args.json);
                Ok(Status::Negative)
            }
            Some(layout) => {
                print_layout(&layout, args.json);
                Ok(Status::Success)
            }
            None => {
                if args.json {
                    println!("{}", serde_json::json!({"schema": "irqlab/testbed/v1", "up": false}));
                } else {
                    println!("testbed is down");
                }
                Ok(Status::Negative)
            }
        },
    }
}

fn print_layout(layout: &Layout, json: bool) {
    if json {
        let mut v = serde_json::to_value(layout).expect("layout serialises");
        v["schema"] = "irqlab/testbed/v1".into();
        v["up"] = layout.complete.into();
        println!("{}", serde_json::to_string_pretty(&v).expect("json"));
        return;
    }
    if layout.complete {
        println!("testbed up in {}{}", layout.subnet, if layout.persistent { " (kept until `irqlab testbed down`)" } else { "" });
    } else {
        let left: Vec<&str> = layout.hosts.iter().map(|h| h.netns.as_str()).collect();
        println!(
            "testbed half-made, left by a run that was killed: {} ({}); `irqlab testbed down` removes it",
            if left.is_empty() { "links without namespaces".to_string() } else { format!("namespaces {}", left.join(", ")) },
            if layout.subnet.starts_with("0.0.0.") { "no addresses".to_string() } else { layout.subnet.clone() }
        );
    }
    for h in &layout.hosts {
        let napi: Vec<String> = h.napi_threads.iter().map(|t| format!("{} (pid {})", t.comm, t.pid)).collect();
        println!(
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
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}
