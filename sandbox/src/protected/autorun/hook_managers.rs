//! Git hook managers' own places (`git_hooks`): every file or directory whose content a
//! commit-time hook manager runs, or reads as configuration naming the commands it runs — one
//! table, each entry saying which tool reads it (red team 25 B4: nano-staged's, lefthook's
//! script dirs and seven other managers' places were missing). What those commands then run
//! (`npm test`, `make lint`) is the project's checks and stays writable
//! (docs/design/protected-set.md); `package.json`'s hook sections are
//! [`super::package_json`]'s, as are `package.yaml`'s.

/// How an entry matches a path's folded (lower-case) names.
#[derive(Debug, Clone, Copy)]
enum Pattern {
    /// A file of exactly this name, at any depth.
    File(&'static str),
    /// A file whose name starts with this (`.lintstagedrc.` + any extension).
    Prefix(&'static str),
    /// A file named this stem, a dot and one of [`CONFIG_EXTENSIONS`] (`nano-staged.js`, not
    /// `nano-staged.md`).
    Config(&'static str),
    /// A directory: everything below it, at any depth.
    Dir(&'static str),
    /// A file directly in a directory of the first name whose name starts with the second
    /// (cosmiconfig's `.config/commitlintrc.json`).
    PrefixIn(&'static str, &'static str),
}

/// Extensions configuration loaders (cosmiconfig, lilconfig, lefthook) try.
const CONFIG_EXTENSIONS: [&str; 12] = [
    "json", "jsonc", "json5", "yaml", "yml", "toml", "js", "cjs", "mjs", "ts", "cts", "mts",
];

/// Every hook manager's place, with the tool that reads it.
const HOOK_MANAGER_PLACES: &[(Pattern, &str)] = &[
    (
        Pattern::Dir(".husky"),
        "husky 5+: the hook scripts its runner `.husky/_/` calls",
    ),
    (Pattern::File(".huskyrc"), "husky 4: hook commands"),
    (Pattern::Prefix(".huskyrc."), "husky 4: hook commands"),
    (Pattern::Prefix("husky.config."), "husky 4: hook commands"),
    (
        Pattern::Dir(".githooks"),
        "the usual core.hooksPath; npm git-hooks' per-hook dirs",
    ),
    (
        Pattern::Dir("git_hooks"),
        "icefox git-hooks: git_hooks/<hook>/* run at each hook",
    ),
    (
        Pattern::Dir(".git-hooks"),
        "overcommit: its plugin_directory of Ruby hooks",
    ),
    (
        Pattern::File(".overcommit.yml"),
        "overcommit: hook commands",
    ),
    (
        Pattern::File(".pre-commit-config.yaml"),
        "pre-commit and prek: hook commands, `repo: local` entries",
    ),
    (
        Pattern::File(".pre-commit-config.yml"),
        "prek (pre-commit's Rust port) reads this spelling too",
    ),
    (Pattern::Config("lefthook"), "lefthook: hook commands"),
    (Pattern::Config(".lefthook"), "lefthook: hook commands"),
    (
        Pattern::Config("lefthook-local"),
        "lefthook: the local override",
    ),
    (
        Pattern::Config(".lefthook-local"),
        "lefthook: the local override",
    ),
    (
        Pattern::Dir(".lefthook"),
        "lefthook: source_dir, scripts/<hook>/* run at each hook",
    ),
    (
        Pattern::Dir(".lefthook-local"),
        "lefthook: source_dir_local, the local scripts",
    ),
    (
        Pattern::File(".lintstagedrc"),
        "lint-staged: commands per staged file",
    ),
    (
        Pattern::Prefix(".lintstagedrc."),
        "lint-staged: commands per staged file",
    ),
    (
        Pattern::Prefix("lint-staged.config."),
        "lint-staged: commands per staged file",
    ),
    (
        Pattern::File(".nanostagedrc"),
        "nano-staged: commands per staged file",
    ),
    (
        Pattern::Config(".nano-staged"),
        "nano-staged: commands per staged file",
    ),
    (
        Pattern::Config("nano-staged"),
        "nano-staged: commands per staged file",
    ),
    (
        Pattern::File(".commitlintrc"),
        "commitlint (commit-msg): config modules it loads",
    ),
    (
        Pattern::Prefix(".commitlintrc."),
        "commitlint: config modules it loads",
    ),
    (
        Pattern::Prefix("commitlint.config."),
        "commitlint: config modules it loads",
    ),
    (
        Pattern::PrefixIn(".config", "commitlintrc"),
        "commitlint (cosmiconfig 9's .config/)",
    ),
    (
        Pattern::File(".simple-git-hooks"),
        "simple-git-hooks: hook commands",
    ),
    (
        Pattern::Prefix(".simple-git-hooks."),
        "simple-git-hooks: hook commands",
    ),
    (
        Pattern::Prefix("simple-git-hooks."),
        "simple-git-hooks: hook commands",
    ),
    (Pattern::File("hk.pkl"), "hk: hook steps"),
    (Pattern::File(".hk.pkl"), "hk: hook steps"),
    (Pattern::File("hk.local.pkl"), "hk: the local override"),
    (Pattern::File(".hk.local.pkl"), "hk: the local override"),
    (
        Pattern::File(".hkrc.pkl"),
        "hk: the user config, also read from the project",
    ),
    (
        Pattern::File(".rusty-hook.toml"),
        "rusty-hook: hook commands",
    ),
    (
        Pattern::File("rusty-hook.toml"),
        "rusty-hook: hook commands",
    ),
    (
        Pattern::Dir(".cargo-husky"),
        "cargo-husky: hooks/* copied into .git/hooks by the build",
    ),
    (
        Pattern::File("captainhook.json"),
        "CaptainHook (PHP): hook actions",
    ),
    (
        Pattern::File("grumphp.yml"),
        "GrumPHP: tasks and the extensions it loads",
    ),
    (Pattern::File("grumphp.yaml"), "GrumPHP"),
    (Pattern::File("grumphp.yml.dist"), "GrumPHP's fallback"),
    (Pattern::File("grumphp.yaml.dist"), "GrumPHP's fallback"),
    (Pattern::File("grumphp.dist.yml"), "GrumPHP's fallback"),
    (Pattern::File("grumphp.dist.yaml"), "GrumPHP's fallback"),
    (Pattern::File(".mookme.json"), "mookme: its settings"),
    (
        Pattern::Dir(".hooks"),
        "mookme: .hooks/<hook>.json steps and shared scripts",
    ),
    (
        Pattern::File(".gitlint"),
        "gitlint (commit-msg): extra-path loads Python rule files",
    ),
];

/// Whether `names` (a path's folded components) is, or lies in, a hook manager's place.
pub(super) fn hook_manager_place(names: &[String]) -> bool {
    let Some((last, dirs)) = names.split_last() else {
        return false;
    };
    HOOK_MANAGER_PLACES
        .iter()
        .any(|(pattern, _)| match *pattern {
            Pattern::File(name) => last == name,
            Pattern::Prefix(prefix) => last.starts_with(prefix),
            Pattern::Config(stem) => last
                .strip_prefix(stem)
                .and_then(|rest| rest.strip_prefix('.'))
                .is_some_and(|ext| CONFIG_EXTENSIONS.contains(&ext)),
            // The final name may itself be the directory (the check is also asked about roots).
            Pattern::Dir(dir) => names.iter().any(|n| n == dir),
            Pattern::PrefixIn(dir, prefix) => {
                dirs.last().is_some_and(|d| d == dir) && last.starts_with(prefix)
            }
        })
}
