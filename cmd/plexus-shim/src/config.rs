//! The two keys of a plexus config the shim needs, daemonSocket and
//! daemonWait, read and checked as plexus's Go config parser reads and
//! checks them (core/config/daemonconf). plexusd parses and checks the
//! whole config when it serves the call; a Go test runs this binary
//! against that parser on generated configs.

use crate::duration;
use crate::quote::go_quote;

/// How long an ADD waits for plexusd when daemonWait is not set.
pub const DEFAULT_WAIT: &str = "10s";

/// Nesting bound, as Go's encoding/json has.
const MAX_DEPTH: usize = 10000;

/// Where plexusd listens and how long an ADD waits for it.
#[derive(Debug, PartialEq)]
pub struct Daemon {
    pub socket: String,
    /// daemonWait as written (for messages), or the default.
    pub wait_text: String,
    pub wait_nanos: u64,
}

/// Reads daemonSocket and daemonWait from a plexus config (a JSON object;
/// other keys are skipped and checked only for JSON syntax) and checks
/// them.
pub fn parse(config: &[u8]) -> Result<Daemon, String> {
    let (socket, wait) = read_keys(config).map_err(|e| format!("plexus config is not a JSON object: {e}"))?;
    if !socket.is_empty() && !socket.starts_with('/') {
        return Err(format!(
            "\"daemonSocket\" {} must be an absolute path",
            go_quote(&socket)
        ));
    }
    // Unset is the default, parsed like any other value.
    let wait = if wait.is_empty() {
        DEFAULT_WAIT.to_string()
    } else {
        wait
    };
    match duration::parse(&wait) {
        Err(_) => Err(format!(
            "\"daemonWait\": {} is not a duration such as \"10s\" or \"1m30s\"",
            go_quote(&wait)
        )),
        Ok(d) if d <= 0 => Err(format!("\"daemonWait\": {} must be positive", go_quote(&wait))),
        Ok(d) => Ok(Daemon {
            socket,
            wait_text: wait,
            wait_nanos: d as u64,
        }),
    }
}

