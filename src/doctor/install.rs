//! The checks of the install itself: the `holdcall` on PATH is this one, `config.toml` reads.

use std::path::PathBuf;

use super::{Check, Ctx, Status, check};
use crate::config::Config;

fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The holdcall on PATH is this one.
pub(super) fn binary(ctx: &Ctx) -> Vec<Check> {
    let name = "holdcall binary";
    let me = ctx
        .exe
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "this holdcall".into());
    let found = on_path("holdcall");
    let line = match found {
        None => check(
            name,
            Status::Warn,
            format!("no holdcall on PATH (this one is {me})"),
            Some(
                "add its directory to PATH to type `holdcall`; routed clients use its full path and work without",
            ),
        ),
        Some(p) => {
            let resolved = std::fs::canonicalize(&p).unwrap_or(p.clone());
            if Some(&resolved) == ctx.exe.as_ref() {
                check(
                    name,
                    Status::Ok,
                    format!("{} is this holdcall", p.display()),
                    None,
                )
            } else {
                check(
                    name,
                    Status::Warn,
                    format!("PATH finds {}, not this holdcall ({me})", p.display()),
                    Some("put one holdcall first on PATH, or remove the other copy"),
                )
            }
        }
    };
    vec![line]
}

pub(super) fn config_toml(ctx: &Ctx) -> Vec<Check> {
    let name = "config.toml";
    let home = match &ctx.home {
        Ok(h) => h,
        Err(e) => {
            return vec![check(
                name,
                Status::Fail,
                e.clone(),
                Some("set HOLDCALL_HOME or HOME"),
            )];
        }
    };
    vec![match Config::load(home) {
        Ok(_) if home.config_path().exists() => check(
            name,
            Status::Ok,
            format!("{} reads", home.config_path().display()),
            None,
        ),
        Ok(_) => check(name, Status::Ok, "none (the defaults apply)".into(), None),
        Err(e) => check(
            name,
            Status::Fail,
            e.to_string(),
            Some("fix or remove the key it names; every command refuses to run until then"),
        ),
    }]
}
