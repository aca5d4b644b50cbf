use super::*;
use crate::holdmap::model::fixture::{add, machine, process};

fn level(snap: &Snapshot, pid: i32) -> Option<Level> {
    protection(snap, pid).map(|p| p.level)
}

fn reason(snap: &Snapshot, pid: i32) -> String {
    protection(snap, pid).map(|p| p.reason).unwrap_or_default()
}

#[test]
fn pid_1_holdmap_and_each_of_its_ancestors_are_hard_protected() {
    let s = machine();
    for pid in [0, 1, 900, 800, 700] {
        assert_eq!(level(&s, pid), Some(Level::Hard), "pid {pid}");
    }
    assert!(reason(&s, 1).contains("PID 1"));
    assert_eq!(reason(&s, 800), "holdmap's own ancestor (bash, pid 800)");
    assert_eq!(
        reason(&s, 700),
        "holdmap's own ancestor (gnome-terminal-server, pid 700)"
    );
}

#[test]
fn a_child_of_holdmap_a_kernel_thread_and_an_unseen_pid_are_hard_protected() {
    let mut s = machine();
    add(
        &mut s,
        process(
            901,
            900,
            1000,
            "python3",
            &["python3", "-m", "http.server"],
            "/",
        ),
    );
    add(&mut s, process(2, 0, 0, "kthreadd", &[], "/"));
    add(&mut s, process(40, 2, 0, "kworker/0:1", &[], "/"));
    assert!(reason(&s, 901).starts_with("started by holdmap itself"));
    assert!(reason(&s, 40).starts_with("a kernel thread"));
    assert_eq!(level(&s, 2), Some(Level::Hard));
    assert_eq!(level(&s, 4242), Some(Level::Hard));
    assert!(reason(&s, 4242).starts_with("not visible"));
}

#[test]
fn a_login_shell_is_protected_and_its_login_host_too_but_sh_dash_c_is_not() {
    let mut s = machine();
    add(
        &mut s,
        process(1100, 1, 0, "login", &["/bin/login", "--", "u"], "/"),
    );
    add(
        &mut s,
        process(1200, 1100, 1000, "bash", &["-bash"], "/home/u"),
    );
    add(
        &mut s,
        process(
            1300,
            1200,
            1000,
            "sh",
            &["sh", "-c", "vite --port 3000"],
            "/home/u",
        ),
    );
    add(
        &mut s,
        process(
            1301,
            1300,
            1000,
            "node",
            &["node", "/p/node_modules/.bin/vite"],
            "/p",
        ),
    );
    add(
        &mut s,
        process(
            1302,
            1200,
            1000,
            "bash",
            &["bash", "-lc", "npm run dev"],
            "/p",
        ),
    );
    add(
        &mut s,
        process(1303, 1200, 1000, "bash", &["bash", "build.sh"], "/p"),
    );
    add(
        &mut s,
        process(1304, 1200, 1000, "zsh", &["zsh", "-i"], "/p"),
    );
    add(
        &mut s,
        process(
            1305,
            1200,
            1000,
            "bash",
            &["/bin/bash", "--init-file", "/x/shellIntegration-bash.sh"],
            "/p",
        ),
    );
    // A dev server run straight from the login shell.
    add(
        &mut s,
        process(
            1306,
            1200,
            1000,
            "python3",
            &["python3", "-m", "http.server"],
            "/p",
        ),
    );
    assert_eq!(level(&s, 1200), Some(Level::Soft));
    assert!(reason(&s, 1200).starts_with("an interactive shell (bash, pid 1200)"));
    assert_eq!(level(&s, 1100), Some(Level::Soft));
    assert_eq!(level(&s, 1304), Some(Level::Soft));
    assert_eq!(level(&s, 1305), Some(Level::Soft));
    add(
        &mut s,
        process(1307, 1200, 1000, "fish", &["fish", "--command=vite"], "/p"),
    );
    for pid in [1300, 1301, 1302, 1303, 1306, 1307] {
        assert_eq!(protection(&s, pid), None, "pid {pid}");
    }
}

