//! Tests of the journal's files: 0600 modes, the machine id, and errors that name the file.

use super::*;

#[test]
fn the_database_file_is_created_private() -> TestResult {
    let f = fixture()?;
    let mut j = Journal::open(&f.db, MACHINE, Durability::Process)?;
    j.append(Kind::SessionStart, session("s1"))?;
    assert_eq!(mode_of(&f.db)?, 0o600);
    let mut wal = f.db.as_os_str().to_owned();
    wal.push("-wal");
    assert_eq!(mode_of(Path::new(&wal))?, 0o600);
    Ok(())
}

#[test]
fn an_existing_database_file_with_a_wider_mode_is_tightened() -> TestResult {
    let f = fixture()?;
    File::create(&f.db)?.set_permissions(Permissions::from_mode(0o644))?;
    assert_eq!(mode_of(&f.db)?, 0o644);
    Journal::open(&f.db, MACHINE, Durability::Process)?;
    assert_eq!(mode_of(&f.db)?, 0o600);
    Ok(())
}

#[test]
fn the_machine_id_is_created_private_and_reused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("machine-id");
    let id = load_or_create_machine_id(&path, true)?;
    assert_eq!(id.len(), 32);
    assert!(
        id.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    assert_eq!(mode_of(&path)?, 0o600);
    assert_eq!(load_or_create_machine_id(&path, false)?, id);
    assert_eq!(load_or_create_machine_id(&path, true)?, id);
    // Surrounding whitespace from a hand edit is ignored.
    std::fs::write(&path, format!("  {id}\n\n"))?;
    assert_eq!(load_or_create_machine_id(&path, false)?, id);
    let other = tempfile::tempdir()?;
    assert_ne!(
        load_or_create_machine_id(&other.path().join("machine-id"), true)?,
        id
    );
    Ok(())
}

#[test]
fn a_missing_machine_id_next_to_entries_is_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("machine-id");
    assert!(matches!(
        load_or_create_machine_id(&path, false),
        Err(JournalError::MachineIdMissing { .. })
    ));
    assert!(!path.exists());
    std::fs::write(&path, "\n")?;
    assert!(matches!(
        load_or_create_machine_id(&path, false),
        Err(JournalError::MachineIdEmpty { .. })
    ));
    // Empty next to an empty journal: an interrupted creation, finished now.
    assert_eq!(load_or_create_machine_id(&path, true)?.len(), 32);
    Ok(())
}

#[test]
fn journal_has_entries_is_false_until_something_is_recorded() -> TestResult {
    let f = fixture()?;
    assert!(!journal_has_entries(&f.db)?);
    let mut j = journal_with(&f, 0)?;
    assert!(!journal_has_entries(&f.db)?);
    j.append(Kind::SessionStart, session("s1"))?;
    assert!(journal_has_entries(&f.db)?);
    Ok(())
}

#[test]
fn errors_name_the_file_and_say_what_to_do() -> TestResult {
    use miette::Diagnostic as _;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("machine-id");
    let err = load_or_create_machine_id(&path, false)
        .err()
        .ok_or("expected an error")?;
    let shown = path.display().to_string();
    assert!(err.to_string().contains(&shown));
    let help = err.help().map(|h| h.to_string()).unwrap_or_default();
    assert!(help.contains(&shown) && help.contains("restore"), "{help}");
    let missing_dir = dir.path().join("nope").join("holdcall.db");
    let err = Journal::open(&missing_dir, MACHINE, Durability::Power)
        .err()
        .ok_or("expected an error")?;
    assert!(matches!(err, JournalError::CreateFile { .. }));
    let help = err.help().map(|h| h.to_string()).unwrap_or_default();
    assert!(
        help.contains(&dir.path().join("nope").display().to_string()),
        "{help}"
    );
    Ok(())
}
