//! Conservation over random scenarios: for every run, time in all contexts
//! plus idle equals the simulated span, and every packet is handled,
//! delivered, dropped with a reason, or still in flight (`common::run`
//! checks both on every result).

mod common;

use proptest::prelude::*;

const MODELS: [&str; 4] = ["linux-2.4", "linux-2.6", "linux-modern", "threaded"];

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, .. ProptestConfig::default() })]

    #[test]
    fn time_and_packets_are_conserved(
        model in 0..4usize,
        napi in any::<bool>(),
        interval_ns in 800u64..40_000,
        udp_ns in 200u64..6_000,
        switch_ns in 0u64..3_000,
        ring in 4u32..512,
        rcvbuf in 64u64..100_000,
        exec_us in 100u64..4_000,
        poisson in any::<bool>(),
        warmup in any::<bool>(),
        fair24 in any::<bool>(),
    ) {
        let text = format!(
            "[machine]\nhz = 1000\nsoftirq = \"{}\"\nscheduler = \"{}\"\n[machine.costs]\nirq_entry = \"700ns\"\nirq_exit = \"300ns\"\ntick = \"1us\"\ncontext_switch = \"{switch_ns}ns\"\nirq_primary = \"200ns\"\n\
             [nic]\nring = {ring}\nnapi = {napi}\ncoalesce_frames = 4\ncoalesce_usecs = \"20us\"\n[nic.costs]\nirq = \"500ns\"\nirq_per_packet = \"300ns\"\nicmp_echo = \"2us\"\nudp = \"{udp_ns}ns\"\n\
             [[socket]]\nname = \"s\"\nrcvbuf = {rcvbuf}\n\
             [[task]]\nname = \"srv\"\nkind = \"udp-server\"\nsocket = \"s\"\nrecv_cost = \"1us\"\nuser_cost = \"1us\"\n\
             [[task]]\nname = \"rt\"\nkind = \"periodic\"\npolicy = \"fifo\"\npriority = 60\nperiod = \"5ms\"\nexec = \"{exec_us}us\"\n\
             [[task]]\nname = \"hog\"\nkind = \"cpu-loop\"\npolicy = \"idle\"\n\
             [[traffic]]\nkind = \"{}\"\ninterval = \"{interval_ns}ns\"\nsocket = \"s\"\nsize = 100\n\
             [[traffic]]\nkind = \"ping-flood\"\ninterval = \"{}ns\"\nsize = 64\n\
             [run]\nduration = \"60ms\"\nwarmup = \"{}\"\n",
            MODELS[model],
            if fair24 { "linux-2.4" } else { "cfs" },
            if poisson { "poisson" } else { "constant" },
            interval_ns * 3,
            if warmup { "7ms" } else { "0" },
        );
        let r = common::run(&text);
        prop_assert!(r.conservation.packets_offered > 0);
    }
}
