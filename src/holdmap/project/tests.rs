use std::fs;

use super::*;

fn tree() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn a_package_json_names_the_project_from_any_folder_below_it() {
    let dir = tree();
    let root = dir.path().join("shop");
    fs::create_dir_all(root.join("src/components")).unwrap();
    fs::write(
        root.join("package.json"),
        r#"{"name": "@acme/shop", "version": "1.0.0"}"#,
    )
    .unwrap();
    let p = project_in(&root.join("src/components"), None).unwrap();
    assert_eq!(p.name, "@acme/shop");
    assert_eq!(p.root, root);
    assert_eq!(p.branch, None);
}

#[test]
fn an_unreadable_package_json_names_the_project_after_its_folder() {
    let dir = tree();
    let root = dir.path().join("blog");
    fs::create_dir_all(&root).unwrap();
    fs::write(root.join("package.json"), "{ not json").unwrap();
    assert_eq!(project_in(&root, None).unwrap().name, "blog");
    fs::write(
        root.join("package.json"),
        r#"{"name": "x\u001b]52;c;AAAA\u0007y"}"#,
    )
    .unwrap();
    let shown = project_in(&root, None).unwrap().name;
    assert!(!shown.contains('\u{1b}'), "{shown:?}");
    assert!(shown.contains("\\u{1b}"), "{shown:?}");
}

#[test]
fn the_branch_comes_from_git_head_and_a_detached_head_has_none() {
    let dir = tree();
    let root = dir.path().join("api");
    fs::create_dir_all(root.join(".git")).unwrap();
    fs::write(root.join(".git/HEAD"), "ref: refs/heads/feature/login\n").unwrap();
    let p = project_in(&root, None).unwrap();
    assert_eq!(p.name, "api");
    assert_eq!(p.branch.as_deref(), Some("feature/login"));
    fs::write(
        root.join(".git/HEAD"),
        "3f2a9c0d1e4b5a6978c0d1e2f3a4b5c6d7e8f9a0\n",
    )
    .unwrap();
    assert_eq!(project_in(&root, None).unwrap().branch, None);
}

#[test]
fn a_git_file_is_followed_to_the_git_folder_it_names() {
    let dir = tree();
    let real = dir.path().join("main-checkout/.git/worktrees/wt1");
    fs::create_dir_all(&real).unwrap();
    fs::write(real.join("HEAD"), "ref: refs/heads/wt-branch\n").unwrap();
    let worktree = dir.path().join("wt1");
    fs::create_dir_all(&worktree).unwrap();
    fs::write(
        worktree.join(".git"),
        "gitdir: ../main-checkout/.git/worktrees/wt1\n",
    )
    .unwrap();
    fs::write(worktree.join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
    assert_eq!(
        project_in(&worktree, None).unwrap().branch.as_deref(),
        Some("wt-branch")
    );
}

#[test]
fn a_package_in_a_monorepo_takes_the_branch_of_the_checkout_above_it() {
    let dir = tree();
    let repo = dir.path().join("mono");
    fs::create_dir_all(repo.join(".git")).unwrap();
    fs::write(repo.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::create_dir_all(repo.join("packages/web")).unwrap();
    fs::write(repo.join("packages/web/package.json"), r#"{"name":"web"}"#).unwrap();
    let p = project_in(&repo.join("packages/web"), None).unwrap();
    assert_eq!(
        (p.name.as_str(), p.branch.as_deref()),
        ("web", Some("main"))
    );
    assert_eq!(p.root, repo.join("packages/web"));
}

#[test]
fn the_root_folder_and_the_home_folder_itself_are_never_projects() {
    assert_eq!(project_in(Path::new("/"), None), None);
    assert_eq!(project_in(Path::new("relative/path"), None), None);
    let dir = tree();
    let home = dir.path().join("home");
    fs::create_dir_all(home.join(".git")).unwrap();
    fs::write(home.join(".git/HEAD"), "ref: refs/heads/dotfiles\n").unwrap();
    fs::create_dir_all(home.join("Downloads")).unwrap();
    assert_eq!(project_in(&home.join("Downloads"), Some(&home)), None);
    // A project inside a home folder that is itself a checkout takes no branch from it.
    fs::create_dir_all(home.join("code/shop")).unwrap();
    fs::write(home.join("code/shop/go.mod"), "module shop\n").unwrap();
    let shop = project_in(&home.join("code/shop"), Some(&home)).unwrap();
    assert_eq!((shop.name.as_str(), shop.branch), ("shop", None));
    assert_eq!(project_in(&home, Some(&home)), None);
}

#[test]
fn a_project_shows_as_json_matching_its_schema_keys() {
    let p = Project {
        name: "shop".into(),
        root: PathBuf::from("/w/shop"),
        branch: None,
    };
    let json = to_json(&p);
    assert_eq!(json["root"], "/w/shop");
    assert_eq!(json["branch"], Value::Null);
    assert_eq!(
        json.as_object().unwrap().len(),
        schema()["required"].as_array().unwrap().len()
    );
}
