//! `holdcall status`: where Holdcall keeps things, whether the daemon runs, the journal's state.

use super::CliError;
use super::daemon::daemon_line;
use super::log::machine_id;
use crate::config::{Config, Home};
use crate::ipc;
use crate::journal::Reader;

pub(super) fn status_cmd(json: bool) -> Result<i32, CliError> {
    let home = Home::from_env()?;
    let config = Config::load(&home);
    let rt = ipc::current_thread()?;
    let d = rt.block_on(daemon_line(&home));
    let daemon = d.text;
    let reader = Reader::open(&home.db_path());
    let (journal_line, head, policies) = match &reader {
        Ok(r) => {
            let report = r.verify(machine_id(&home).as_deref(), None);
            let policies = r.policies().map(|p| p.len()).unwrap_or(0);
            match report {
                Ok(rep) => (
                    format!("journal  {} entries, chain {:?}", rep.entries, rep.state)
                        .to_lowercase(),
                    rep.head,
                    policies,
                ),
                Err(e) => (format!("journal  UNREADABLE: {e}"), None, policies),
            }
        }
        Err(_) if !home.db_path().exists() => {
            ("journal  (nothing recorded yet)".to_string(), None, 0)
        }
        Err(e) => (format!("journal  UNREADABLE: {e}"), None, 0),
    };
    if json {
        let v = serde_json::json!({
            "home": home.dir(),
            "socket": home.socket_path(),
            "config": config.as_ref().map(|_| "ok".to_string()).unwrap_or_else(|e| e.to_string()),
            "daemon": daemon.trim_start_matches("daemon").trim(),
            "pid": d.pid,
            "journal": journal_line.trim_start_matches("journal").trim(),
            "head": head,
            "policies": policies,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(std::io::Error::other)?
        );
        return Ok(0);
    }
    println!("home     {}", home.dir().display());
    println!("socket   {}", home.socket_path().display());
    match &config {
        Ok(_) => println!("config   {} (ok)", home.config_path().display()),
        Err(e) => println!("config   INVALID: {e}"),
    }
    println!("{daemon}");
    println!("{journal_line}");
    if let Some(h) = head {
        println!("head     {h}");
    }
    println!("policy   {policies} rule(s)");
    let unhealthy = config.is_err()
        || d.code == 1
        || journal_line.contains("UNREADABLE")
        || journal_line.contains("broken")
        || daemon.contains("CANNOT DECIDE");
    Ok(if unhealthy { 1 } else { 0 })
}
