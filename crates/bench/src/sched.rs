//! Where the time of a round went: the CPU time a process's threads ran
//! (`/proc/.../schedstat`, first field, in nanoseconds), how long they sat
//! runnable on a run queue waiting for a CPU (second field), and how much of
//! the machine's CPU time was idle (`/proc/stat`).
//!
//! `call-throughput` prints these beside its rates: at low concurrency the
//! gap to the bare loop is mostly a client waiting behind a running tool
//! while the other CPU idles, and these figures show it in every run.

use std::io;
use std::path::Path;
use std::time::Duration;

/// The first field of a `schedstat` file: time spent on a CPU.
const RAN: usize = 0;
/// The second field: time spent runnable, waiting on a run queue.
const WAITED: usize = 1;

/// Field `field` of one task's `schedstat` file, as a duration.
fn field_of(schedstat: &Path, field: usize) -> io::Result<Duration> {
    let text = std::fs::read_to_string(schedstat)?;
    let ns = text
        .split_whitespace()
        .nth(field)
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or_else(|| io::Error::other(format!("cannot parse {}", schedstat.display())))?;
    Ok(Duration::from_nanos(ns))
}

/// Field `field` of the `schedstat` of every live thread of process `pid`
/// (`None`: this process), summed.
fn process_sum(pid: Option<u32>, field: usize) -> io::Result<Duration> {
    let dir = match pid {
        Some(p) => Path::new("/proc").join(p.to_string()).join("task"),
        None => Path::new("/proc/self/task").to_path_buf(),
    };
    let mut total = Duration::ZERO;
    for entry in std::fs::read_dir(&dir)? {
        // A thread that ends between the listing and the read is skipped.
        if let Ok(w) = field_of(&entry?.path().join("schedstat"), field) {
            total += w;
        }
    }
    Ok(total)
}

/// Total run-queue wait of the live threads of process `pid` (`None`: this
/// process). Threads that exited are not counted: sample a process whose
/// threads outlive the interval, or use [`thread_wait`] inside each thread.
pub fn process_wait(pid: Option<u32>) -> io::Result<Duration> {
    process_sum(pid, WAITED)
}

/// Total CPU time of the live threads of process `pid`, in nanoseconds (not
/// the 10 ms ticks of `/proc/<pid>/stat`). Threads that exited are not
/// counted, as for [`process_wait`].
pub fn process_cpu(pid: u32) -> io::Result<Duration> {
    process_sum(Some(pid), RAN)
}

/// Run-queue wait of the calling thread so far.
pub fn thread_wait() -> io::Result<Duration> {
    field_of(Path::new("/proc/thread-self/schedstat"), WAITED)
}

/// Idle and total CPU time of the whole machine so far, in clock ticks
/// (`/proc/stat`'s `cpu` line; idle counts `idle` and `iowait`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    /// Ticks spent idle.
    pub idle: u64,
    /// All ticks.
    pub total: u64,
}

impl CpuTicks {
    /// The current counters.
    pub fn now() -> io::Result<CpuTicks> {
        let stat = std::fs::read_to_string("/proc/stat")?;
        parse_cpu_line(&stat).ok_or_else(|| io::Error::other("cannot parse /proc/stat"))
    }

    /// Ticks from `earlier` to `self`.
    pub fn since(self, earlier: CpuTicks) -> CpuTicks {
        CpuTicks {
            idle: self.idle.saturating_sub(earlier.idle),
            total: self.total.saturating_sub(earlier.total),
        }
    }

    /// Adds another interval.
    pub fn add(&mut self, other: CpuTicks) {
        self.idle += other.idle;
        self.total += other.total;
    }

    /// Idle share in percent (0 when nothing was counted).
    pub fn idle_percent(self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.idle as f64 * 100.0 / self.total as f64
        }
    }
}

/// The aggregate `cpu ` line: user nice system idle iowait irq softirq steal ...
fn parse_cpu_line(stat: &str) -> Option<CpuTicks> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    // guest and guest_nice (fields 9 and 10) are already inside user and nice.
    let total = f.iter().take(8).sum();
    Some(CpuTicks {
        idle: *f.get(3)? + f.get(4).copied().unwrap_or(0),
        total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_line_is_parsed_without_guest_time() {
        let stat = "cpu  100 5 50 800 20 1 2 3 40 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n";
        let t = parse_cpu_line(stat).expect("parsed");
        assert_eq!(t.idle, 820);
        assert_eq!(t.total, 100 + 5 + 50 + 800 + 20 + 1 + 2 + 3);
        assert!(parse_cpu_line("cpu0 1 2\n").is_none());
        assert!(parse_cpu_line("cpu  1 x 3 4\n").is_none());
    }

    #[test]
    fn a_busy_thread_has_a_readable_wait_and_this_process_at_least_as_much() {
        let mine = thread_wait().expect("thread schedstat");
        let all = process_wait(None).expect("process schedstat");
        assert!(all >= mine, "{all:?} < {mine:?}");
        let idle = CpuTicks::now().expect("/proc/stat");
        assert!(idle.total >= idle.idle && idle.total > 0);
    }

    #[test]
    fn process_cpu_grows_while_this_process_works() {
        let me = std::process::id();
        let before = process_cpu(me).expect("schedstat");
        assert!(before > Duration::ZERO);
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while process_cpu(me).expect("schedstat") <= before {
            x = x.wrapping_mul(31).wrapping_add(std::hint::black_box(7));
            assert!(start.elapsed() < Duration::from_secs(10), "{x}");
        }
        assert!(process_cpu(u32::MAX).is_err());
    }
}
