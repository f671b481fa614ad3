//! Unit tests of the instance lock.

use super::*;

#[test]
fn a_second_holder_is_refused_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let first = acquire(dir.path()).unwrap();
    let err = acquire(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("another gateway is serving this state dir"),
        "{err}"
    );
    assert!(
        err.contains(&format!("pid {}", std::process::id())),
        "{err}"
    );
    drop(first);
    let _again = acquire(dir.path()).unwrap();
}

/// Red team 23i B1: removing the lock file does not let a second holder in; the holder puts
/// the file back at its next check.
#[test]
fn a_removed_lock_file_does_not_let_a_second_holder_in() {
    let dir = tempfile::tempdir().unwrap();
    let first = acquire(dir.path()).unwrap();
    std::fs::remove_file(dir.path().join(LOCK_FILE)).unwrap();
    let err = acquire(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("another gateway is serving this state dir (its lock file gateway.lock was removed: holder unknown)"),
        "{err}"
    );
    first.check().unwrap();
    let err = acquire(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains(&format!("(pid {}", std::process::id())),
        "{err}"
    );
}

#[test]
fn a_moved_state_dir_is_noticed_by_its_holder() {
    let base = tempfile::tempdir().unwrap();
    let state = base.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let first = acquire(&state).unwrap();
    first.check().unwrap();
    std::fs::rename(&state, base.path().join("moved")).unwrap();
    std::fs::create_dir(&state).unwrap();
    let err = first.check().unwrap_err().to_string();
    assert!(
        err.contains("is no longer the directory this gateway locked (it was moved or replaced)"),
        "{err}"
    );
    // The new directory is another state: a gateway may take it.
    let _second = acquire(&state).unwrap();
}

#[test]
fn an_answering_admin_socket_is_another_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let socket = admin_socket_path(dir.path());
    std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let err = acquire(dir.path()).unwrap_err().to_string();
    assert!(err.contains("(its admin socket"), "{err}");
    assert!(err.contains("answers)"), "{err}");
}

/// Red team 45 F3: a lock taken where the holder's lock never arrives (an overlay whose upper
/// layer is a live state dir) is refused when the lock file names a live process — by pid,
/// start in ticks and boot, so a reused pid or a dead holder refuses nothing.
#[test]
fn a_live_holder_named_by_the_lock_file_is_refused_even_when_the_lock_was_taken() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let identity = process_identity(&pid).unwrap();
    let write = |identity: &str| {
        std::fs::write(
            dir.path().join(LOCK_FILE),
            format!("pid {pid}, started 2026-01-01T00:00:00Z\n{identity}\n"),
        )
        .unwrap();
    };
    write(&identity);
    let err = acquire(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains(&format!("pid {pid}"))
            && err.contains("still running 5 s after its lock was released"),
        "{err}"
    );
    // Another start time (a reused pid): not the holder.
    write(&identity.replace("start ", "start 1"));
    drop(acquire(dir.path()).unwrap());
    // The holder gone: taken.
    write(&identity);
    child.kill().unwrap();
    child.wait().unwrap();
    let taken = acquire(dir.path()).unwrap();
    let text = std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
    assert!(
        text.lines().nth(1).is_some_and(|l| l.starts_with("start ")),
        "{text}"
    );
    drop(taken);
}

/// Red team 48 F9: a restart right after a SIGTERM found the old gateway still exiting (its
/// lock already released) and was refused, blaming the file system; it now waits for the
/// holder to exit and takes the lock.
#[test]
fn a_holder_that_exits_soon_is_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new("sleep")
        .arg("1")
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let identity = process_identity(&pid).unwrap();
    std::fs::write(
        dir.path().join(LOCK_FILE),
        format!("pid {pid}, started 2026-01-01T00:00:00Z\n{identity}\n"),
    )
    .unwrap();
    // Reaped as it exits (a zombie is still "alive" by its /proc entry).
    let reaper = std::thread::spawn(move || child.wait());
    let started = std::time::Instant::now();
    let taken = acquire(dir.path()).unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
    drop(taken);
    reaper.join().unwrap().unwrap();
}

/// Red team 45 F7: a state dir whose database has another name (linked into a second state
/// dir) is refused, naming the file; a plain copy is not.
#[test]
fn a_state_dir_whose_database_has_another_name_is_refused() {
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let db = first.path().join("gateway.sqlite3");
    std::fs::write(&db, "db").unwrap();
    std::fs::hard_link(&db, second.path().join("gateway.sqlite3")).unwrap();
    for dir in [first.path(), second.path()] {
        let err = acquire(dir).unwrap_err().to_string();
        assert!(err.contains("has another name (a hard link)"), "{err}");
    }
    std::fs::remove_file(second.path().join("gateway.sqlite3")).unwrap();
    std::fs::copy(&db, second.path().join("gateway.sqlite3")).unwrap();
    drop(acquire(first.path()).unwrap());
    drop(acquire(second.path()).unwrap());
}

/// Red team 49: a restart right after SIGTERM was refused at once (the stopping gateway still
/// held its lock while it finished). A holder that marked itself stopping is waited for, up
/// to the bound; a running one is refused at once.
#[test]
fn a_stopping_holder_is_waited_for_and_a_running_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let first = acquire(dir.path()).unwrap();
    let started = std::time::Instant::now();
    assert!(acquire(dir.path()).is_err());
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
    first.mark_stopping();
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(700));
        drop(first);
    });
    let started = std::time::Instant::now();
    let second = acquire(dir.path()).unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_millis(500));
    releaser.join().unwrap();
    // Its own lock file does not say stopping.
    assert!(!lock_text(dir.path()).unwrap().contains(STOPPING));
    drop(second);
}