/// The string values of the top-level keys daemonSocket and daemonWait,
/// decoded as encoding/json decodes them into string fields of those exact
/// names: the last occurrence wins, null leaves the value as it was, any
/// other type is an error. The whole document must be valid JSON.
fn read_keys(b: &[u8]) -> Result<(String, String), String> {
    let mut s = Scanner { b, i: 0 };
    let (mut socket, mut wait) = (String::new(), String::new());
    s.space();
    if !s.take(b'{') {
        return Err(s.fail("want an object"));
    }
    s.space();
    if s.take(b'}') {
        return s.end().map(|_| (socket, wait));
    }
    loop {
        s.space();
        let key = s.string()?;
        s.space();
        if !s.take(b':') {
            return Err(s.fail("want ':' after object key"));
        }
        s.space();
        match key.as_str() {
            "daemonSocket" => s.string_or_null(&key, &mut socket)?,
            "daemonWait" => s.string_or_null(&key, &mut wait)?,
            _ => s.value(1)?,
        }
        s.space();
        if s.take(b'}') {
            return s.end().map(|_| (socket, wait));
        }
        if !s.take(b',') {
            return Err(s.fail("want ',' or '}' in object"));
        }
    }
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl Scanner<'_> {
    fn fail(&self, what: &str) -> String {
        match self.b.get(self.i) {
            None => "unexpected end of JSON input".into(),
            Some(&c) => format!("invalid character {:?} at offset {}: {what}", c as char, self.i),
        }
    }

    fn end(&mut self) -> Result<(), String> {
        self.space();
        if self.i < self.b.len() {
            return Err(self.fail("data after the top-level value"));
        }
        Ok(())
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn take(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            return true;
        }
        false
    }

    fn string_or_null(&mut self, key: &str, dst: &mut String) -> Result<(), String> {
        match self.peek() {
            Some(b'n') => self.literal(b"null"),
            Some(b'"') => {
                *dst = self.string()?;
                Ok(())
            }
            _ => {
                self.value(1)?;
                Err(format!("{} must be a string", go_quote(key)))
            }
        }
    }

    /// Skips one value of any kind, checking it.
    fn value(&mut self, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err("exceeded max depth".into());
        }
        match self.peek() {
            Some(b'{') => self.container(depth, b'}', true),
            Some(b'[') => self.container(depth, b']', false),
            Some(b'"') => self.string().map(|_| ()),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.fail("want a value")),
        }
    }

    /// Skips an object (keyed) or an array. Recursion is bounded by
    /// MAX_DEPTH, well inside the main thread's stack.
    fn container(&mut self, depth: usize, closing: u8, keyed: bool) -> Result<(), String> {
        self.i += 1;
        self.space();
        if self.take(closing) {
            return Ok(());
        }
        loop {
            self.space();
            if keyed {
                self.string()?;
                self.space();
                if !self.take(b':') {
                    return Err(self.fail("want ':' after object key"));
                }
                self.space();
            }
            self.value(depth + 1)?;
            self.space();
            if self.take(closing) {
                return Ok(());
            }
            if !self.take(b',') {
                return Err(self.fail(&format!("want ',' or '{}'", closing as char)));
            }
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), String> {
        if !self.b[self.i..].starts_with(word) {
            let w = String::from_utf8_lossy(word);
            return Err(self.fail(&format!("want {w}")));
        }
        self.i += word.len();
        Ok(())
    }

    /// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
    fn number(&mut self) -> Result<(), String> {
        self.take(b'-');
        if !self.take(b'0') && !self.digits() {
            return Err(self.fail("want a digit"));
        }
        if self.take(b'.') && !self.digits() {
            return Err(self.fail("want a digit after '.'"));
        }
        if self.take(b'e') || self.take(b'E') {
            if !self.take(b'+') {
                self.take(b'-');
            }
            if !self.take(b'0') && !self.digits() {
                return Err(self.fail("want a digit in the exponent"));
            }
        }
        Ok(())
    }

    fn digits(&mut self) -> bool {
        let start = self.i;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        self.i > start
    }

    /// Decodes a string as encoding/json does: escapes resolved, a lone
    /// surrogate and every byte of invalid UTF-8 replaced by U+FFFD.
    fn string(&mut self) -> Result<String, String> {
        if !self.take(b'"') {
            return Err(self.fail("want a string"));
        }
        let mut out = String::new();
        loop {
            match self.peek() {
                None => return Err(self.fail("unterminated string")),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(c) if c < 0x20 => return Err(self.fail("control character in string")),
                Some(b'\\') => self.escape(&mut out)?,
                Some(c) if c < 0x80 => {
                    out.push(c as char);
                    self.i += 1;
                }
                Some(_) => {
                    let (ch, size) = decode_utf8(&self.b[self.i..]);
                    out.push(ch);
                    self.i += size;
                }
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<(), String> {
        if self.i + 1 >= self.b.len() {
            return Err(self.fail("unterminated escape"));
        }
        self.i += 1;
        if let Some(c) = unescape(self.b[self.i]) {
            self.i += 1;
            out.push(c);
            return Ok(());
        }
        if self.b[self.i] != b'u' {
            return Err(self.fail("invalid escape"));
        }
        let Some(r) = hex4(&self.b[self.i + 1..]) else {
            return Err(self.fail("invalid \\u escape"));
        };
        self.i += 5;
        if (0xd800..0xdc00).contains(&r) {
            // A high surrogate: a pair, or U+FFFD.
            if self.b[self.i..].starts_with(b"\\u") {
                if let Some(lo) = hex4(&self.b[self.i + 2..]).filter(|lo| (0xdc00..0xe000).contains(lo)) {
                    self.i += 6;
                    let c = ((r - 0xd800) << 10 | (lo - 0xdc00)) + 0x10000;
                    out.push(char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER));
                    return Ok(());
                }
            }
            out.push(char::REPLACEMENT_CHARACTER);
            return Ok(());
        }
        out.push(char::from_u32(r).unwrap_or(char::REPLACEMENT_CHARACTER));
        Ok(())
    }
}

/// The first character of b and its length in bytes; an invalid sequence
/// is U+FFFD of length 1, as Go's utf8.DecodeRune has it.
fn decode_utf8(b: &[u8]) -> (char, usize) {
    let end = b.len().min(4);
    match std::str::from_utf8(&b[..end]) {
        Ok(s) => first_char(s),
        Err(e) if e.valid_up_to() > 0 => first_char(std::str::from_utf8(&b[..e.valid_up_to()]).unwrap_or("\u{fffd}")),
        Err(_) => (char::REPLACEMENT_CHARACTER, 1),
    }
}

fn first_char(s: &str) -> (char, usize) {
    s.chars()
        .next()
        .map_or((char::REPLACEMENT_CHARACTER, 1), |c| (c, c.len_utf8()))
}

/// Resolves the one-letter escapes.
fn unescape(c: u8) -> Option<char> {
    Some(match c {
        b'"' | b'\\' | b'/' => c as char,
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        _ => return None,
    })
}

fn hex4(b: &[u8]) -> Option<u32> {
    let digits = b.get(..4)?;
    digits
        .iter()
        .try_fold(0u32, |r, &c| Some(r << 4 | (c as char).to_digit(16)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_daemon_keys() {
        let cases: &[(&str, &[u8], &str, &str)] = &[
            (
                "both keys",
                br#"{"cniVersion":"1.0.0","daemonSocket":"/run/p.sock","daemonWait":"3s"}"#,
                "/run/p.sock",
                "3s",
            ),
            ("neither key: default wait", br#"{"type":"plexus-shim"}"#, "", "10s"),
            (
                "keys after nested values",
                br#"{"ipam":{"a":[1,-2.5e3,{"daemonSocket":"/no"}],"b":true,"c":null},"daemonSocket":"/yes"}"#,
                "/yes",
                "10s",
            ),
            (
                "last occurrence wins",
                br#"{"daemonSocket":"/a","daemonSocket":"/b"}"#,
                "/b",
                "10s",
            ),
            (
                "null keeps the earlier value",
                br#"{"daemonSocket":"/a","daemonSocket":null}"#,
                "/a",
                "10s",
            ),
            (
                "escapes",
                br#"{"daemonSocket":"\/run\/p\u00e9\ud83d\ude00.sock"}"#,
                "/run/p\u{e9}\u{1f600}.sock",
                "10s",
            ),
            (
                "lone surrogates",
                br#"{"daemonSocket":"/\ud800x\udc00"}"#,
                "/\u{fffd}x\u{fffd}",
                "10s",
            ),
            (
                "invalid UTF-8",
                b"{\"daemonSocket\":\"/\xff\xe2\x82\"}",
                "/\u{fffd}\u{fffd}\u{fffd}",
                "10s",
            ),
        ];
        for (name, config, socket, wait) in cases {
            let d = parse(config).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!((d.socket.as_str(), d.wait_text.as_str()), (*socket, *wait), "{name}");
        }
    }

    #[test]
    fn names_what_is_wrong() {
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        let cases: &[(&str, &[u8], &str)] = &[
            ("not an object", br#"["daemonSocket"]"#, "not a JSON object"),
            ("truncated", br#"{"daemonSocket":"/a""#, "unexpected end of JSON input"),
            ("trailing data", b"{} x", "data after the top-level value"),
            (
                "socket not a string",
                br#"{"daemonSocket":5}"#,
                r#""daemonSocket" must be a string"#,
            ),
            (
                "relative socket",
                br#"{"daemonSocket":"run/p.sock"}"#,
                r#""daemonSocket" "run/p.sock" must be an absolute path"#,
            ),
            (
                "bad wait",
                br#"{"daemonSocket":"/p","daemonWait":"soon"}"#,
                r#""daemonWait": "soon" is not a duration"#,
            ),
            (
                "negative wait",
                br#"{"daemonWait":"-1s"}"#,
                r#""daemonWait": "-1s" must be positive"#,
            ),
            ("bad escape", br#"{"a":"\x"}"#, "invalid escape"),
            ("control character", b"{\"a\":\"\x01\"}", "control character"),
            ("bad number", br#"{"a":01}"#, "want ',' or '}'"),
            ("too deep", deep.as_bytes(), "exceeded max depth"),
        ];
        for (name, config, want) in cases {
            match parse(config) {
                Err(e) => assert!(e.contains(want), "{name}: {e:?} lacks {want:?}"),
                Ok(d) => panic!("{name}: accepted as {d:?}"),
            }
        }
    }

    #[test]
    fn wait_is_parsed_as_go_parses_durations() {
        let d = parse(br#"{"daemonWait":"1m30.5s"}"#).unwrap();
        assert_eq!(d.wait_nanos, 90_500_000_000);
    }
}
