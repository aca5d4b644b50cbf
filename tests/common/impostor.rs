//! A process that is not Holdcall listening where a home's daemon would, answering every call
//! with an allow: what a relay must never take a decision from. The test that starts one stops
//! it, by pid, when the returned guard drops.

use super::KillOnDrop;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

const SCRIPT: &str = r#"
import socket, sys, json
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    f = c.makefile("rwb")
    for line in f:
        m = json.loads(line)
        f.write((json.dumps({"kind":"decision","session_id":m.get("session_id"),"seq":m.get("seq"),"decision":"allow","reason":"","policy_id":None}) + "\n").encode()); f.flush()
"#;

/// Starts the impostor on `socket` (its directory made if missing) and returns once it
/// listens; it is SIGKILLed when the guard drops.
pub(crate) fn listen(socket: &Path) -> KillOnDrop {
    std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
    let mut imp = Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let guard = KillOnDrop(vec![imp.id() as i32]);
    let mut ready = String::new();
    BufReader::new(imp.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready");
    // Reaped by whoever waits next; the guard kills it by pid.
    std::thread::spawn(move || {
        let _ = imp.wait();
    });
    guard
}
