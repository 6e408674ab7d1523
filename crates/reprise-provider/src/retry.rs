//! When to try again: exponential backoff with full jitter, and `Retry-After`.

use std::time::Duration;

use rand::Rng;
use reqwest::header::HeaderMap;

/// The wait before attempt `failed + 1`: uniform in `0..=min(max, base·2^(failed-1))`
/// ("full jitter", so many clients hit by one outage do not retry in step).
pub fn backoff_delay(failed: u32, base: Duration, max: Duration) -> Duration {
    let exponent = failed.saturating_sub(1).min(30);
    let ceiling = base.saturating_mul(1u32 << exponent).min(max);
    let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
    if nanos == 0 {
        return Duration::ZERO;
    }
    Duration::from_nanos(rand::rng().random_range(0..=nanos))
}

/// The server's requested wait: `retry-after-ms` (OpenAI) or `Retry-After` in
/// seconds (integer or decimal). An HTTP-date or a garbled value is ignored, so the
/// normal backoff applies.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let read = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .and_then(|text| text.trim().parse::<f64>().ok())
            .filter(|number| number.is_finite() && *number >= 0.0)
    };
    if let Some(millis) = read("retry-after-ms") {
        return Some(Duration::from_secs_f64(millis / 1000.0));
    }
    read("retry-after").map(Duration::from_secs_f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn backoff_stays_under_the_doubling_ceiling_and_the_cap() {
        let base = Duration::from_millis(100);
        let max = Duration::from_millis(350);
        for _ in 0..200 {
            assert!(backoff_delay(1, base, max) <= Duration::from_millis(100));
            assert!(backoff_delay(2, base, max) <= Duration::from_millis(200));
            assert!(backoff_delay(3, base, max) <= max);
            assert!(backoff_delay(40, base, max) <= max);
        }
        assert_eq!(backoff_delay(1, Duration::ZERO, max), Duration::ZERO);
    }

    #[test]
    fn backoff_is_jittered() {
        let base = Duration::from_secs(1);
        let samples: std::collections::HashSet<_> = (0..20)
            .map(|_| backoff_delay(3, base, Duration::from_secs(10)))
            .collect();
        assert!(samples.len() > 1);
    }

    #[test]
    fn retry_after_reads_seconds_and_millis_and_ignores_dates() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after", HeaderValue::from_static("0.5"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(500)));
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(250)));
        let mut dated = HeaderMap::new();
        dated.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&dated), None);
    }
}
