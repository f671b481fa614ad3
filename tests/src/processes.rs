//! The processes a test or bench gateway left behind. Brokers outlive their gateway by design
//! (`setsid`) and runners live in their own process group, so whoever starts a gateway ends
//! them: they are the live processes whose command line names its private state dir.

use std::path::{Path, PathBuf};

/// Live (not zombie) processes whose command line contains `needle`, with their arguments, in
/// pid order.
pub fn processes_naming(needle: &str) -> Vec<(i32, Vec<String>)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&cmdline);
        if text.contains(needle) && sandbox::process::process_start_time(pid).is_some() {
            let args = text
                .split('\0')
                .filter(|a| !a.is_empty())
                .map(str::to_string)
                .collect();
            found.push((pid, args));
        }
    }
    found.sort_by_key(|(pid, _)| *pid);
    found
}

/// The pids of the live brokers and runners started under `state_dir`.
pub fn session_processes(state_dir: &Path) -> Vec<i32> {
    processes_naming(&state_dir.to_string_lossy())
        .into_iter()
        .map(|(pid, _)| pid)
        .collect()
}

/// SIGKILL every broker and runner started under `state_dir`; how many there were.
pub fn kill_session_processes(state_dir: &Path) -> usize {
    let pids = session_processes(state_dir);
    for pid in pids
        .iter()
        .filter_map(|pid| rustix::process::Pid::from_raw(*pid))
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
    pids.len()
}

/// Ends the session processes of a state dir when dropped, even if the test panics.
pub struct Cleanup(pub PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        kill_session_processes(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[test]
    fn a_process_naming_the_dir_is_found_and_ended() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("marker");
        // `sleep 30` whose argv[0] is the marker path.
        let mut child = std::process::Command::new("sleep")
            .arg0(&marker)
            .arg("30")
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        // Until the child has executed `sleep`, its command line is this test's.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut found = processes_naming(&marker.to_string_lossy());
        while found.is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
            found = processes_naming(&marker.to_string_lossy());
        }
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, pid);
        assert_eq!(
            found[0].1,
            [marker.to_string_lossy().to_string(), "30".into()]
        );
        assert_eq!(session_processes(dir.path()), vec![pid]);
        {
            let _cleanup = Cleanup(dir.path().to_path_buf());
        }
        child.wait().unwrap();
        assert_eq!(session_processes(dir.path()), Vec::<i32>::new());
        assert_eq!(kill_session_processes(dir.path()), 0);
    }
}
