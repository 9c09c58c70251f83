//! The report of `call-cpu`: latency (or rate) beside the bare spawn, the
//! server's CPU per call of each build, and the paired ratio after/before.

use anyhow::{Context, Result};

use crate::args::Flavour;
use crate::benches::call::figure;
use crate::report::{baseline_line, human, rate_line, time_line, Figure};
use crate::server::ServerProcess;
use crate::stats::Spread;
use crate::tooldir::TRUE_EXEC;

use super::blocks::{Measured, Plan, Tally};
use super::{Build, PROGRAM};

/// The header of one mode: what runs against what, and how often.
pub fn header(
    mode: &str,
    builds: &[Build],
    servers: &[ServerProcess],
    plan: &Plan,
    flavour: Flavour,
) {
    let who: Vec<String> = builds
        .iter()
        .zip(servers)
        .map(|(b, s)| format!("{} {} (pid {})", b.label, b.bin.display(), s.pid()))
        .collect();
    let callers = if plan.callers == 1 {
        "1 caller".to_string()
    } else {
        format!("{} concurrent callers", plan.callers)
    };
    println!(
        "\n== call-cpu: {mode}, {callers}; servers {}; --no-auth, built-in policy; tool {TRUE_EXEC} ({PROGRAM}), each call pipelined as the C bench sends it (raw 9P); {} blocks of {} calls per figure after {} warm-up, interleaved with bare posix_spawn; client runtime {}",
        who.join(", "),
        plan.blocks,
        if plan.callers == 1 {
            plan.per_caller.to_string()
        } else {
            format!(
                "{} ({} x {})",
                plan.block_calls(),
                plan.callers,
                plan.per_caller
            )
        },
        plan.warmup * plan.callers,
        flavour.name()
    );
}

/// The figures of one mode.
pub fn mode(mode: &str, builds: &[Build], plan: &Plan, m: &Measured) -> Result<()> {
    if plan.callers == 1 {
        latencies(mode, builds, m)?;
    } else {
        rates(mode, builds, plan, m)?;
    }
    cpu(mode, builds, plan, m)
}

/// One caller: each build's latency beside the bare spawn's, and after
/// beside before.
fn latencies(mode: &str, builds: &[Build], m: &Measured) -> Result<()> {
    let bare = figure(&format!("bare posix_spawn {PROGRAM}"), &m.bare.latencies)?;
    println!("{}", baseline_line(&bare));
    let calls = builds
        .iter()
        .zip(&m.servers)
        .map(|(b, t)| figure(&format!("call ({mode}, {})", b.label), &t.latencies))
        .collect::<Result<Vec<_>>>()?;
    for c in &calls {
        println!("{}", time_line(c, &bare, None));
    }
    if let [before, after] = &calls[..] {
        println!("{}", time_line(after, before, None));
    }
    Ok(())
}

/// Concurrent callers: each build's median block rate beside the bare
/// spawn's, and after beside before.
fn rates(mode: &str, builds: &[Build], plan: &Plan, m: &Measured) -> Result<()> {
    let x = plan.callers;
    let bare_name = format!("bare posix_spawn x{x}");
    let bare = median_rate(&m.bare)?;
    println!(
        "{:<34} {bare:>10.1} calls/s",
        format!("{bare_name} {PROGRAM}")
    );
    let mut rates = Vec::with_capacity(builds.len());
    for (b, t) in builds.iter().zip(&m.servers) {
        let name = format!("call x{x} ({mode}, {})", b.label);
        let r = median_rate(t)?;
        println!("{}", rate_line(&name, r, &bare_name, bare, "calls/s", None));
        rates.push((name, r));
    }
    if let [(before_name, before), (after_name, after)] = &rates[..] {
        println!(
            "{}",
            rate_line(after_name, *after, before_name, *before, "calls/s", None)
        );
    }
    Ok(())
}

/// The median of a tally's block rates.
fn median_rate(t: &Tally) -> Result<f64> {
    let rates: Vec<f64> = t.blocks.iter().map(|b| b.rate()).collect();
    Spread::of(&rates)
        .map(|s| s.median)
        .context("no blocks were measured")
}

/// Each build's server CPU per call (median of its blocks), the paired
/// ratio after/before, and the whole-run cross-check against utime + stime.
fn cpu(mode: &str, builds: &[Build], plan: &Plan, m: &Measured) -> Result<()> {
    let x = if plan.callers == 1 {
        String::new()
    } else {
        format!(" x{}", plan.callers)
    };
    let figs = builds
        .iter()
        .zip(&m.servers)
        .map(|(b, t)| {
            let per: Vec<_> = t.blocks.iter().filter_map(|b| b.cpu_per_call()).collect();
            figure(&format!("server CPU/call{x} ({mode}, {})", b.label), &per)
        })
        .collect::<Result<Vec<Figure>>>()?;
    match &figs[..] {
        [before, after] => {
            println!("{}", baseline_line(before));
            println!("{}", time_line(after, before, None));
            let ratios = paired_ratios(&m.servers[0], &m.servers[1]);
            let s = Spread::of(&ratios).context("no paired blocks")?;
            println!(
                "{:<34} median {:.3}x (p10 {:.3}x, p90 {:.3}x, n={} rounds)",
                format!("server CPU/call{x} after/before, paired blocks"),
                s.median,
                s.p10,
                s.p90,
                s.n
            );
        }
        _ => {
            for f in &figs {
                println!("{}", baseline_line(f));
            }
        }
    }
    let checks: Vec<String> = builds
        .iter()
        .zip(&m.servers)
        .filter_map(|(b, t)| {
            let span = t.span?;
            let calls = t.blocks.iter().map(|b| b.calls).sum::<usize>().max(1) as u32;
            Some(format!(
                "{} {} utime+stime (10 ms ticks) vs {} schedstat",
                b.label,
                human(span.stat / calls),
                human(span.schedstat / calls)
            ))
        })
        .collect();
    println!(
        "   cross-check, server CPU per measured call from the first block to the last (idle time between its blocks included): {}",
        checks.join("; ")
    );
    Ok(())
}

/// For each round, after's CPU per call over before's.
fn paired_ratios(before: &Tally, after: &Tally) -> Vec<f64> {
    before
        .blocks
        .iter()
        .zip(&after.blocks)
        .filter_map(|(b, a)| {
            let (b, a) = (b.cpu_per_call()?, a.cpu_per_call()?);
            (!b.is_zero()).then(|| a.as_secs_f64() / b.as_secs_f64())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::benches::call_cpu::blocks::Block;
    use std::time::Duration;

    fn tally(cpu_us: &[u64]) -> Tally {
        Tally {
            blocks: cpu_us
                .iter()
                .map(|&c| Block {
                    calls: 10,
                    wall: Duration::from_millis(5),
                    cpu: Some(Duration::from_micros(c * 10)),
                })
                .collect(),
            ..Tally::default()
        }
    }

    #[test]
    fn ratios_pair_blocks_of_the_same_round() {
        let r = paired_ratios(&tally(&[100, 200, 0]), &tally(&[90, 220, 50]));
        assert_eq!(r.len(), 2, "{r:?}");
        assert!(
            (r[0] - 0.9).abs() < 1e-9 && (r[1] - 1.1).abs() < 1e-9,
            "{r:?}"
        );
    }
}
