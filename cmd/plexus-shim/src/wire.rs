//! The shim's side of plexusd's socket, in the byte format defined by the
//! Go package core/daemon/wire (which documents it): one request and one
//! answer per connection, counts and lengths 4-byte big-endian.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::thread::sleep;
use std::time::{Duration, Instant};

/// Bounds one request or reply, as plexusd bounds them.
pub const MAX_CALL_BYTES: usize = 4 << 20;

const REQUEST_MAGIC: &[u8] = b"plexus-call/1\n";
const REPLY_MAGIC: &[u8] = b"plexus-reply/1\n";

/// One readiness question may take this long, so a hung plexusd cannot
/// hold a waiting ADD past its deadline.
const READY_TIMEOUT: Duration = Duration::from_secs(1);

/// One CNI invocation as the runtime made it: the CNI_* variables and the
/// config from stdin.
pub struct Call {
    pub env: Vec<(Vec<u8>, Vec<u8>)>,
    pub stdin: Vec<u8>,
}

/// What plexusd answered.
#[derive(Debug, PartialEq)]
pub enum Answer {
    /// The plugin's output; failed means it is a CNI error document.
    Reply {
        stdout: Vec<u8>,
        failed: bool,
    },
    Ready(bool),
    /// Why the request itself was not served.
    Refused(String),
}

/// Why an exchange failed. Unreachable means plexusd did not get the
/// request; once it has a call, a lost answer is Failed, since the call may
/// have run.
#[derive(Debug)]
pub enum Error {
    Unreachable(String),
    Failed(String),
}

impl Error {
    pub fn message(&self) -> &str {
        match self {
            Error::Unreachable(m) | Error::Failed(m) => m,
        }
    }
}

pub fn encode_call(c: &Call) -> Vec<u8> {
    let n = REQUEST_MAGIC.len() + 9 + c.stdin.len() + c.env.iter().map(|(k, v)| 5 + k.len() + v.len()).sum::<usize>();
    let mut b = Vec::with_capacity(n);
    b.extend_from_slice(REQUEST_MAGIC);
    b.push(b'C');
    put_u32(&mut b, c.env.len());
    for (k, v) in &c.env {
        put_u32(&mut b, k.len() + 1 + v.len());
        b.extend_from_slice(k);
        b.push(b'=');
        b.extend_from_slice(v);
    }
    put_u32(&mut b, c.stdin.len());
    b.extend_from_slice(&c.stdin);
    b
}

fn encode_ready_question() -> Vec<u8> {
    let mut b = REQUEST_MAGIC.to_vec();
    b.push(b'R');
    b
}

fn put_u32(b: &mut Vec<u8>, n: usize) {
    // Every length is bounded by MAX_CALL_BYTES before it gets here.
    b.extend_from_slice(&(n as u32).to_be_bytes());
}

pub fn decode_answer(b: &[u8]) -> Result<Answer, String> {
    let Some(rest) = b.strip_prefix(REPLY_MAGIC) else {
        let shown = String::from_utf8_lossy(&b[..b.len().min(64)]);
        return Err(format!(
            "not a plexusd reply (another plexus version on the socket?): {shown:?}"
        ));
    };
    let (&status, rest) = rest.split_first().ok_or("truncated")?;
    let len_bytes: [u8; 4] = rest.get(..4).and_then(|l| l.try_into().ok()).ok_or("truncated")?;
    let len = u32::from_be_bytes(len_bytes) as usize;
    let payload = rest[4..].get(..len).ok_or("truncated")?;
    if rest.len() > 4 + len {
        return Err(format!("{} bytes after the end", rest.len() - 4 - len));
    }
    Ok(match status {
        b'O' => Answer::Reply {
            stdout: payload.to_vec(),
            failed: false,
        },
        b'F' => Answer::Reply {
            stdout: payload.to_vec(),
            failed: true,
        },
        b'E' => Answer::Refused(String::from_utf8_lossy(payload).into_owned()),
        b'Y' => Answer::Ready(true),
        b'N' => Answer::Ready(false),
        s => return Err(format!("reply with unknown status {:?}", s as char)),
    })
}

pub struct Client<'a> {
    pub socket: &'a str,
}

