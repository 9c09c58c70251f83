//! The per-agent rate limiter, with synthetic instants (no sleeping).

use std::time::{Duration, Instant};
use toolsrv_validate::RateLimiter;

const S: fn(u64) -> Duration = Duration::from_secs;

#[test]
fn four_refusals_are_fine_the_fifth_starts_a_cooldown() {
    let rl = RateLimiter::new();
    let t0 = Instant::now();
    for i in 0..4 {
        rl.record_refusal("a", t0 + S(i));
        assert_eq!(rl.check("a", t0 + S(i)), Ok(()), "after refusal {}", i + 1);
    }
    rl.record_refusal("a", t0 + S(10));
    let err = rl.check("a", t0 + S(10)).expect_err("cooldown");
    assert_eq!(err.retry_in_secs, 60);
    assert_eq!(
        err.to_string(),
        "rate limited: too many rejected commands, retry in 60s"
    );
    // Rounded up, at least 1.
    let err = rl
        .check("a", t0 + S(10) + Duration::from_millis(30_500))
        .expect_err("cooldown");
    assert_eq!(
        err.to_string(),
        "rate limited: too many rejected commands, retry in 30s"
    );
    let err = rl
        .check("a", t0 + S(69) + Duration::from_millis(999))
        .expect_err("cooldown");
    assert_eq!(err.retry_in_secs, 1);
    // Other agents are not affected.
    assert_eq!(rl.check("b", t0 + S(11)), Ok(()));
    // The cooldown ends.
    assert_eq!(rl.check("a", t0 + S(70)), Ok(()));
    // And the count starts afresh.
    rl.record_refusal("a", t0 + S(71));
    assert_eq!(rl.check("a", t0 + S(71)), Ok(()));
}

#[test]
fn refusals_older_than_a_minute_do_not_count() {
    let rl = RateLimiter::new();
    let t0 = Instant::now();
    for i in 0..4 {
        rl.record_refusal("a", t0 + S(i));
    }
    // 60 s after the first: only three remain in the window, plus this one.
    rl.record_refusal("a", t0 + S(60));
    assert_eq!(rl.check("a", t0 + S(60)), Ok(()));
    rl.record_refusal("a", t0 + S(61));
    assert_eq!(rl.check("a", t0 + S(61)), Ok(()));
    rl.record_refusal("a", t0 + S(62));
    assert_eq!(
        rl.check("a", t0 + S(62)),
        Ok(()),
        "the refusals at 0 s, 1 s and 2 s expired"
    );
    let t = t0 + S(62) + Duration::from_millis(500);
    rl.record_refusal("a", t);
    assert!(rl.check("a", t).is_err(), "five within the last minute");
}

#[test]
fn memory_is_bounded_to_recent_agents() {
    let rl = RateLimiter::new();
    let t0 = Instant::now();
    for i in 0..100 {
        rl.record_refusal(&format!("agent{i}"), t0);
    }
    assert_eq!(rl.tracked_agents(), 100);
    rl.record_refusal("late", t0 + S(61));
    assert_eq!(rl.tracked_agents(), 1);
}
