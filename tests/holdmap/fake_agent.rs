//! Stand-in agents for the agent tools' tests: real processes with the executable name and the
//! process tree a real agent makes. An agent is a copy of `sh` named like the product
//! (`claude`, `codex`, `cursor` …) in a temp `bin/`, running `-c LINE` in a temp project with
//! extra argv words after the script (flags such as `--dangerously-skip-permissions` show on
//! its command line as a real agent's would). Its tools are scripts in the same `bin/`
//! (`FakeAgent::tool`): a Python script named like the launcher (`npx`, `uvx`) blocks reading
//! stdin exactly as a stdio MCP server does, so `npx -y @scope/pkg@1.2.3` in LINE shows as
//! `python3 …/bin/npx -y @scope/pkg@1.2.3`, the shape of a real `node …/npx …`.
//!
//! Each test gets its own HOME (`home`), shared with the `holdmap mcp` it starts
//! (`Holdmap::start_with(&[("HOME", …)])`), for the client config files it writes. Every
//! process is stopped by pid when the agent is dropped: stdin closes (the tools exit), then the
//! agent's descendants and the agent are killed by pid.

#![allow(dead_code)] // each test file uses a part

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub(crate) struct FakeAgent {
    pub(crate) child: Child,
    pub(crate) dir: tempfile::TempDir,
    /// The temp HOME for config files (also the agent's HOME).
    pub(crate) home: PathBuf,
    /// The agent's working directory (a project with a package.json).
    pub(crate) project: PathBuf,
    pub(crate) bin: PathBuf,
}

/// A blocking stdio "server": reads stdin until it closes.
const TOOL_SCRIPT: &str = "#!/usr/bin/env python3\nimport sys\nsys.stdin.read()\n";

pub(crate) struct Builder {
    dir: tempfile::TempDir,
    program: String,
    extra_argv: Vec<String>,
    tools: Vec<String>,
}

impl FakeAgent {
    /// An agent named `program` (`claude`, `codex`, …) to be started by `Builder::run`.
    pub(crate) fn named(program: &str) -> Builder {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("project")).unwrap();
        std::fs::write(
            dir.path().join("project/package.json"),
            r#"{"name":"shop"}"#,
        )
        .unwrap();
        Builder {
            dir,
            program: program.to_string(),
            extra_argv: Vec::new(),
            tools: Vec::new(),
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `pid:N`, the only way these tests address an agent (never a product name another
    /// process on the machine could match).
    pub(crate) fn query(&self) -> String {
        format!("pid:{}", self.child.id())
    }

    /// Writes `rel` (relative to HOME) with `text`, creating its directories.
    pub(crate) fn write_home(&self, rel: &str, text: &str) -> PathBuf {
        write(&self.home.join(rel), text)
    }

    /// Writes `rel` (relative to the project) with `text`.
    pub(crate) fn write_project(&self, rel: &str, text: &str) -> PathBuf {
        write(&self.project.join(rel), text)
    }

    /// Every pid below the agent, by walking /proc's children lists.
    pub(crate) fn descendants(&self) -> Vec<u32> {
        let mut out = Vec::new();
        let mut next = vec![self.child.id()];
        while let Some(p) = next.pop() {
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
                continue;
            };
            for t in tasks.flatten() {
                let Ok(children) = std::fs::read_to_string(t.path().join("children")) else {
                    continue;
                };
                for c in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                    if !out.contains(&c) {
                        out.push(c);
                        next.push(c);
                    }
                }
            }
        }
        out
    }

    /// Waits (bounded by PATIENCE) until the agent has at least `n` descendants.
    pub(crate) fn wait_for_descendants(&self, n: usize) {
        crate::common::eventually("the agent's tools to start", || {
            self.descendants().len() >= n
        });
    }
}

fn write(path: &Path, text: &str) -> PathBuf {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}

impl Builder {
    /// Extra argv words after the `-c LINE` script (`sh` sets them as $0, $1, … and ignores
    /// them): how a flag shows on the agent's command line.
    pub(crate) fn argv(mut self, words: &[&str]) -> Builder {
        self.extra_argv.extend(words.iter().map(|w| w.to_string()));
        self
    }

    /// A tool script named `name` (`npx`, `uvx`, `mcp-server-x`) in the agent's `bin/`.
    pub(crate) fn tool(mut self, name: &str) -> Builder {
        self.tools.push(name.to_string());
        self
    }

    /// The agent's HOME, to write config files into before it starts.
    pub(crate) fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// Starts `program -c LINE [argv…]` in the project, with `bin/` first on its PATH.
    pub(crate) fn run(self, line: &str) -> FakeAgent {
        use std::os::unix::fs::PermissionsExt as _;
        let bin = self.dir.path().join("bin");
        let sh = std::fs::canonicalize("/bin/sh").unwrap();
        let exe = bin.join(&self.program);
        crate::common::copy_executable(sh, &exe);
        for t in &self.tools {
            let path = bin.join(t);
            std::fs::write(&path, TOOL_SCRIPT).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let home = self.home();
        let project = self.dir.path().join("project");
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut child = Command::new(&exe)
            .arg("-c")
            .arg(line)
            .args(&self.extra_argv)
            .current_dir(&project)
            .env("HOME", &home)
            .env("PATH", path)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Keep stdin open: the tools block reading it until the agent is dropped.
        let _ = child.stdin.as_mut().map(|s| s.flush());
        FakeAgent {
            child,
            dir: self.dir,
            home,
            project,
            bin,
        }
    }
}

impl Drop for FakeAgent {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        for pid in self.descendants() {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