impl Client<'_> {
    /// Sends one call; the answer is plexusd's reply (stdout, failed).
    pub fn call(&self, c: &Call) -> Result<(Vec<u8>, bool), Error> {
        match self.exchange(&encode_call(c), None)? {
            Answer::Reply { stdout, failed } => Ok((stdout, failed)),
            Answer::Refused(why) => Err(Error::Failed(format!(
                "plexusd at {} refused the call: {why}",
                self.socket
            ))),
            Answer::Ready(_) => Err(Error::Failed(format!(
                "plexusd at {} answered the call without a reply",
                self.socket
            ))),
        }
    }

    /// Asks once whether plexusd serves calls; not ready is unreachable.
    fn ready(&self) -> Result<(), Error> {
        match self.exchange(&encode_ready_question(), Some(READY_TIMEOUT))? {
            Answer::Ready(true) => Ok(()),
            _ => Err(Error::Unreachable(format!(
                "plexusd is unreachable at {}: not ready",
                self.socket
            ))),
        }
    }

    /// Asks until plexusd is ready or the deadline passes; the error is the
    /// last answer.
    pub fn wait_ready(&self, deadline: Instant) -> Result<(), Error> {
        let mut wait = Duration::from_millis(20);
        loop {
            let err = match self.ready() {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(err);
            }
            sleep(wait.min(left));
            wait = (wait * 2).min(Duration::from_millis(500));
        }
    }

    /// Sends one request and reads the answer; no timeout waits as long as
    /// the call takes (the runtime kills a shim that took too long).
    fn exchange(&self, req: &[u8], timeout: Option<Duration>) -> Result<Answer, Error> {
        let unreachable = |doing: &str, e: io::Error| {
            Error::Unreachable(format!("plexusd is unreachable at {}: {doing}: {e}", self.socket))
        };
        let mut conn = UnixStream::connect(self.socket).map_err(|e| unreachable("connecting", e))?;
        conn.set_read_timeout(timeout)
            .and_then(|_| conn.set_write_timeout(timeout))
            .map_err(|e| unreachable("connecting", e))?;
        // Rust programs start with SIGPIPE ignored: a plexusd gone
        // mid-write is an error here, not a signal.
        conn.write_all(req)
            .and_then(|_| conn.shutdown(Shutdown::Write))
            .map_err(|e| unreachable("sending the call", e))?;
        let failed = |e: String| Error::Failed(format!("reading plexusd's reply from {}: {e}", self.socket));
        let b = read_all(&mut conn, REPLY_MAGIC.len() + 5 + MAX_CALL_BYTES).map_err(&failed)?;
        decode_answer(&b).map_err(failed)
    }
}

/// Reads r to its end, failing past max bytes.
pub fn read_all(r: &mut impl Read, max: usize) -> Result<Vec<u8>, String> {
    let mut b = Vec::with_capacity(4096);
    match r.take(max as u64 + 1).read_to_end(&mut b) {
        Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
            Err("no reply in time".into())
        }
        Err(e) => Err(e.to_string()),
        Ok(_) if b.len() > max => Err(format!("over {max} bytes")),
        Ok(_) => Ok(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_encoded_as_plexusd_decodes_it() {
        let c = Call {
            env: vec![(b"CNI_COMMAND".to_vec(), b"ADD".to_vec())],
            stdin: b"{}".to_vec(),
        };
        let mut want = b"plexus-call/1\nC\0\0\0\x01\0\0\0\x0fCNI_COMMAND=ADD".to_vec();
        want.extend_from_slice(b"\0\0\0\x02{}");
        assert_eq!(encode_call(&c), want);
    }

    #[test]
    fn answers_are_decoded_and_checked() {
        let ok = b"plexus-reply/1\nO\0\0\0\x02{}";
        assert_eq!(
            decode_answer(ok),
            Ok(Answer::Reply {
                stdout: b"{}".to_vec(),
                failed: false
            })
        );
        assert_eq!(decode_answer(b"plexus-reply/1\nY\0\0\0\0"), Ok(Answer::Ready(true)));
        assert_eq!(
            decode_answer(b"plexus-reply/1\nE\0\0\0\x03old"),
            Ok(Answer::Refused("old".into()))
        );
        let bad: &[(&[u8], &str)] = &[
            (b"HTTP/1.1 400", "not a plexusd reply"),
            (b"plexus-reply/1\nO\0\0\0\x05{}", "truncated"),
            (b"plexus-reply/1\nO\0\0", "truncated"),
            (b"plexus-reply/1\nO\0\0\0\0xx", "2 bytes after the end"),
            (b"plexus-reply/1\nZ\0\0\0\0", "unknown status"),
        ];
        for (b, want) in bad {
            let e = decode_answer(b).unwrap_err();
            assert!(e.contains(want), "{e:?} lacks {want:?}");
        }
    }

    #[test]
    fn read_all_refuses_more_than_its_bound() {
        assert_eq!(read_all(&mut &b"12345"[..], 4), Err("over 4 bytes".to_string()));
        assert_eq!(read_all(&mut &b"1234"[..], 4), Ok(b"1234".to_vec()));
    }
}
