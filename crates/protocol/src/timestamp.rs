//! RFC 3339 UTC timestamps with millisecond precision (`2026-11-30T10:00:00.123Z`).

use std::time::{SystemTime, UNIX_EPOCH};

const MILLIS_PER_DAY: i128 = 86_400_000;

/// Formats `t` as RFC 3339 in UTC with exactly three fraction digits, e.g.
/// `2026-11-30T10:00:00.123Z`. Sub-millisecond precision is truncated towards the past; times
/// before 1970 are supported.
pub fn format_rfc3339_millis(t: SystemTime) -> String {
    let millis: i128 = match t.duration_since(UNIX_EPOCH) {
        Ok(after) => i128::try_from(after.as_millis()).unwrap_or(i128::MAX / 2),
        Err(before) => {
            // Truncate towards the past: -0.5 ms is the millisecond starting at -1 ms.
            let d = before.duration();
            let whole = i128::try_from(d.as_millis()).unwrap_or(i128::MAX / 2);
            let partial = i128::from(d.as_nanos() % 1_000_000 != 0);
            -(whole + partial)
        }
    };
    let days = millis.div_euclid(MILLIS_PER_DAY);
    let ms_of_day = millis.rem_euclid(MILLIS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    let (hour, minute) = (ms_of_day / 3_600_000, ms_of_day / 60_000 % 60);
    let (second, milli) = (ms_of_day / 1000 % 60, ms_of_day % 1000);
    format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z")
}

/// Howard Hinnant's `civil_from_days`: the proleptic Gregorian (year, month, day) of the day
/// `days` after 1970-01-01.
fn civil_from_days(days: i128) -> (i128, i128, i128) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let d = doy - (153 * mp + 2) / 5 + 1; // [1, 31]
    let m = if mp < 10 { mp + 3 } else { mp - 9 }; // [1, 12]
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(millis: i64) -> SystemTime {
        let d = Duration::from_millis(millis.unsigned_abs());
        if millis >= 0 {
            UNIX_EPOCH + d
        } else {
            UNIX_EPOCH - d
        }
    }

    #[test]
    fn known_values() {
        let cases = [
            (0, "1970-01-01T00:00:00.000Z"),
            (1, "1970-01-01T00:00:00.001Z"),
            (86_399_999, "1970-01-01T23:59:59.999Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (951_868_800_000, "2000-03-01T00:00:00.000Z"),
            (1_234_567_890_123, "2009-02-13T23:31:30.123Z"),
            (1_709_164_800_000, "2024-02-29T00:00:00.000Z"),
            (1_796_032_800_123, "2026-11-30T10:00:00.123Z"),
            (4_102_444_800_000, "2100-01-01T00:00:00.000Z"),
            (253_402_300_799_999, "9999-12-31T23:59:59.999Z"),
            (-1, "1969-12-31T23:59:59.999Z"),
            (-86_400_000, "1969-12-31T00:00:00.000Z"),
            (-2_208_988_800_000, "1900-01-01T00:00:00.000Z"),
        ];
        for (millis, text) in cases {
            assert_eq!(format_rfc3339_millis(at(millis)), text, "{millis}");
        }
    }

    #[test]
    fn truncates_sub_millisecond() {
        let t = UNIX_EPOCH + Duration::from_nanos(1_999_999);
        assert_eq!(format_rfc3339_millis(t), "1970-01-01T00:00:00.001Z");
        let t = UNIX_EPOCH - Duration::from_nanos(500_000);
        assert_eq!(format_rfc3339_millis(t), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn every_day_of_four_centuries_is_consecutive() {
        // Walk day by day across 1900..2300 and check the calendar never skips or repeats.
        let mut prev = civil_from_days(-25_567); // 1900-01-01
        assert_eq!(prev, (1900, 1, 1));
        for days in -25_566..120_000 {
            let cur = civil_from_days(days);
            let leap = |y: i128| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
            let month_len = match prev.1 {
                2 if leap(prev.0) => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            let expected = if prev.2 < month_len {
                (prev.0, prev.1, prev.2 + 1)
            } else if prev.1 < 12 {
                (prev.0, prev.1 + 1, 1)
            } else {
                (prev.0 + 1, 1, 1)
            };
            assert_eq!(cur, expected, "day {days}");
            prev = cur;
        }
    }
}
