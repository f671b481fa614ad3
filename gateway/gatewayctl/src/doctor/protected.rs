//! The one protected set (`sandbox::protected`) as this host has it: entries by category and which
//! exist here, the gateway's own entries and the size of the whole set. Informational.

use std::path::{Path, PathBuf};

use crate::check::{Check, ok};

/// The one protected set (`sandbox::protected`), by category: how many entries each has and which
/// exist on this host (the read tools refuse them, commands and the runner never see them), then
/// the gateway's own entries and the mount-table aliases found. Informational: always OK.
pub(super) fn checks(state_dir: &Path, home: Option<&Path>) -> Vec<Check> {
    use sandbox::protected;
    let home = home.unwrap_or(Path::new("/"));
    let shown = |path: &Path| match path.strip_prefix(home) {
        Ok(rest) if home != Path::new("/") => format!("~/{}", rest.display()),
        _ => path.display().to_string(),
    };
    let rows = protected::rows(home);
    // Each category once, in the order it first appears (a category's entries are not all
    // adjacent in the catalogue).
    let mut categories: Vec<&str> = Vec::new();
    for row in &rows {
        if !categories.contains(&row.category) {
            categories.push(row.category);
        }
    }
    let mut checks = Vec::new();
    for category in categories {
        let in_category: Vec<_> = rows.iter().filter(|r| r.category == category).collect();
        let present: Vec<String> = in_category
            .iter()
            .filter(|r| r.present)
            .map(|r| shown(&r.path))
            .collect();
        let detail = format!(
            "{} entries; present here: {}",
            in_category.len(),
            if present.is_empty() {
                "none".to_string()
            } else {
                present.join(", ")
            }
        );
        checks.push(ok(&format!("protected: {category}"), detail));
    }
    let extra: Vec<PathBuf> = std::env::var("CLAUDE_TOOLS_PROTECTED_PATHS")
        .unwrap_or_default()
        .split(':')
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
        .collect();
    // The whole set also holds the catalogue under other accounts' homes, other gateways' state
    // dirs and registries, and mount-table aliases: shown as one total, not taken apart.
    let all = protected::protected_set(home, state_dir, &extra).paths;
    checks.push(ok(
        "protected: gateway",
        format!(
            "the state dir, the command runtime area {}, {} owner extra(s) (CLAUDE_TOOLS_PROTECTED_PATHS), \
             {} host key file(s); {} paths in all with other accounts' homes, other gateways' \
             state dirs and mount aliases; install locations of the gateway and Claude Code are \
             never writable by a session",
            protected::command_runtime_area(state_dir).display(),
            extra.len(),
            protected::host_key_files().len(),
            all.len(),
        ),
    ));
    if home != Path::new("/") {
        checks.push(startup_links(home, &shown));
    }
    checks
}

/// The links in the home's start-up places (every dot link, everything under `~/.config`, the
/// start-up directories), whose targets sessions do not write; a start-up tree too large to
/// look at whole, or a link named through `/proc`, is a warning: every write is refused until
/// it is fixed or the owner opens the class.
fn startup_links(home: &Path, shown: &dyn Fn(&Path) -> String) -> Check {
    use sandbox::protected::autorun::startup_links::{
        MAX_CONFIG_DEPTH, MAX_CONFIG_ENTRIES, derive,
    };
    let name = "protected: start-up links";
    let started = std::time::Instant::now();
    let derived = derive(&[home.to_path_buf()]);
    let took = started.elapsed().as_millis();
    if let Some(link) = &derived.unknowable {
        return crate::check::warn(
            name,
            format!(
                "{} names its target through /proc or /dev/fd, whose meaning depends on the \
                 process reading it: sessions write nothing (startup_links)",
                shown(link)
            ),
            format!(
                "point {} at a plain path, or start the gateway with \
                 CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES=startup_links",
                shown(link)
            ),
        );
    }
    if let Some(place) = &derived.over_bound {
        return crate::check::warn(
            name,
            format!(
                "{} holds more than {MAX_CONFIG_ENTRIES} entries or is deeper than \
                 {MAX_CONFIG_DEPTH} levels: its links cannot all be seen, so sessions write \
                 nothing (startup_links)",
                shown(place)
            ),
            format!(
                "move bulky data out of {}, or start the gateway with \
                 CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES=startup_links",
                shown(place)
            ),
        );
    }
    let mut links: Vec<String> = derived.links.iter().map(|l| shown(&l.link)).collect();
    links.sort();
    links.dedup();
    let listed = if links.is_empty() {
        "none".to_string()
    } else {
        links.join(", ")
    };
    ok(
        name,
        format!(
            "{} link(s) whose targets sessions do not write: {listed} ({} entries looked at in \
             {took} ms)",
            links.len(),
            derived.looked_at
        ),
    )
}
