//! A child process group: it dies with its parent (PR_SET_PDEATHSIG), and it is stopped by
//! SIGTERM then SIGKILL to the whole group, each after a grace.

use tokio::process::{Child, Command};

/// Makes the child receive SIGTERM if this process dies without stopping it (even by SIGKILL).
/// `orphaned` is the error the child's spawn fails with when this process already died before
/// the request took effect (then the child refuses to exec).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub(crate) fn die_with_parent(cmd: &mut Command, orphaned: &'static str) -> std::io::Result<()> {
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec. It calls only prctl and
    // getppid, both async-signal-safe, allocates nothing and touches no parent state. If the
    // parent already died before prctl took effect, the child refuses to exec.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)
                .map_err(std::io::Error::from)?;
            if nix::unistd::getppid() != parent {
                return Err(std::io::Error::other(orphaned));
            }
            Ok(())
        });
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn die_with_parent(_cmd: &mut Command, _orphaned: &'static str) -> std::io::Result<()> {
    Err(crate::os::unsupported("making a child die with its parent"))
}

/// Stops a child at once: SIGTERM to its group, `bound` to exit, then SIGKILL.
pub(crate) async fn stop_group_now(child: &mut Child, bound: std::time::Duration) {
    let group = child.id().map(|p| nix::unistd::Pid::from_raw(p as i32));
    if let Some(g) = group {
        let _ = nix::sys::signal::killpg(g, nix::sys::signal::Signal::SIGTERM);
    }
    if let Ok(Ok(_)) = tokio::time::timeout(bound, child.wait()).await {
        return;
    }
    if let Some(g) = group {
        let _ = nix::sys::signal::killpg(g, nix::sys::signal::Signal::SIGKILL);
    }
    let _ = child.kill().await;
}

/// Waits `grace` for a child to leave (its stdin closed, say); then SIGTERM, then SIGKILL, each
/// to its whole process group and each after another `grace`.
pub(crate) async fn stop_group(child: &mut Child, grace: std::time::Duration) {
    if let Ok(Ok(_)) = tokio::time::timeout(grace, child.wait()).await {
        return;
    }
    let group = child.id().map(|p| nix::unistd::Pid::from_raw(p as i32));
    if let Some(g) = group {
        let _ = nix::sys::signal::killpg(g, nix::sys::signal::Signal::SIGTERM);
    }
    if let Ok(Ok(_)) = tokio::time::timeout(grace, child.wait()).await {
        return;
    }
    if let Some(g) = group {
        let _ = nix::sys::signal::killpg(g, nix::sys::signal::Signal::SIGKILL);
    }
    let _ = child.kill().await;
}
