//! Tests of process identity: stat parsing, own pid, an unreaped child.

use super::*;

fn own_pid() -> i32 {
    // Pids fit in i32 (pid_max is at most 2^22).
    std::process::id() as i32
}

#[test]
fn fields_are_counted_after_the_last_parenthesis() {
    let text = "1234 (we ird) (x)) S 77 1230 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615";
    let st = parse_stat(text).unwrap();
    assert_eq!(st.comm, "we ird) (x)");
    assert_eq!(st.state, 'S');
    assert_eq!(st.ppid, 77);
    assert_eq!(st.pgrp, 1230);
    assert_eq!(st.start_time, 987654);
    assert!(!st.is_dead());
}

#[test]
fn a_command_name_that_fakes_fields_does_not_shift_them() {
    // A name built to look like the fields that follow it: counting from the first `)` would
    // read state Z and start time 1.
    let text = "42 (x) Z 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 0 0 1 0 1 ) R 9 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 555 1 1";
    let st = parse_stat(text).unwrap();
    assert_eq!(st.state, 'R');
    assert_eq!(st.ppid, 9);
    assert_eq!(st.start_time, 555);
}

#[test]
fn malformed_stat_lines_are_refused() {
    for bad in [
        "",
        "1234",
        "1234 (name",
        "1234 name) S 1 2",
        "1234 (name) S 1 2 3",
        "1234 (name) S x 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
        "1234 (name) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 notanumber",
        "1234 (name) SS 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
        "1234 (name) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 -5",
    ] {
        assert_eq!(parse_stat(bad), None, "{bad:?}");
    }
    assert_eq!(stat(0), None);
    assert_eq!(stat(-1), None);
    assert_eq!(process_start_time(-1), None);
}

#[test]
fn this_process_has_a_stable_identity() {
    let pid = own_pid();
    let me = stat(pid).unwrap();
    // The main thread's state: it may be waiting for this test's thread.
    assert!(!me.is_dead(), "{me:?}");
    assert_eq!(process_start_time(pid), Some(me.start_time));
    assert_eq!(process_start_time(pid), Some(me.start_time));
    let boot = boot_id().unwrap();
    assert_eq!(boot.len(), 36, "{boot}");
    assert_eq!(boot_id().as_deref(), Some(boot.as_str()));
    assert_eq!(identify(pid, me.start_time, &boot), Identity::Verified);
    assert_eq!(identify(pid, me.start_time + 1, &boot), Identity::PidReused);
    assert_eq!(identify(pid, me.start_time, "other"), Identity::OtherBoot);
    assert_eq!(identify(i32::MAX, 1, &boot), Identity::NotRunning);
    assert_eq!(identify(0, me.start_time, &boot), Identity::NotRunning);
}

#[test]
fn an_unreaped_child_has_no_start_time() {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = i32::try_from(child.id()).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let zombie = loop {
        let st = stat(pid).unwrap();
        if st.state == 'Z' || std::time::Instant::now() > deadline {
            break st;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    assert_eq!(zombie.state, 'Z');
    assert!(zombie.is_dead());
    assert_eq!(zombie.ppid, own_pid());
    assert_eq!(process_start_time(pid), None);
    let boot = boot_id().unwrap();
    assert_eq!(
        identify(pid, zombie.start_time, &boot),
        Identity::NotRunning
    );
    child.wait().unwrap();
    assert_eq!(stat(pid), None);
}
