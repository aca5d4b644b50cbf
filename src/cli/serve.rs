//! `holdcall serve`: the relay's command line (the connector's name, given or derived); the relay
//! itself is `crate::relay`.

use std::ffi::OsString;

use super::CliError;
use crate::config::{Config, Home};
use crate::ipc;
use crate::relay::{self, ServeOptions};

pub(super) fn serve_cmd(
    connector: Option<String>,
    client: Option<String>,
    command: Vec<OsString>,
) -> Result<i32, CliError> {
    let home = Home::from_env()?;
    // A bad config is fatal for every command: a relay must not run on settings it
    // could not read.
    Config::load(&home)?;
    let (connector, connector_from) = match connector {
        Some(c) => (c, None),
        None => {
            let words: Vec<String> = command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            let (program, args) = words.split_first().ok_or(relay::RelayError::NoCommand)?;
            let (c, from) = crate::routing::derived_connector(program, args);
            eprintln!("holdcall: no --connector given: using connector {c}, derived from {from}");
            (c, Some(from))
        }
    };
    // The relay runs on one thread: the thread that starts the server must outlive it,
    // because the server's parent-death signal follows that thread.
    let rt = ipc::current_thread()?;
    let code = rt.block_on(relay::serve(
        home,
        ServeOptions {
            connector,
            connector_from,
            client,
            command,
        },
    ));
    // The runtime's stdin reader may still be blocked in read(2) on a client that keeps
    // its end open; do not wait for it.
    rt.shutdown_background();
    Ok(code?)
}
