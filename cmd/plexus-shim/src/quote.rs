//! Quoting for the shim's messages and for the JSON it prints.

use std::fmt::Write;

/// s as a JSON string, as plexus's Go encoder quotes it (core/jsonstr):
/// no HTML escaping, control characters as \u00XX.
pub fn json(s: &str) -> String {
    quote(s, |c| (c as u32) < 0x20)
}

/// s quoted for a message, as Go's strconv.Quote shows the values the Go
/// side names in the same messages (printable characters as they are).
pub fn go_quote(s: &str) -> String {
    quote(s, char::is_control)
}

/// s in double quotes, with the escapes JSON and Go share, and \uXXXX for
/// the other characters hex picks.
fn quote(s: &str, hex: impl Fn(char) -> bool) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if hex(c) => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn json_escapes_what_json_requires() {
        assert_eq!(super::json("a\"b\\c\n\u{1}\u{e9}<"), "\"a\\\"b\\\\c\\n\\u0001\u{e9}<\"");
    }

    #[test]
    fn go_quote_shows_control_characters() {
        assert_eq!(super::go_quote("run/\u{7f}x"), "\"run/\\u007fx\"");
    }
}
