//! plexus-shim is the plugin binary of thick mode: it forwards every CNI
//! call to plexusd and relays the answer. The runtime starts it for every
//! call, so it does nothing else: plexusd checks the call as the CNI
//! library's skel would, and parses the whole config. While plexusd is
//! down, a DEL is handed to the full plexus plugin installed beside the
//! shim, which tears down from the attachment record.
//!
//! It behaves as the Go forwarder in cmd/internal/shim does (the full
//! plugin's path when its config names a socket); tests/thick runs both.
#![forbid(unsafe_code)]

mod config;
mod duration;
mod quote;
mod wire;

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// The CNI versions plexus supports, as the plexus plugin declares them.
const VERSIONS: &str = r#""0.3.0","0.3.1","0.4.0","1.0.0","1.1.0""#;

/// The full plugin's file name; it is installed beside the shim.
const FULL_PLUGIN: &str = "plexus";

/// CNI error codes the shim reports itself: 7 and 999 are the CNI spec's,
/// 115 is plexus's "plexusd unreachable".
const CODE_INVALID_CONFIG: u32 = 7;
const CODE_DAEMON_UNREACHABLE: u32 = 115;
const CODE_INTERNAL: u32 = 999;

/// A CNI error: what the runtime reads from a failing plugin.
struct CniError {
    code: u32,
    msg: String,
}

fn main() -> ExitCode {
    ExitCode::from(run())
}

/// Returns the exit status: 0 after printing a result, 1 after printing a
/// CNI error document.
fn run() -> u8 {
    let env = cni_env(std::env::vars_os());
    match lookup(&env, "CNI_COMMAND") {
        Some(b"VERSION") => {
            let doc = format!("{{\"cniVersion\":\"1.1.0\",\"supportedVersions\":[{VERSIONS}]}}\n");
            return write(&mut io::stdout(), doc.as_bytes(), 0);
        }
        None | Some(b"") => {
            // As skel does: tell a person what this is.
            let version = option_env!("PLEXUS_VERSION").unwrap_or("dev");
            let about = format!(
                "plexus-shim {version}: forwards CNI calls to plexusd\nCNI protocol versions supported: {VERSIONS}\n"
            );
            write(&mut io::stderr(), about.as_bytes(), 0);
            return 0;
        }
        Some(_) => {}
    }
    let stdin = match wire::read_all(&mut io::stdin().lock(), wire::MAX_CALL_BYTES) {
        Ok(b) => b,
        Err(e) => return fail(CODE_INVALID_CONFIG, format!("reading the config from stdin: {e}")),
    };
    let conf = match config::parse(&stdin) {
        Ok(c) => c,
        Err(e) => return fail(CODE_INVALID_CONFIG, e),
    };
    if conf.socket.is_empty() {
        return fail(
            CODE_INVALID_CONFIG,
            r#"plexus-shim needs "daemonSocket"; use the plexus plugin for thin mode"#.into(),
        );
    }
    match forward(&conf, &wire::Call { env, stdin }) {
        Err(e) => fail(e.code, e.msg),
        Ok(Outcome::Exited(status)) => status,
        Ok(Outcome::Reply(stdout, true)) if !stdout.starts_with(b"{") => fail(
            CODE_INTERNAL,
            format!(
                "plexusd returned an unreadable error: {}",
                String::from_utf8_lossy(&stdout)
            ),
        ),
        Ok(Outcome::Reply(stdout, failed)) => write(&mut io::stdout(), &stdout, u8::from(failed)),
    }
}

enum Outcome {
    /// plexusd's answer: what to print, and whether it is an error.
    Reply(Vec<u8>, bool),
    /// The full plugin ran the call and exited with this status.
    Exited(u8),
}

/// Sends the call to plexusd. When plexusd cannot be reached, an ADD waits
/// for it to become ready; a DEL runs the full plugin, which tears down
/// from the attachment record, so a dead daemon never leaks interfaces or
/// leases; any other command fails.
fn forward(conf: &config::Daemon, call: &wire::Call) -> Result<Outcome, CniError> {
    let client = wire::Client { socket: &conf.socket };
    let internal = |e: wire::Error| CniError {
        code: CODE_INTERNAL,
        msg: e.message().into(),
    };
    let unreachable = match client.call(call) {
        Ok((stdout, failed)) => return Ok(Outcome::Reply(stdout, failed)),
        Err(wire::Error::Unreachable(m)) => m,
        Err(e) => return Err(internal(e)),
    };
    match lookup(&call.env, "CNI_COMMAND") {
        Some(b"DEL") => full_plugin(&call.stdin).map(Outcome::Exited),
        Some(b"ADD") => {
            let deadline = Instant::now() + Duration::from_nanos(conf.wait_nanos);
            if let Err(e) = client.wait_ready(deadline) {
                let msg = format!("{}: {} (waited {})", pod_of(&call.env), e.message(), conf.wait_text);
                return Err(CniError {
                    code: CODE_DAEMON_UNREACHABLE,
                    msg,
                });
            }
            let (stdout, failed) = client.call(call).map_err(internal)?;
            Ok(Outcome::Reply(stdout, failed))
        }
        _ => Err(CniError {
            code: CODE_DAEMON_UNREACHABLE,
            msg: unreachable,
        }),
    }
}

