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

/// A goal on a ratio, inclusive: the figure meets it when its ratio to the
/// baseline is at most (or at least) the bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// The ratio must be `<=` this (for times: smaller is better).
    AtMost(f64),
    /// The ratio must be `>=` this (for rates: larger is better).
    AtLeast(f64),
}

impl Target {
    /// `met` or `MISSED` for `ratio`.
    pub fn verdict(self, ratio: f64) -> &'static str {
        let ok = match self {
            Target::AtMost(b) => ratio <= b,
            Target::AtLeast(b) => ratio >= b,
        };
        if ok {
            "met"
        } else {
            "MISSED"
        }
    }

    /// The goal as text, e.g. `<= 1.3x`.
    pub fn text(self) -> String {
        match self {
            Target::AtMost(b) => format!("<= {b}x"),
            Target::AtLeast(b) => format!(">= {b}x"),
        }
    }
}

/// A time figure beside its baseline with an inclusive [`Target`] on the ratio
/// of medians: `name  median … | baseline B median … | ratio R (goal <= G: met)`.
pub fn time_line(figure: &Figure, baseline: &Figure, target: Option<Target>) -> String {
    let mut out = line(figure, baseline, None);
    if let Some(t) = target {
        let r = ratio(&figure.summary, &baseline.summary);
        let _ = write!(out, " (goal {}: {})", t.text(), t.verdict(r));
    }
    out
}

/// A rate figure (larger is better) beside its baseline's rate: the ratio is
/// `rate / baseline_rate`, e.g.
/// `call x8 (yolo)  1520 calls/s | baseline bare x8 1700 calls/s | ratio 0.89x (goal >= 0.8x: met)`.
pub fn rate_line(
    name: &str,
    rate: f64,
    baseline_name: &str,
    baseline_rate: f64,
    unit: &str,
    target: Option<Target>,
) -> String {
    let r = if baseline_rate > 0.0 {
        rate / baseline_rate
    } else {
        f64::INFINITY
    };
    let mut out = format!(
        "{name:<34} {rate:>10.1} {unit} | baseline {baseline_name} {baseline_rate:.1} {unit} | ratio {r:.2}x"
    );
    if let Some(t) = target {
        let _ = write!(out, " (goal {}: {})", t.text(), t.verdict(r));
    }
    out
}

/// The median of `values` (the upper middle for an even count); `None` when empty.
pub fn median_f64(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
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
    fn targets_are_inclusive_and_directed() {
        assert_eq!(Target::AtMost(1.3).verdict(1.3), "met");
        assert_eq!(Target::AtMost(1.3).verdict(1.31), "MISSED");
        assert_eq!(Target::AtLeast(0.8).verdict(0.8), "met");
        assert_eq!(Target::AtLeast(0.8).verdict(0.79), "MISSED");
        let l = time_line(
            &fig("call", 1_300),
            &fig("bare", 1_000),
            Some(Target::AtMost(1.3)),
        );
        assert!(l.ends_with("ratio 1.30x (goal <= 1.3x: met)"), "{l}");
    }

    #[test]
    fn rate_line_divides_rate_by_baseline() {
        let l = rate_line(
            "call x8",
            800.0,
            "bare x8",
            1000.0,
            "calls/s",
            Some(Target::AtLeast(0.8)),
        );
        assert!(
            l.contains("800.0 calls/s | baseline bare x8 1000.0 calls/s"),
            "{l}"
        );
        assert!(l.ends_with("ratio 0.80x (goal >= 0.8x: met)"), "{l}");
        let z = rate_line("x", 5.0, "zero", 0.0, "MB/s", None);
        assert!(z.contains("ratio infx"), "{z}");
    }

    #[test]
    fn median_of_floats() {
        assert_eq!(median_f64(&[]), None);
        assert_eq!(median_f64(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median_f64(&[4.0, 1.0, 3.0, 2.0]), Some(3.0));
    }

    #[test]
    fn zero_baseline_gives_infinite_ratio() {
        let z = fig("zero", 0);
        assert!(ratio(&fig("x", 5).summary, &z.summary).is_infinite());
    }
}
