//! Facts about the machine a run happened on, printed with every report.

/// Cores, CPU model, kernel and load, one line each.
pub fn facts() -> Vec<String> {
    let cores = std::thread::available_parallelism()
        .map(|n| n.to_string())
        .unwrap_or_else(|e| format!("unknown ({e})"));
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into());
    vec![
        format!("cores: {cores}"),
        format!("cpu: {cpu}"),
        format!(
            "kernel: {kernel} ({} {})",
            std::env::consts::OS,
            std::env::consts::ARCH
        ),
        format!("load average (1/5/15 min): {load}"),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn facts_name_the_cores() {
        let f = super::facts();
        let n = std::thread::available_parallelism().expect("cores").get();
        assert_eq!(f[0], format!("cores: {n}"));
    }
}
