//! Durations in the syntax of Go's time.ParseDuration, which plexusd uses
//! for the same keys: [-+]?([0-9]*(\.[0-9]*)?[a-z]+)+, "0" alone without
//! a unit, in nanoseconds that fit an int64.

const LIMIT: u64 = 1 << 63;

/// Nanoseconds, or why s is not a duration.
pub fn parse(s: &str) -> Result<i64, &'static str> {
    let mut s = s.as_bytes();
    let mut neg = false;
    if let Some(&c @ (b'-' | b'+')) = s.first() {
        neg = c == b'-';
        s = &s[1..];
    }
    if s == b"0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err("invalid duration");
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return Err("invalid duration");
        }
        let before = s.len();
        let (mut v, rest) = leading_int(s)?;
        s = rest;
        let pre = before != s.len();
        let (mut frac, mut scale, mut post) = (0u64, 1f64, false);
        if s.first() == Some(&b'.') {
            s = &s[1..];
            let before = s.len();
            let (f, sc, rest) = leading_fraction(s);
            (frac, scale, s) = (f, sc, rest);
            post = before != s.len();
        }
        if !pre && !post {
            return Err("invalid duration");
        }
        let n = s
            .iter()
            .position(|&c| c == b'.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        if n == 0 {
            return Err("missing unit in duration");
        }
        let unit = unit(&s[..n]).ok_or("unknown unit in duration")?;
        s = &s[n..];
        if v > LIMIT / unit {
            return Err("invalid duration");
        }
        v *= unit;
        if frac > 0 {
            // As Go computes it: in float64, truncated.
            v += (frac as f64 * (unit as f64 / scale)) as u64;
            if v > LIMIT {
                return Err("invalid duration");
            }
        }
        total += v;
        if total > LIMIT {
            return Err("invalid duration");
        }
    }
    if neg {
        return Ok((total as i64).wrapping_neg());
    }
    if total > LIMIT - 1 {
        return Err("invalid duration");
    }
    Ok(total as i64)
}

fn unit(u: &[u8]) -> Option<u64> {
    Some(match u {
        b"ns" => 1,
        b"us" => 1_000,
        b"\xc2\xb5s" | b"\xce\xbcs" => 1_000, // U+00B5 and U+03BC, "µs"
        b"ms" => 1_000_000,
        b"s" => 1_000_000_000,
        b"m" => 60_000_000_000,
        b"h" => 3_600_000_000_000,
        _ => return None,
    })
}

fn leading_int(s: &[u8]) -> Result<(u64, &[u8]), &'static str> {
    let mut x: u64 = 0;
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        if x > LIMIT / 10 {
            return Err("invalid duration");
        }
        x = x * 10 + u64::from(s[i] - b'0');
        if x > LIMIT {
            return Err("invalid duration");
        }
        i += 1;
    }
    Ok((x, &s[i..]))
}

/// The digits after a '.', as a number and its scale; digits past what
/// fits are consumed and ignored.
fn leading_fraction(s: &[u8]) -> (u64, f64, &[u8]) {
    let (mut x, mut scale, mut overflow) = (0u64, 1f64, false);
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        let c = u64::from(s[i] - b'0');
        i += 1;
        if overflow {
            continue;
        }
        if x > (LIMIT - 1) / 10 {
            overflow = true;
            continue;
        }
        let y = x * 10 + c;
        if y > LIMIT {
            overflow = true;
            continue;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale, &s[i..])
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn accepts_what_go_accepts() {
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("-0", 0),
            ("10s", 10_000_000_000),
            ("1m30s", 90_000_000_000),
            ("1.5h", 5_400_000_000_000),
            (".5s", 500_000_000),
            ("5.s", 5_000_000_000),
            ("1\u{b5}s", 1_000),
            ("1\u{3bc}s", 1_000),
            ("-2ms", -2_000_000),
            ("+3ns", 3),
            ("9223372036854775807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("0.000000001s", 1),
            ("1.00000000000000000000001s", 1_000_000_000),
        ];
        for (s, want) in cases {
            assert_eq!(parse(s), Ok(*want), "{s}");
        }
    }

    #[test]
    fn refuses_what_go_refuses() {
        for s in [
            "",
            "-",
            "s",
            "10",
            "1x",
            ".s",
            "1.2.3s",
            "9223372036854775808ns",
            "3000000h",
            "1e3s",
            " 1s",
            "1s ",
        ] {
            assert!(parse(s).is_err(), "{s:?} accepted");
        }
    }
}
