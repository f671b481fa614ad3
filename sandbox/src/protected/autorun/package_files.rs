//! The files whose hook sections a write is checked for — a `package.json` and a `package.yaml`
//! — and which reader compares them, by the name the file is read as.

use std::ffi::OsStr;

use super::{package_json, package_yaml};

/// Whether a write of a file of this name is checked for hook sections: a `package.json` or
/// a `package.yaml` ([`package_yaml`]).
pub fn reads_hook_sections(name: &OsStr) -> bool {
    package_json::is_package_json(name) || package_yaml::is_package_yaml(name)
}

/// The first hook section a write changes in the file named `name`, by its format; with
/// `strict_hooks`, a `package.json`'s check definitions too ([`package_json::changed_section`]).
pub fn changed_hook_section_of(
    name: &OsStr,
    old: Option<&[u8]>,
    new: &[u8],
    strict_hooks: bool,
) -> Option<package_json::HookChange> {
    if package_yaml::is_package_yaml(name) {
        package_yaml::changed_hook_section(old, new)
    } else {
        package_json::changed_section(old, new, strict_hooks)
    }
}