/// Runs the full plexus plugin on this call, for a DEL while plexusd is
/// unreachable: same environment, the same config on its stdin, its output
/// and exit status the answer.
fn full_plugin(stdin: &[u8]) -> Result<u8, CniError> {
    let internal = |what: &str, e: io::Error| CniError {
        code: CODE_INTERNAL,
        msg: format!("{what}: {e}"),
    };
    let me = std::env::current_exe().map_err(|e| internal("finding the plexus plugin for a DEL without plexusd", e))?;
    let path = me.with_file_name(FULL_PLUGIN);
    let mut child = Command::new(&path)
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|e| internal(&format!("starting {} for a DEL without plexusd", path.display()), e))?;
    if let Some(mut w) = child.stdin.take() {
        // A plugin that exits without reading its config fails by its own
        // status, which is the answer.
        let _ = w.write_all(stdin);
    }
    let status = child
        .wait()
        .map_err(|e| internal(&format!("running {}", path.display()), e))?;
    Ok(status.code().map_or(1, |c| u8::try_from(c).unwrap_or(1)))
}

/// The CNI_* variables of an environment; a repeated one keeps its last
/// value, as plexusd's decoding of the call does.
fn cni_env(vars: impl Iterator<Item = (OsString, OsString)>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut env: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for (k, v) in vars {
        if k.len() <= 4 || !k.as_bytes().starts_with(b"CNI_") {
            continue;
        }
        let (k, v) = (k.into_vec(), v.into_vec());
        match env.iter_mut().find(|(seen, _)| *seen == k) {
            Some(kv) => kv.1 = v,
            None => env.push((k, v)),
        }
    }
    env
}

fn lookup<'a>(env: &'a [(Vec<u8>, Vec<u8>)], key: &str) -> Option<&'a [u8]> {
    env.iter().find(|(k, _)| k == key.as_bytes()).map(|(_, v)| v.as_slice())
}

/// Names the pod of a call for messages.
fn pod_of(env: &[(Vec<u8>, Vec<u8>)]) -> String {
    let (mut ns, mut name) = (&b""[..], &b""[..]);
    for kv in lookup(env, "CNI_ARGS").unwrap_or_default().split(|&c| c == b';') {
        let mut parts = kv.splitn(2, |&c| c == b'=');
        match (parts.next(), parts.next()) {
            (Some(b"K8S_POD_NAMESPACE"), Some(v)) => ns = v,
            (Some(b"K8S_POD_NAME"), Some(v)) => name = v,
            _ => {}
        }
    }
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    if name.is_empty() {
        return format!("container {}", text(lookup(env, "CNI_CONTAINERID").unwrap_or_default()));
    }
    format!("pod {}/{}", text(ns), text(name))
}

/// Prints a CNI error document, indented as the CNI library's skel prints
/// it, and returns the failing status.
fn fail(code: u32, msg: String) -> u8 {
    let doc = format!("{{\n    \"code\": {code},\n    \"msg\": {}\n}}\n", quote::json(&msg));
    write(&mut io::stdout(), doc.as_bytes(), 1)
}

/// Writes b and returns status, or 1 when the write failed.
fn write(w: &mut impl Write, b: &[u8], status: u8) -> u8 {
    match w.write_all(b).and_then(|_| w.flush()) {
        Ok(()) => status,
        Err(_) => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        cni_env(pairs.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))))
    }

    #[test]
    fn only_cni_variables_are_forwarded_and_the_last_one_wins() {
        let got = env(&[
            ("PATH", "/bin"),
            ("CNI_", "x"),
            ("CNI_COMMAND", "ADD"),
            ("CNI_COMMAND", "DEL"),
            ("CNI_IFNAME", "eth0"),
        ]);
        let want: Vec<(Vec<u8>, Vec<u8>)> = vec![
            (b"CNI_COMMAND".to_vec(), b"DEL".to_vec()),
            (b"CNI_IFNAME".to_vec(), b"eth0".to_vec()),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn messages_name_the_pod_or_else_the_container() {
        let with_pod = env(&[
            ("CNI_ARGS", "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web"),
            ("CNI_CONTAINERID", "c1"),
        ]);
        assert_eq!(pod_of(&with_pod), "pod ns/web");
        assert_eq!(pod_of(&env(&[("CNI_CONTAINERID", "c1")])), "container c1");
    }
}
