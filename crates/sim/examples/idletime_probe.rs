//! Runs one idletime network point and prints its result (debugging aid):
//! `idletime_probe SETUP FG BG I P_US [SECONDS [tbr]]`, e.g. `gige tcp udp 0.2 300`;
//! `tbr` turns on ALTQ's token bucket regulator with its default depth.
use irqlab_sim::idletime::net::{self, altq_default_tbr_depth, NetExperiment, NetSetup, Proto};
use irqlab_sim::idletime::Discipline;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let mut setup = match a[1].as_str() {
        "gige" => NetSetup::gige_lan(),
        "lan100" => NetSetup::fast_lan(),
        _ => NetSetup::wan_10ms(),
    };
    let proto = |s: &str| if s == "tcp" { Proto::Tcp } else { Proto::Udp };
    let i: f64 = a[4].parse().unwrap();
    let d = match a[5].as_str() {
        "fifo" => Discipline::Fifo,
        "none" => Discipline::Idletime { p_ns: Some(0) },
        p => Discipline::Idletime { p_ns: Some((p.parse::<f64>().unwrap() * 1000.0) as u64) },
    };
    let secs: f64 = a.get(6).map(|s| s.parse().unwrap()).unwrap_or(1.0);
    let bg = a[5] != "none";
    if a.get(7).map(String::as_str) == Some("tbr") {
        setup.link.tbr_depth_bytes = Some(altq_default_tbr_depth(setup.link.rate_bps));
    }
    let mut e = NetExperiment::new(setup, proto(&a[2]), proto(&a[3]), Some(i), bg, d);
    e.duration_ns = (secs * 1e9) as u64;
    let r = net::run(&e);
    println!(
        "fg {:.2} bg {:.2} {} fg_lat {:.1}us bg_lat {:.1}us",
        r.foreground,
        r.background,
        r.unit,
        r.fg_latency_mean_ns / 1e3,
        r.bg_latency_mean_ns / 1e3
    );
    println!("{:?}", r.counters);
}
