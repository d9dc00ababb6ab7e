//! Runs the load-bounds reproduction and prints its rows without the CLI:
//! `cargo run --release -p irqlab-experiments --example load_bounds_quick [full]`.
use irqlab_experiments::load_bounds::{reproduce, Options};
use std::sync::atomic::AtomicBool;

fn main() {
    let quick = std::env::args().nth(1).as_deref() != Some("full");
    let opts = Options { quick, seed: 1, threads: 2 };
    let r = reproduce(&opts, &AtomicBool::new(false), &|_, _| {}).expect("embedded scenarios");
    for c in &r.details.curves {
        println!("{}: fit {:?} driver {:?} covers {}", c.name, c.fit, c.driver_fit, c.fits_cover);
    }
    for c in &r.details.configs {
        println!("{}: fit {:?} predicted {} meets {:?}", c.name, c.driver_fit, c.predicted_max_e2_ns, c.meets_up_to_e2_ns);
        for p in &c.points {
            println!(
                "  e2 {} miss {:.1}% hb missed {}/{}",
                p.e2_ns,
                p.tau2_miss_pct,
                p.heartbeats_missed,
                p.heartbeats_missed + p.heartbeats_received
            );
        }
    }
    for row in &r.rows {
        println!("{:?} {} | {} | {:.2} {}", row.holds, row.metric, row.paper, row.simulated, row.unit);
    }
}
