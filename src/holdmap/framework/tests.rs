use super::*;
use crate::holdmap::model::fixture::process;

fn of(name: &str, argv: &[&str]) -> Option<(&'static str, Category)> {
    framework_of(&process(2000, 1, 1000, name, argv, "/")).map(|f| (f.name, f.category))
}

#[test]
fn python_dash_m_http_server_is_a_dev_server() {
    assert_eq!(
        of("python3", &["python3", "-m", "http.server", "8000"]),
        Some(("http.server", Dev))
    );
    assert_eq!(
        of(
            "python3.12",
            &["/usr/bin/python3.12", "-u", "-m", "http.server"]
        ),
        Some(("http.server", Dev))
    );
}

#[test]
fn node_running_a_package_bin_is_named_by_the_package() {
    assert_eq!(
        of("node", &["node", "/x/node_modules/.bin/vite"]),
        Some(("vite", Dev))
    );
    assert_eq!(
        of(
            "node",
            &["node", "/x/node_modules/vite/bin/vite.js", "--port", "5173"]
        ),
        Some(("vite", Dev))
    );
    assert_eq!(
        of(
            "node",
            &["node", "/x/node_modules/react-scripts/scripts/start.js"]
        ),
        Some(("react-scripts", Dev))
    );
    assert_eq!(
        of(
            "node",
            &["node", "/x/node_modules/next/dist/bin/next", "dev"]
        ),
        Some(("next", Dev))
    );
    assert_eq!(
        of(
            "node",
            &["node", "/x/node_modules/next/dist/bin/next", "start"]
        ),
        Some(("next", App))
    );
    assert_eq!(
        of(
            "node",
            &[
                "node",
                "--inspect",
                "-r",
                "ts-node/register",
                "/x/node_modules/.bin/nuxt"
            ]
        ),
        Some(("nuxt", Dev))
    );
}

#[test]
fn a_plain_node_script_has_no_framework() {
    assert_eq!(of("node", &["node", "server.js"]), None);
    assert_eq!(of("node", &["node", "-e", "require('vite')"]), None);
}

#[test]
fn subcommands_decide_for_tools_that_are_not_always_servers() {
    assert_eq!(
        of("python3", &["python3", "manage.py", "runserver"]),
        Some(("django", Dev))
    );
    assert_eq!(of("python3", &["python3", "manage.py", "migrate"]), None);
    assert_eq!(
        of("ruby", &["ruby", "bin/rails", "s"]),
        Some(("rails", Dev))
    );
    assert_eq!(
        of("bundle", &["bundle", "exec", "rails", "server"]),
        Some(("rails", Dev))
    );
    assert_eq!(of("hugo", &["hugo", "server"]), Some(("hugo", Dev)));
    assert_eq!(
        of("php", &["php", "-S", "localhost:8000"]),
        Some(("php -S", Dev))
    );
    assert_eq!(of("npm", &["npm", "run", "dev"]), Some(("npm run", Dev)));
    assert_eq!(of("pnpm", &["pnpm", "dev"]), Some(("pnpm", Dev)));
    assert_eq!(of("cargo", &["cargo", "run"]), Some(("cargo run", Dev)));
    assert_eq!(of("cargo", &["cargo", "build"]), None);
    assert_eq!(
        of("gunicorn", &["gunicorn", "--reload", "app:app"]),
        Some(("gunicorn", Dev))
    );
    assert_eq!(
        of("gunicorn", &["gunicorn", "app:app"]),
        Some(("gunicorn", App))
    );
    assert_eq!(of("npx", &["npx", "vite"]), Some(("vite", Dev)));
    assert_eq!(
        of(
            "uvicorn",
            &["/venv/bin/python", "/venv/bin/uvicorn", "main:app"]
        ),
        Some(("uvicorn", Dev))
    );
}

#[test]
fn databases_and_proxies_are_applications_and_daemons_are_the_system() {
    assert_eq!(
        of(
            "postgres",
            &["/usr/lib/postgresql/16/bin/postgres", "-D", "/var/lib/pg"]
        ),
        Some(("postgres", App))
    );
    assert_eq!(
        of("postgres", &["postgres: checkpointer"]),
        Some(("postgres", App))
    );
    assert_eq!(
        of("redis-server", &["redis-server *:6379"]),
        Some(("redis", App))
    );
    assert_eq!(
        of("nginx", &["nginx: master process /usr/sbin/nginx"]),
        Some(("nginx", App))
    );
    assert_eq!(
        of(
            "sshd",
            &["sshd: /usr/sbin/sshd -D [listener] 0 of 10-100 startups"]
        ),
        Some(("sshd", System))
    );
    assert_eq!(
        of("systemd-resolve", &["/usr/lib/systemd/systemd-resolved"]),
        Some(("systemd", System))
    );
    assert_eq!(
        of(
            "NetworkManager",
            &["/usr/sbin/NetworkManager", "--no-daemon"]
        ),
        Some(("NetworkManager", System))
    );
}

#[test]
fn a_kernel_name_cut_to_fifteen_bytes_is_restored_from_the_command() {
    let p = process(
        2000,
        1,
        1000,
        "gnome-terminal-",
        &["/usr/libexec/gnome-terminal-server"],
        "/",
    );
    assert_eq!(shown_name(&p), "gnome-terminal-server");
    let renamed = process(
        2000,
        1,
        1000,
        "short",
        &["/usr/bin/other-program-name"],
        "/",
    );
    assert_eq!(shown_name(&renamed), "short");
}

#[test]
fn a_process_that_rewrote_its_title_is_named_by_the_title_s_first_word() {
    assert_eq!(
        of("next-server (v1", &["next-server (v15.0.3)"]),
        Some(("next", Dev))
    );
    assert_eq!(
        of("python3", &["python3", "-m", "django", "runserver"]),
        Some(("django", Dev))
    );
    assert_eq!(program("/opt/My Tools/bin/srv --flag"), "srv");
    assert_eq!(program("tmux: server"), "tmux");
}

#[test]
fn container_forwarders_are_recognised_by_name() {
    assert!(is_container_forwarder(&process(
        2000,
        1,
        1000,
        "rootlessport",
        &["rootlessport"],
        "/"
    )));
    assert!(is_container_forwarder(&process(
        2000,
        1,
        0,
        "docker-proxy",
        &["/usr/bin/docker-proxy", "-proto", "tcp"],
        "/"
    )));
    assert!(!is_container_forwarder(&process(
        2000,
        1,
        1000,
        "node",
        &["node", "x.js"],
        "/"
    )));
}

#[test]
fn a_runner_hands_the_decision_to_the_tool_it_runs() {
    assert_eq!(
        of("pnpm", &["pnpm", "exec", "astro", "dev"]),
        Some(("astro", Dev))
    );
    assert_eq!(
        of("uv", &["uv", "run", "flask", "run"]),
        Some(("flask", Dev))
    );
    assert_eq!(of("pnpm", &["pnpm", "run", "dev"]), Some(("pnpm", Dev)));
    assert_eq!(of("pnpm", &["pnpm", "install"]), None);
}
