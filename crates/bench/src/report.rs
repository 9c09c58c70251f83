//! Printing figures: each beside its baseline from the same run, as a ratio.

use std::fmt::Write as _;
use std::time::Duration;

use crate::stats::Summary;

/// A measured figure: a name and the summary of its samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// What was measured, e.g. `9p-read-info`.
    pub name: String,
    /// Its samples, summarised.
    pub summary: Summary,
}

/// A goal for a figure: its median at most `max_ratio` times the baseline's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Goal {
    /// The largest acceptable ratio of medians.
    pub max_ratio: f64,
}

/// The ratio of `figure`'s median to `baseline`'s (infinite over a zero baseline).
pub fn ratio(figure: &Summary, baseline: &Summary) -> f64 {
    let b = baseline.median.as_secs_f64();
    if b == 0.0 {
        return f64::INFINITY;
    }
    figure.median.as_secs_f64() / b
}

/// One report line, e.g.
/// `9p-read-info  median 21.3 µs (p10 19.0 µs, p90 25.1 µs, n=10000) | baseline raw-echo median 9.1 µs | ratio 2.34x (goal < 4x: met)`.
pub fn line(figure: &Figure, baseline: &Figure, goal: Option<Goal>) -> String {
    let s = &figure.summary;
    let r = ratio(s, &baseline.summary);
    let mut out = format!(
        "{:<34} median {:>9} (p10 {}, p90 {}, n={}) | baseline {} median {} | ratio {:.2}x",
        figure.name,
        human(s.median),
        human(s.p10),
        human(s.p90),
        s.n,
        baseline.name,
        human(baseline.summary.median),
        r
    );
    if let Some(g) = goal {
        let verdict = if r < g.max_ratio { "met" } else { "MISSED" };
        let _ = write!(out, " (goal < {}x: {verdict})", g.max_ratio);
    }
    out
}

/// A baseline's own line (no ratio).
pub fn baseline_line(baseline: &Figure) -> String {
    let s = &baseline.summary;
    format!(
        "{:<34} median {:>9} (p10 {}, p90 {}, n={})",
        baseline.name,
        human(s.median),
        human(s.p10),
        human(s.p90),
        s.n
    )
}

/// A duration in the unit that suits it: ns, µs (one decimal), ms or s.
pub fn human(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", ns as f64 / 1e6)
    } else {
        format!("{:.2} s", ns as f64 / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(name: &str, median_ns: u64) -> Figure {
        let d = Duration::from_nanos(median_ns);
        Figure {
            name: name.into(),
            summary: Summary {
                n: 10,
                median: d,
                p10: d,
                p90: d,
            },
        }
    }

    #[test]
    fn human_picks_the_unit() {
        assert_eq!(human(Duration::from_nanos(999)), "999 ns");
        assert_eq!(human(Duration::from_nanos(21_340)), "21.3 µs");
        assert_eq!(human(Duration::from_micros(1_500)), "1.50 ms");
        assert_eq!(human(Duration::from_millis(2_500)), "2.50 s");
    }

    #[test]
    fn line_shows_ratio_and_goal_verdict() {
        let l = line(
            &fig("9p-read-info", 21_300),
            &fig("raw-echo", 9_100),
            Some(Goal { max_ratio: 4.0 }),
        );
        assert!(l.contains("median   21.3 µs"), "{l}");
        assert!(l.contains("baseline raw-echo median 9.1 µs"), "{l}");
        assert!(l.contains("ratio 2.34x (goal < 4x: met)"), "{l}");
        let missed = line(
            &fig("slow", 50_000),
            &fig("raw-echo", 10_000),
            Some(Goal { max_ratio: 4.0 }),
        );
        assert!(
            missed.contains("ratio 5.00x (goal < 4x: MISSED)"),
            "{missed}"
        );
    }

    #[test]
    fn zero_baseline_gives_infinite_ratio() {
        let z = fig("zero", 0);
        assert!(ratio(&fig("x", 5).summary, &z.summary).is_infinite());
    }
}