#[test]
fn terminals_editors_and_system_daemons_are_soft_protected() {
    let mut s = machine();
    add(&mut s, process(1400, 1, 1000, "kitty", &["kitty"], "/"));
    add(
        &mut s,
        process(
            1401,
            1,
            1000,
            "code",
            &["/usr/share/code/code", "--type=zygote"],
            "/",
        ),
    );
    add(
        &mut s,
        process(
            1402,
            1,
            1000,
            "node",
            &["/home/u/.vscode-server/bin/abc/node", "server-main.js"],
            "/",
        ),
    );
    add(
        &mut s,
        process(1403, 1, 0, "sshd", &["sshd: /usr/sbin/sshd -D"], "/"),
    );
    add(
        &mut s,
        process(1404, 1, 0, "cupsd", &["/usr/sbin/cupsd", "-l"], "/"),
    );
    add(
        &mut s,
        process(
            1405,
            1,
            1000,
            "nvim",
            &["nvim", "--headless", "--listen", "x"],
            "/",
        ),
    );
    for (pid, starts) in [
        (1400, "a terminal (kitty"),
        (1401, "an editor or IDE (code"),
        (1402, "an editor or IDE (node"),
        (1403, "a system service (sshd"),
        (1404, "a system service (cupsd"),
    ] {
        assert_eq!(level(&s, pid), Some(Level::Soft), "pid {pid}");
        assert!(reason(&s, pid).starts_with(starts), "{}", reason(&s, pid));
    }
    assert_eq!(protection(&s, 1405), None);
}

#[test]
fn an_assistant_running_under_node_is_protected_and_the_dev_server_it_started_is_not() {
    let mut s = machine();
    add(
        &mut s,
        process(
            1500,
            1,
            1000,
            "node",
            &[
                "node",
                "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js",
            ],
            "/p",
        ),
    );
    add(
        &mut s,
        process(
            1501,
            1500,
            1000,
            "bash",
            &["/bin/bash", "-c", "-l", "npm run dev"],
            "/p",
        ),
    );
    add(
        &mut s,
        process(
            1502,
            1501,
            1000,
            "npm run dev",
            &["npm", "run", "dev"],
            "/p",
        ),
    );
    add(
        &mut s,
        process(
            1503,
            1502,
            1000,
            "node",
            &["node", "/p/node_modules/.bin/vite"],
            "/p",
        ),
    );
    add(&mut s, process(1504, 1, 1000, "codex", &["codex"], "/p"));
    add(
        &mut s,
        process(
            1505,
            1,
            1000,
            "python3",
            &["python3", "/home/u/.local/bin/aider"],
            "/p",
        ),
    );
    assert!(reason(&s, 1500).starts_with("an AI-assistant host (node, pid 1500)"));
    assert_eq!(level(&s, 1504), Some(Level::Soft));
    assert_eq!(level(&s, 1505), Some(Level::Soft));
    for pid in [1501, 1502, 1503] {
        assert_eq!(protection(&s, pid), None, "pid {pid}");
    }
}

#[test]
fn a_process_a_session_runs_under_is_soft_protected_as_its_host() {
    let mut s = machine();
    add(
        &mut s,
        process(1600, 1, 1000, "node", &["node", "pty-host.js"], "/"),
    );
    add(&mut s, process(1601, 1600, 1000, "bash", &["bash"], "/"));
    assert_eq!(level(&s, 1600), Some(Level::Soft));
    assert!(
        reason(&s, 1600).contains("an interactive shell (bash, pid 1601)"),
        "{}",
        reason(&s, 1600)
    );
}

#[test]
fn a_container_port_forwarder_and_a_jetbrains_ide_are_soft_protected() {
    let mut s = machine();
    add(
        &mut s,
        process(1700, 1, 1000, "rootlessport", &["rootlessport"], "/"),
    );
    add(
        &mut s,
        process(
            1701,
            1,
            1000,
            "java",
            &["/opt/idea/jbr/bin/java", "-Xmx2g", "com.intellij.idea.Main"],
            "/",
        ),
    );
    assert!(
        reason(&s, 1700).contains("stop the container itself"),
        "{}",
        reason(&s, 1700)
    );
    assert!(
        reason(&s, 1701).starts_with("an editor or IDE"),
        "{}",
        reason(&s, 1701)
    );
}

#[test]
fn a_snapshot_that_does_not_know_holdmap_s_pid_does_not_read_everything_as_its_child() {
    let mut s = machine();
    s.me = crate::holdmap::model::Me::default();
    add(
        &mut s,
        process(2000, 1, 1000, "node", &["node", "x.js"], "/"),
    );
    assert_eq!(protection(&s, 2000), None);
}
