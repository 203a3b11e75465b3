//! What the agent reports about its machine, read from the kernel (`/proc`, `/sys`) and the
//! interfaces' addresses. A fact that cannot be read is left empty, never guessed.

use std::path::Path;

use orc_proto::agent_pb;

/// Where the machine's DMI `product_uuid` is read (root only on most machines).
pub const PRODUCT_UUID_FILE: &str = "/sys/class/dmi/id/product_uuid";

fn read_trimmed(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// `MemTotal` and `MemAvailable` of `/proc/meminfo` text, in bytes.
fn memory(meminfo: &str) -> (u64, u64) {
    let field = |name: &str| {
        meminfo
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |kib| kib * 1024)
    };
    (field("MemTotal"), field("MemAvailable"))
}

/// The one-minute load of `/proc/loadavg` text, times 100.
fn load_centi(loadavg: &str) -> u32 {
    loadavg
        .split_whitespace()
        .next()
        .and_then(|l| l.parse::<f64>().ok())
        .map_or(0, |l| {
            (l * 100.0).round().clamp(0.0, f64::from(u32::MAX)) as u32
        })
}

/// The machine's facts now; `product_uuid_file` overrides where the DMI UUID is read.
pub fn gather(product_uuid_file: &Path) -> agent_pb::Facts {
    let (memory_total_bytes, memory_available_bytes) =
        memory(&std::fs::read_to_string("/proc/meminfo").unwrap_or_default());
    let mut addresses: Vec<agent_pb::Address> = if_addrs::get_if_addrs()
        .unwrap_or_default()
        .into_iter()
        .filter(|i| !i.is_loopback())
        .map(|i| {
            let prefix = match &i.addr {
                if_addrs::IfAddr::V4(v4) => u32::from(v4.netmask).count_ones(),
                if_addrs::IfAddr::V6(v6) => u128::from(v6.netmask).count_ones(),
            };
            agent_pb::Address {
                interface: i.name.clone(),
                cidr: format!("{}/{prefix}", i.ip()),
            }
        })
        .collect();
    addresses.sort_by(|a, b| (&a.interface, &a.cidr).cmp(&(&b.interface, &b.cidr)));
    agent_pb::Facts {
        hostname: read_trimmed("/proc/sys/kernel/hostname"),
        addresses,
        kernel: read_trimmed("/proc/sys/kernel/osrelease"),
        product_uuid: read_trimmed(product_uuid_file).to_ascii_lowercase(),
        architecture: std::env::consts::ARCH.to_string(),
        cpus: std::thread::available_parallelism()
            .map(|n| u32::try_from(n.get()).unwrap_or(u32::MAX))
            .unwrap_or(0),
        memory_total_bytes,
        memory_available_bytes,
        load_centi: load_centi(&std::fs::read_to_string("/proc/loadavg").unwrap_or_default()),
        // Filled in by the agent's mesh, which holds the key.
        wireguard_public_key: String::new(),
        wireguard: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_text_is_read_exactly() {
        let meminfo =
            "MemTotal:        4026532 kB\nMemFree:  100 kB\nMemAvailable:    2013266 kB\n";
        assert_eq!(memory(meminfo), (4026532 * 1024, 2013266 * 1024));
        assert_eq!(memory("garbage"), (0, 0));
        assert_eq!(load_centi("0.42 0.30 0.20 1/123 4567"), 42);
        assert_eq!(load_centi(""), 0);
    }

    #[test]
    fn this_machine_reports_its_kernel_and_memory() {
        let facts = gather(Path::new("/nonexistent"));
        assert!(!facts.kernel.is_empty());
        assert!(facts.cpus >= 1);
        assert!(facts.memory_total_bytes >= facts.memory_available_bytes);
        assert!(facts.memory_total_bytes > 0);
        assert_eq!(facts.product_uuid, "");
    }
}
