//! Spawning while the parent holds a lot of touched memory: the vfork-style path copies
//! no page tables, so it keeps working (and stays fast). Prints spawns/s idle vs loaded
//! (`cargo test -p toolsrv-sandbox --test spawn_memory -- --nocapture`).

// Test code: an unexpected failure is a panic that names it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod spawn_support;

use std::time::Instant;

use spawn_support::run;
use toolsrv_sandbox::ExitStatus;

const SPAWNS: u32 = 100;

fn spawns_per_second() -> f64 {
    let start = Instant::now();
    for _ in 0..SPAWNS {
        let (status, _) = run(&["/bin/true"], "/", None).expect("spawn true");
        assert_eq!(status, ExitStatus::Code(0));
    }
    f64::from(SPAWNS) / start.elapsed().as_secs_f64()
}

/// The same with std's `Command` + `pre_exec`, which forces `fork()` (for comparison).
fn fork_spawns_per_second() -> f64 {
    use std::os::unix::process::CommandExt;
    let start = Instant::now();
    for _ in 0..SPAWNS {
        let mut cmd = std::process::Command::new("/bin/true");
        // Safety: the hook does nothing, so it is async-signal-safe.
        unsafe { cmd.pre_exec(|| Ok(())) };
        let status = cmd.status().expect("fork spawn");
        assert!(status.success());
    }
    f64::from(SPAWNS) / start.elapsed().as_secs_f64()
}

#[test]
fn spawn_works_with_256_mib_of_touched_memory() {
    let idle = spawns_per_second();
    let fork_idle = fork_spawns_per_second();
    let mut ballast = vec![0u8; 256 << 20];
    for (i, page) in ballast.chunks_mut(4096).enumerate() {
        page[0] = (i % 251) as u8 + 1;
    }
    let loaded = spawns_per_second();
    let fork_loaded = fork_spawns_per_second();
    // Keep the ballast alive (and touched) across the measurement.
    let sum: u64 = ballast.chunks(4096).map(|p| u64::from(p[0])).sum();
    assert!(sum > 0);
    println!("spawns/s: idle {idle:.0}, with 256 MiB touched {loaded:.0}");
    let prep_start = Instant::now();
    let confinement =
        toolsrv_sandbox::Confinement::prepare(&spawn_support::base_rules()).expect("prepare");
    let prepare_us = prep_start.elapsed().as_micros();
    let start = Instant::now();
    for _ in 0..SPAWNS {
        let (status, _) = run(&["/bin/true"], "/", Some(&confinement)).expect("confined spawn");
        assert_eq!(status, ExitStatus::Code(0));
    }
    let confined = f64::from(SPAWNS) / start.elapsed().as_secs_f64();
    println!("confined spawns/s (loaded): {confined:.0}; prepare took {prepare_us} us");
    println!("fork+exec spawns/s: idle {fork_idle:.0}, with 256 MiB touched {fork_loaded:.0}");
    let (status, out) = run(&["/bin/echo", "still works"], "/", None).expect("spawn");
    assert_eq!(
        (status, out.as_str()),
        (ExitStatus::Code(0), "still works\n")
    );
    drop(ballast);
}
