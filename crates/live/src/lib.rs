//! Live measurement on a real Linux machine: interference probe, latency,
//! BPF accounting, the netns testbed and traffic generators.
