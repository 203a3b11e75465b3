//! One TCP stream between two namespaces joined by a veth pair, through: the veth underlay
//! alone, orc-wg with kernel batching, orc-wg one packet per system call, and Debian's
//! `wireguard-go` when it (and `wg`) are installed.
//!
//!   cargo bench -p orc-wg --bench throughput [-- --secs 5 --runs 5 --only NAME]
//!
//! Needs root and /dev/net/tun. Prints each run's Mbit/s (at the receiver), the median,
//! and the median's ratio to the underlay's. The stream is a small Rust sender and receiver
//! in this process (threads entered into the namespaces), so no iperf3 is needed.

#![allow(clippy::print_stdout)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use orc_wg::{Batching, PeerConfig, generate_private_key, public_key};
use support::{
    MESH_A, MESH_B, Pair, Topology, UNDERLAY_A, UNDERLAY_B, WireguardGo, tcp_throughput,
};

struct Options {
    secs: u64,
    runs: usize,
    only: Option<String>,
}

fn options() -> Options {
    let mut options = Options {
        secs: 5,
        runs: 5,
        only: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--secs" => options.secs = args.next().and_then(|v| v.parse().ok()).unwrap_or(5),
            "--runs" => options.runs = args.next().and_then(|v| v.parse().ok()).unwrap_or(5),
            "--only" => options.only = args.next(),
            _ => {} // cargo bench passes --bench
        }
    }
    options
}

fn measure(name: &str, options: &Options, from: &str, to: &str, address: Ipv4Addr) -> f64 {
    let mut runs: Vec<f64> = (0..options.runs)
        .map(|run| {
            let mbps = tcp_throughput(
                from,
                to,
                address,
                5201 + run as u16,
                Duration::from_secs(options.secs),
            );
            print!(" {mbps:.0}");
            let _ = std::io::stdout().flush();
            mbps
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    let median = runs[runs.len() / 2];
    println!("  -> {name}: median {median:.0} Mbit/s");
    median
}

fn wanted(options: &Options, name: &str) -> bool {
    options
        .only
        .as_deref()
        .is_none_or(|only| name.contains(only))
}

fn main() {
    let options = options();
    let mut results: Vec<(&str, f64)> = Vec::new();

    if wanted(&options, "underlay") {
        print!("underlay (veth):");
        let topology = Topology::new();
        let mbps = measure("underlay", &options, &topology.a, &topology.b, UNDERLAY_B);
        results.push(("underlay (veth)", mbps));
    }
    for (name, batching) in [
        ("orc-wg batched", Batching::Auto),
        ("orc-wg one packet per call", Batching::Off),
    ] {
        if !wanted(&options, name) {
            continue;
        }
        let pair = Pair::new(batching, true);
        let t = &pair.topology;
        assert!(
            t.ping_until_answered(&t.a, MESH_B, 10),
            "{name}: no handshake"
        );
        print!("{name} {:?}:", pair.a().batching());
        let mbps = measure(name, &options, &t.a, &t.b, MESH_B);
        results.push((name, mbps));
    }
    if wanted(&options, "wireguard-go") {
        match wireguard_go(&options) {
            Some(mbps) => results.push(("wireguard-go", mbps)),
            None => {
                println!("wireguard-go: skipped (apt-get install wireguard-go wireguard-tools)")
            }
        }
    }

    let underlay = results
        .iter()
        .find(|(name, _)| name.starts_with("underlay"))
        .map(|(_, mbps)| *mbps);
    println!();
    println!(
        "{:<28} {:>12} {:>10}   ({} runs of {} s, median)",
        "path", "Mbit/s", "/underlay", options.runs, options.secs
    );
    for (name, mbps) in &results {
        let ratio = underlay.map_or("-".to_owned(), |u| format!("{:.1} %", mbps / u * 100.0));
        println!("{name:<28} {mbps:>12.0} {ratio:>10}");
    }
}

/// The same stream through Debian's wireguard-go, configured with `wg` and `ip`.
fn wireguard_go(options: &Options) -> Option<f64> {
    if !support::installed("wireguard-go") || !support::installed("wg") {
        return None;
    }
    let topology = Topology::new();
    let id = std::process::id() % 10_000;
    let keys = [
        generate_private_key().expect("key"),
        generate_private_key().expect("key"),
    ];
    let peer = |key: &[u8; 32], endpoint: Ipv4Addr, allowed: &str| PeerConfig {
        public_key: public_key(key),
        endpoint: Some(SocketAddrV4::new(endpoint, support::PORT)),
        allowed_ips: vec![allowed.parse().expect("prefix")],
        keepalive: None,
    };
    let _a = WireguardGo::start(
        &topology.a,
        &format!("wgoA{id}"),
        &keys[0],
        MESH_A,
        &peer(&keys[1], UNDERLAY_B, "10.99.0.2/32"),
    );
    let _b = WireguardGo::start(
        &topology.b,
        &format!("wgoB{id}"),
        &keys[1],
        MESH_B,
        &peer(&keys[0], UNDERLAY_A, "10.99.0.1/32"),
    );
    assert!(
        topology.ping_until_answered(&topology.a, MESH_B, 10),
        "wireguard-go: no handshake"
    );
    print!("wireguard-go:");
    Some(measure(
        "wireguard-go",
        options,
        &topology.a,
        &topology.b,
        MESH_B,
    ))
}
