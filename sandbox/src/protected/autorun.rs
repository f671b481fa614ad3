//! Auto-run places: files and directories that some tool executes (or loads as configuration that
//! names programs) merely because the owner opens or uses a project later — Claude Code's
//! `.claude/` and `.mcp.json`, editor task and config dirs, `.envrc`, Python environments'
//! installed code (`site-packages`), git hook managers, shell start-up files. The write policy
//! refuses them in both write profiles unless the owner allowed their class at gateway start
//! (`CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES`); reading them stays allowed.
//!
//! Matching is by name components of the whole (absolute) path, case- and Unicode-insensitively
//! on every platform (a case-insensitive file system — macOS, ext4 casefold, vfat — opens
//! `.VSCode` as `.vscode`; refusing the variant elsewhere costs nothing real). A directory class
//! matches at any depth (a subproject's `.claude/`), a file class by its own name; everything
//! below a `site-packages` or `dist-packages` directory is installed code that runs at
//! interpreter start or import (a `.pth` file's module, `pip` itself), not the project's source.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

/// The env var naming the classes the owner allows sessions to write (comma-separated class
/// names, or `all`), read once at gateway start.
pub const ALLOW_ENV: &str = "CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES";

/// One class of auto-run places. The owner's opt-in is per class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AutorunClass {
    /// Coding agents' project configuration: hooks, MCP servers, commands, sub-agents.
    AgentConfig,
    /// Editor and IDE project configuration: tasks that run on folder open, interpreter paths,
    /// and the configs of linters an editor runs on open or save that load code.
    EditorConfig,
    /// Files a shell runs on entering the directory (direnv, mise).
    DirectoryHooks,
    /// An environment's installed Python code (`site-packages`) and its programs.
    PythonStartup,
    /// Git hook managers' hook files and configs (`.git/hooks` itself is refused as `.git`).
    GitHooks,
    /// Shell start-up files.
    ShellStartup,
    /// Toolchain and package-manager configuration that names programs to run.
    ToolchainConfig,
    /// Version-control repositories' own configuration: a directory git takes as a repository
    /// (an embedded bare repository, a gitfile's target), `.hg/`, `.jj/`, `.sl/`.
    VcsConfig,
    /// Installed JavaScript packages and yarn's own files (`node_modules/`, `.yarn/`, the PnP
    /// loader): code that tools, test runners and editor extensions load, not the project's.
    InstalledPackages,
    /// Targets of the owner's links in a home's start-up places (its dot entries, `~/.config`,
    /// the start-up directories: [`startup_links`]): they run like the link's place.
    StartupLinks,
}

impl AutorunClass {
    pub const ALL: [Self; 10] = [
        Self::AgentConfig,
        Self::EditorConfig,
        Self::DirectoryHooks,
        Self::PythonStartup,
        Self::GitHooks,
        Self::ShellStartup,
        Self::ToolchainConfig,
        Self::VcsConfig,
        Self::InstalledPackages,
        Self::StartupLinks,
    ];

    /// The class's name in messages and in [`ALLOW_ENV`].
    pub fn name(self) -> &'static str {
        match self {
            Self::AgentConfig => "agent_config",
            Self::EditorConfig => "editor_config",
            Self::DirectoryHooks => "directory_hooks",
            Self::PythonStartup => "python_startup",
            Self::GitHooks => "git_hooks",
            Self::ShellStartup => "shell_startup",
            Self::ToolchainConfig => "toolchain_config",
            Self::VcsConfig => "vcs_config",
            Self::InstalledPackages => "installed_packages",
            Self::StartupLinks => "startup_links",
        }
    }

    /// What the class holds, for messages and `gatewayctl doctor`.
    pub fn places(self) -> &'static str {
        match self {
            Self::AgentConfig => {
                "coding agents' project configuration: Claude Code's .claude/ and .mcp.json, \
                 .cursor/, .gemini/, .codex/, .kiro/, .continue/, .windsurf/, .roo/, \
                 .kilocode/, .amazonq/, .opencode/, .opencode.json(c), .openhands/, .qwen/, .iflow/, .factory/, .junie/, \
                 .amp/, .trae/, .augment/, .codebuddy/, .letta/, .vibe/, .goose/, .kimi/, \
                 .rovodev/, .clinerules/hooks/, .github/hooks/, \
                 opencode.json, crush.json, .continuerc.json, .aider.conf.yml (instruction \
                 files such as CLAUDE.md, AGENTS.md, .clinerules and .cursor/rules/ stay \
                 writable)"
            }
            Self::EditorConfig => {
                "editor and IDE configuration: .vscode/, .idea/, .zed/, .fleet/, .helix/, \
                 .devcontainer/, .devcontainer.json, .nvim.lua, .nvimrc, .exrc, .vimrc, \
                 _vimrc, .gvimrc, _gvimrc, _exrc, .lazy.lua, Emacs's .dir-locals.el, VS \
                 Code's *.code-workspace, .theia/, .vs/, *.sublime-project, .kateproject, \
                 Eclipse's .externalToolBuilders/, lazygit's .lazygit.yml, .lvimrc, \
                 .ycm_extra_conf.py, language servers' hie.yaml, .hie-bios, .lsp/config.edn, \
                 .vim/coc-settings.json, rust-analyzer.toml, .luarc.json, and linters' and \
                 IDEs' configs that run or load code: pylintrc, .pylintrc(.toml), mypy.ini, \
                 .mypy.ini, .flake8, .sqlfluff, .rubocop.yml, .rubocop_todo.yml, \
                 .standard.yml, .php-cs-fixer(.dist).php, .php_cs(.dist), phpstan.neon(.dist), \
                 phpstan.dist.neon, psalm.xml(.dist), .formatter.exs, .credo.exs, \
                 .ansible-lint(.yml/.yaml), .luacheckrc, (.)latexmkrc, .lintr, \
                 .golangci.{yml,yaml,toml,json}, .tflint.hcl, Eclipse's .project and \
                 .factorypath, the code forms (.js, .mjs, .cjs, .ts) of eslint.config, \
                 .eslintrc, prettier.config, .prettierrc, stylelint.config, .stylelintrc and \
                 tailwind.config, and pyproject.toml's, setup.cfg's and tox.ini's keys that load \
                 code (pylint's init-hook and load-plugins, mypy's plugins, \
                 [flake8:local-plugins]) and the paths the JSON and YAML configs of ESLint, \
                 Prettier, Stylelint, markdownlint, Babel and SWC name under keys that load code \
                 (also in package.json's and package.yaml's sections of them); the rest of those files stays writable)"
            }
            Self::DirectoryHooks => {
                "directory-entry hooks: .envrc, .env (oh-my-zsh's dotenv, autoenv and aider \
                 load it by themselves), .envrc.local (what .envrc files source), .autoenv.zsh, .autoenv_leave.zsh, .rvmrc, \
                 .env.leave, RVM's .ruby-env and .versions.conf, .rbenv-vars, \
                 devbox.json (its init_hook), \
                 .shadowenv.d/, .direnv/ (nix-direnv's cached profiles), mise's mise.toml, .mise.toml, mise.*.toml, \
                 .mise/, .config/mise/, mise/config.toml, .rtx.toml, and .tool-versions"
            }
            Self::PythonStartup => {
                "Python environments: everything below site-packages or dist-packages \
                 (.pth files, the modules they import, installed packages), pyvenv.cfg, \
                 sitecustomize and usercustomize modules anywhere (.py, .pyc, extension \
                 modules, packages), bin/activate* scripts, \
                 every file in the bin/ or Scripts/ of a virtual environment (a directory \
                 holding pyvenv.cfg) or a conda environment (holding conda-meta/), conda's \
                 activate.d/"
            }
            Self::GitHooks => {
                "git hooks and their managers' places: .git/hooks, .githooks/, husky's \
                 .husky/, .huskyrc* and husky.config.*, pre-commit's \
                 .pre-commit-config.y(a)ml, lefthook's (.)lefthook(-local).{yml,yaml,toml,json,\
                 jsonc} and script dirs .lefthook/ and .lefthook-local/, lint-staged's \
                 .lintstagedrc* and lint-staged.config.*, nano-staged's .nanostagedrc and \
                 (.)nano-staged.*, commitlint's .commitlintrc*, commitlint.config.* and \
                 .config/commitlintrc*, (.)simple-git-hooks.*, hk's hk.pkl, rusty-hook's \
                 .rusty-hook.toml, cargo-husky's .cargo-husky/, CaptainHook's captainhook.json, \
                 GrumPHP's grumphp.yml(.dist), overcommit's .overcommit.yml and .git-hooks/, \
                 icefox git-hooks' git_hooks/, mookme's .mookme.json and .hooks/, .gitlint, \
                 package.json's and package.yaml's lint-staged, nano-staged, husky, commitlint, \
                 simple-git-hooks, pre-commit, pre-push, gitHooks and ghooks sections (the rest \
                 of those files stays writable)"
            }
            Self::ShellStartup => {
                "shell, REPL and debugger start-up files read from the working directory: \
                 .pdbrc, .perldb, .Rprofile, .Renviron, .irbrc, .pryrc, .iex.exs, .ghci, \
                 .ocamlinit, .octaverc, .gdbinit, .lldbinit, Python's REPL modules (_pyrepl, readline.py, rlcompleter.py, traceback.py, __future__.py, inspect.py), and .bashrc, .bash_profile, .bash_login, .bash_logout, \
                 .profile, .zshrc, .zshenv, .zprofile, .zlogin, .zlogout, .kshrc, .cshrc, \
                 .tcshrc"
            }
            Self::ToolchainConfig => {
                "toolchain and package-manager configuration naming programs: \
                 .cargo/config.toml, .cargo/config, rust-toolchain.toml, rust-toolchain, \
                 .npmrc, .yarnrc, .yarnrc.yml, .pnpmfile.cjs, bunfig.toml, .bazeliskrc, \
                 .bazelversion, .bazelrc, Maven's .mvn/jvm.config, .mvn/maven.config and \
                 .mvn/extensions.xml, the Gradle and Maven wrappers' properties and jars, \
                 gradle-daemon-jvm.properties, sbt's and mill's .jvmopts, .sbtopts, .sbtrc, \
                 .mill-jvm-opts, build servers' .bsp/, corepack's .corepack.env, ansible.cfg, \
                 a Python environment's pip.conf, .bundle/config"
            }
            Self::VcsConfig => {
                "version-control repositories' own files: every file of a directory git \
                 takes as a repository (HEAD with objects/ and refs/, or with commondir) or \
                 that would become one, .hg/, .jj/, .sl/"
            }
            Self::InstalledPackages => {
                "installed JavaScript packages: everything below node_modules/ and .yarn/ \
                 (releases, plugins, patches, the zero-install cache, editor SDKs), yarn's \
                 .pnp.cjs and .pnp.loader.mjs"
            }
            Self::StartupLinks => {
                "targets of symlinks a home holds in its start-up places: every dot entry of \
                 its top level (~/.gdbinit), anything under ~/.config, and the start-up \
                 directories (~/.local/bin/, ~/.local/share/systemd/...), where the link's \
                 owner owns the target, also one that does not exist yet: they run at login, \
                 shell or tool start as if they were there; and the files a home's tool \
                 configuration names by an absolute or ~ path (~/.ssh/config's ProxyCommand \
                 and Include, ~/.vimrc's source, nvim's init.lua, ~/.tmux.conf, ~/.npmrc's \
                 node-options, ~/.irbrc, ~/.gdbinit, ~/.emacs, ~/.cargo/config.toml, \
                 ~/.kube/config, ~/.aws/config...), and what those files name in turn"
            }
        }
    }

    fn bit(self) -> u16 {
        1 << (self as u8)
    }
}

/// Directories every entry below which is an auto-run place, by class.
const DIRS: &[(&str, AutorunClass)] = &[
    ("_pyrepl", AutorunClass::ShellStartup),
    (".claude", AutorunClass::AgentConfig),
    (".cursor", AutorunClass::AgentConfig),
    (".gemini", AutorunClass::AgentConfig),
    (".codex", AutorunClass::AgentConfig),
    (".kiro", AutorunClass::AgentConfig),
    (".continue", AutorunClass::AgentConfig),
    (".windsurf", AutorunClass::AgentConfig),
    (".roo", AutorunClass::AgentConfig),
    (".kilocode", AutorunClass::AgentConfig),
    (".amazonq", AutorunClass::AgentConfig),
    (".opencode", AutorunClass::AgentConfig),
    (".qwen", AutorunClass::AgentConfig),
    (".iflow", AutorunClass::AgentConfig),
    (".factory", AutorunClass::AgentConfig),
    (".junie", AutorunClass::AgentConfig),
    (".amp", AutorunClass::AgentConfig),
    (".trae", AutorunClass::AgentConfig),
    (".augment", AutorunClass::AgentConfig),
    (".openhands", AutorunClass::AgentConfig),
    // CodeBuddy Code runs hooks from its project settings, like `.qwen/` (red team 27).
    (".codebuddy", AutorunClass::AgentConfig),
    // Letta Code runs hooks from its project settings; Mistral Vibe starts the stdio MCP servers
    // its project config names once the folder is trusted; goose, Kimi CLI and Rovo Dev keep
    // agent settings (extensions, MCP servers) there too (red team 28).
    (".letta", AutorunClass::AgentConfig),
    (".vibe", AutorunClass::AgentConfig),
    (".goose", AutorunClass::AgentConfig),
    (".kimi", AutorunClass::AgentConfig),
    (".rovodev", AutorunClass::AgentConfig),
    (".vscode", AutorunClass::EditorConfig),
    (".idea", AutorunClass::EditorConfig),
    (".zed", AutorunClass::EditorConfig),
    (".fleet", AutorunClass::EditorConfig),
    (".helix", AutorunClass::EditorConfig),
    (".devcontainer", AutorunClass::EditorConfig),
    (".theia", AutorunClass::EditorConfig),
    (".vs", AutorunClass::EditorConfig),
    (".externaltoolbuilders", AutorunClass::EditorConfig),
    (".shadowenv.d", AutorunClass::DirectoryHooks),
    (".direnv", AutorunClass::DirectoryHooks),
    // flox's environment: its manifest's on-activate hook runs when flox activates it on `cd`
    // (red team 27).
    (".flox", AutorunClass::DirectoryHooks),
    (".bsp", AutorunClass::ToolchainConfig),
    // A package of these names anywhere on an interpreter's path runs at its every start.
    ("sitecustomize", AutorunClass::PythonStartup),
    ("usercustomize", AutorunClass::PythonStartup),
    ("node_modules", AutorunClass::InstalledPackages),
    (".yarn", AutorunClass::InstalledPackages),
    (".mise", AutorunClass::DirectoryHooks),
    (".hg", AutorunClass::VcsConfig),
    (".jj", AutorunClass::VcsConfig),
    (".sl", AutorunClass::VcsConfig),
];

/// File names that are auto-run places wherever they are, by class.
const FILES: &[(&str, AutorunClass)] = &[
    (".mcp.json", AutorunClass::AgentConfig),
    (".aider.conf.yml", AutorunClass::AgentConfig),
    ("opencode.json", AutorunClass::AgentConfig),
    ("opencode.jsonc", AutorunClass::AgentConfig),
    (".opencode.json", AutorunClass::AgentConfig),
    (".opencode.jsonc", AutorunClass::AgentConfig),
    ("crush.json", AutorunClass::AgentConfig),
    (".crush.json", AutorunClass::AgentConfig),
    (".continuerc.json", AutorunClass::AgentConfig),
    (".devcontainer.json", AutorunClass::EditorConfig),
    (".nvim.lua", AutorunClass::EditorConfig),
    (".nvimrc", AutorunClass::EditorConfig),
    (".exrc", AutorunClass::EditorConfig),
    (".vimrc", AutorunClass::EditorConfig),
    ("_vimrc", AutorunClass::EditorConfig),
    (".gvimrc", AutorunClass::EditorConfig),
    ("_gvimrc", AutorunClass::EditorConfig),
    (".lazy.lua", AutorunClass::EditorConfig),
    ("_exrc", AutorunClass::EditorConfig),
    (".kateproject", AutorunClass::EditorConfig),
    ("hie.yaml", AutorunClass::EditorConfig),
    (".hie-bios", AutorunClass::EditorConfig),
    (".dir-locals.el", AutorunClass::EditorConfig),
    (".dir-locals-2.el", AutorunClass::EditorConfig),
    // lazygit loads it from the repository and every directory above it when it opens, and
    // runs `git.paging.pager`, `os.*` and custom commands from it (red team 25 B8).
    (".lazygit.yml", AutorunClass::EditorConfig),
    (".lazygit.yaml", AutorunClass::EditorConfig),
    // rust-analyzer runs `cargo.buildScripts.overrideCommand` when it loads the workspace,
    // `check.overrideCommand` at each save.
    ("rust-analyzer.toml", AutorunClass::EditorConfig),
    (".rust-analyzer.toml", AutorunClass::EditorConfig),
    // lua-language-server runs `runtime.plugin`, a Lua file, when it starts on the project.
    (".luarc.json", AutorunClass::EditorConfig),
    (".luarc.jsonc", AutorunClass::EditorConfig),
    // Vim's localvimrc plugin sources it on entering the directory (with `ask` off, a common
    // setting, without a prompt), like `.exrc`.
    (".lvimrc", AutorunClass::EditorConfig),
    // YouCompleteMe imports it (Python) when a file of the project opens, like `.lvimrc`.
    (".ycm_extra_conf.py", AutorunClass::EditorConfig),
    // Red team 34 B1/B2: linters' and IDEs' configs that run code or name code they load, when
    // the owner lints or an editor extension does on open, save or build. pylint `exec`s
    // `init-hook` and imports `load-plugins` (shared files' keys: [`lint_configs`]).
    ("pylintrc", AutorunClass::EditorConfig),
    (".pylintrc", AutorunClass::EditorConfig),
    ("pylintrc.toml", AutorunClass::EditorConfig),
    (".pylintrc.toml", AutorunClass::EditorConfig),
    // mypy imports `plugins` (a module or a `.py` path) and runs `python_executable`.
    ("mypy.ini", AutorunClass::EditorConfig),
    (".mypy.ini", AutorunClass::EditorConfig),
    // flake8 imports `[flake8:local-plugins]` from its `paths`.
    (".flake8", AutorunClass::EditorConfig),
    // sqlfluff's jinja templater imports the Python modules of `library_path`.
    (".sqlfluff", AutorunClass::EditorConfig),
    // RuboCop and Standard `require` the Ruby files and plugins they name.
    (".rubocop.yml", AutorunClass::EditorConfig),
    (".rubocop_todo.yml", AutorunClass::EditorConfig),
    (".standard.yml", AutorunClass::EditorConfig),
    // PHP-CS-Fixer's configs are PHP code it runs; PHPStan loads `bootstrapFiles` and
    // `includes`; Psalm runs its `autoloader` and plugin classes.
    (".php-cs-fixer.php", AutorunClass::EditorConfig),
    (".php-cs-fixer.dist.php", AutorunClass::EditorConfig),
    (".php_cs", AutorunClass::EditorConfig),
    (".php_cs.dist", AutorunClass::EditorConfig),
    ("phpstan.neon", AutorunClass::EditorConfig),
    ("phpstan.neon.dist", AutorunClass::EditorConfig),
    ("phpstan.dist.neon", AutorunClass::EditorConfig),
    ("psalm.xml", AutorunClass::EditorConfig),
    ("psalm.xml.dist", AutorunClass::EditorConfig),
    // Elixir code: the formatter evaluates it at format-on-save, credo when it lints.
    (".formatter.exs", AutorunClass::EditorConfig),
    (".credo.exs", AutorunClass::EditorConfig),
    // ansible-lint imports the rules of `rulesdir`.
    (".ansible-lint", AutorunClass::EditorConfig),
    (".ansible-lint.yml", AutorunClass::EditorConfig),
    (".ansible-lint.yaml", AutorunClass::EditorConfig),
    // luacheck runs it as Lua; latexmk as Perl (LaTeX Workshop runs latexmk on save); lintr
    // evaluates its values as R (the R language server lints on open).
    (".luacheckrc", AutorunClass::EditorConfig),
    (".latexmkrc", AutorunClass::EditorConfig),
    ("latexmkrc", AutorunClass::EditorConfig),
    (".lintr", AutorunClass::EditorConfig),
    // golangci-lint loads the Go plugins (`.so`) its custom linters name; TFLint runs the
    // plugin binaries of its `plugin_dir`.
    (".golangci.yml", AutorunClass::EditorConfig),
    (".golangci.yaml", AutorunClass::EditorConfig),
    (".golangci.toml", AutorunClass::EditorConfig),
    (".golangci.json", AutorunClass::EditorConfig),
    (".tflint.hcl", AutorunClass::EditorConfig),
    // Eclipse (and VS Code's Java language server) run `.project`'s builders at auto-build: an
    // external tool builder names any launch file of the project or is inline; `.factorypath`
    // names annotation processor jars the build runs.
    (".project", AutorunClass::EditorConfig),
    (".factorypath", AutorunClass::EditorConfig),
    // Red team 43a B3: JavaScript linters' and formatters' configs in code form, which the
    // editors' ESLint, Prettier, Stylelint and Tailwind extensions load in their servers on
    // opening the project (or any file of it) or at format-on-save — like pylint's and
    // RuboCop's above. Their JSON and YAML forms stay writable (data; the plugins they name
    // are installed packages). Test runners' and bundlers' configs (jest, vitest, vite) stay
    // writable too: what their extensions run is the project's tests, its own code anyway.
    ("eslint.config.js", AutorunClass::EditorConfig),
    ("eslint.config.mjs", AutorunClass::EditorConfig),
    ("eslint.config.cjs", AutorunClass::EditorConfig),
    ("eslint.config.ts", AutorunClass::EditorConfig),
    ("eslint.config.mts", AutorunClass::EditorConfig),
    ("eslint.config.cts", AutorunClass::EditorConfig),
    (".eslintrc.js", AutorunClass::EditorConfig),
    (".eslintrc.cjs", AutorunClass::EditorConfig),
    ("prettier.config.js", AutorunClass::EditorConfig),
    ("prettier.config.mjs", AutorunClass::EditorConfig),
    ("prettier.config.cjs", AutorunClass::EditorConfig),
    ("prettier.config.ts", AutorunClass::EditorConfig),
    ("prettier.config.mts", AutorunClass::EditorConfig),
    ("prettier.config.cts", AutorunClass::EditorConfig),
    (".prettierrc.js", AutorunClass::EditorConfig),
    (".prettierrc.mjs", AutorunClass::EditorConfig),
    (".prettierrc.cjs", AutorunClass::EditorConfig),
    (".prettierrc.ts", AutorunClass::EditorConfig),
    (".prettierrc.mts", AutorunClass::EditorConfig),
    (".prettierrc.cts", AutorunClass::EditorConfig),
    ("stylelint.config.js", AutorunClass::EditorConfig),
    ("stylelint.config.mjs", AutorunClass::EditorConfig),
    ("stylelint.config.cjs", AutorunClass::EditorConfig),
    (".stylelintrc.js", AutorunClass::EditorConfig),
    (".stylelintrc.mjs", AutorunClass::EditorConfig),
    (".stylelintrc.cjs", AutorunClass::EditorConfig),
    ("tailwind.config.js", AutorunClass::EditorConfig),
    ("tailwind.config.cjs", AutorunClass::EditorConfig),
    ("tailwind.config.mjs", AutorunClass::EditorConfig),
    ("tailwind.config.ts", AutorunClass::EditorConfig),
    (".envrc", AutorunClass::DirectoryHooks),
    (".env", AutorunClass::DirectoryHooks),
    (".autoenv.zsh", AutorunClass::DirectoryHooks),
    (".autoenv_leave.zsh", AutorunClass::DirectoryHooks),
    // autoenv sources it on leaving the directory (`AUTOENV_ENABLE_LEAVE`, red team 43a B4).
    (".env.leave", AutorunClass::DirectoryHooks),
    (".rvmrc", AutorunClass::DirectoryHooks),
    // RVM sets the variables these name (`RUBYOPT=-r...`, `env-RUBYOPT=`) on `cd` (red team 34 B2).
    (".ruby-env", AutorunClass::DirectoryHooks),
    (".versions.conf", AutorunClass::DirectoryHooks),
    // What an `.envrc` commonly sources (`source_env_if_exists .envrc.local`), red team 28.
    (".envrc.local", AutorunClass::DirectoryHooks),
    // rbenv-vars sets these for every `ruby` started below the directory (RUBYOPT=-r...).
    (".rbenv-vars", AutorunClass::DirectoryHooks),
    // devbox's `init_hook` runs at every directory entry with its direnv integration.
    ("devbox.json", AutorunClass::DirectoryHooks),
    ("mise.toml", AutorunClass::DirectoryHooks),
    (".mise.toml", AutorunClass::DirectoryHooks),
    ("mise.local.toml", AutorunClass::DirectoryHooks),
    (".mise.local.toml", AutorunClass::DirectoryHooks),
    (".rtx.toml", AutorunClass::DirectoryHooks),
    (".tool-versions", AutorunClass::DirectoryHooks),
    ("pyvenv.cfg", AutorunClass::PythonStartup),
    (".bashrc", AutorunClass::ShellStartup),
    (".bash_profile", AutorunClass::ShellStartup),
    (".bash_login", AutorunClass::ShellStartup),
    (".bash_logout", AutorunClass::ShellStartup),
    (".profile", AutorunClass::ShellStartup),
    (".zshrc", AutorunClass::ShellStartup),
    (".zshenv", AutorunClass::ShellStartup),
    (".zprofile", AutorunClass::ShellStartup),
    (".zlogin", AutorunClass::ShellStartup),
    (".zlogout", AutorunClass::ShellStartup),
    (".kshrc", AutorunClass::ShellStartup),
    (".cshrc", AutorunClass::ShellStartup),
    (".tcshrc", AutorunClass::ShellStartup),
    (".pdbrc", AutorunClass::ShellStartup),
    (".perldb", AutorunClass::ShellStartup),
    (".rprofile", AutorunClass::ShellStartup),
    (".renviron", AutorunClass::ShellStartup),
    (".irbrc", AutorunClass::ShellStartup),
    (".pryrc", AutorunClass::ShellStartup),
    (".iex.exs", AutorunClass::ShellStartup),
    (".ghci", AutorunClass::ShellStartup),
    (".ocamlinit", AutorunClass::ShellStartup),
    (".octaverc", AutorunClass::ShellStartup),
    (".gdbinit", AutorunClass::ShellStartup),
    (".lldbinit", AutorunClass::ShellStartup),
    // The Python REPL imports these from its working directory at every interactive start
    // (3.13's `_pyrepl`; `readline`/`rlcompleter` before it), ahead of the standard library.
    ("_pyrepl.py", AutorunClass::ShellStartup),
    ("readline.py", AutorunClass::ShellStartup),
    ("rlcompleter.py", AutorunClass::ShellStartup),
    ("traceback.py", AutorunClass::ShellStartup),
    ("__future__.py", AutorunClass::ShellStartup),
    ("inspect.py", AutorunClass::ShellStartup),
    ("rust-toolchain.toml", AutorunClass::ToolchainConfig),
    ("rust-toolchain", AutorunClass::ToolchainConfig),
    (".npmrc", AutorunClass::ToolchainConfig),
    (".yarnrc", AutorunClass::ToolchainConfig),
    (".yarnrc.yml", AutorunClass::ToolchainConfig),
    (".pnpmfile.cjs", AutorunClass::ToolchainConfig),
    (".pnpmfile.mjs", AutorunClass::ToolchainConfig),
    ("bunfig.toml", AutorunClass::ToolchainConfig),
    (".bunfig.toml", AutorunClass::ToolchainConfig),
    (".bazeliskrc", AutorunClass::ToolchainConfig),
    (".bazelversion", AutorunClass::ToolchainConfig),
    (".bazelrc", AutorunClass::ToolchainConfig),
    ("gradle-wrapper.properties", AutorunClass::ToolchainConfig),
    ("gradle-wrapper.jar", AutorunClass::ToolchainConfig),
    ("maven-wrapper.properties", AutorunClass::ToolchainConfig),
    ("maven-wrapper.jar", AutorunClass::ToolchainConfig),
    (
        "gradle-daemon-jvm.properties",
        AutorunClass::ToolchainConfig,
    ),
    (".jvmopts", AutorunClass::ToolchainConfig),
    (".sbtopts", AutorunClass::ToolchainConfig),
    (".sbtrc", AutorunClass::ToolchainConfig),
    (".mill-jvm-opts", AutorunClass::ToolchainConfig),
    (".corepack.env", AutorunClass::ToolchainConfig),
    ("ansible.cfg", AutorunClass::ToolchainConfig),
    (".pnp.cjs", AutorunClass::InstalledPackages),
    (".pnp.loader.mjs", AutorunClass::InstalledPackages),
];

/// Files that are auto-run places in a directory of this name: `(directory, file)`.
const FILES_IN: &[(&str, &str, AutorunClass)] = &[
    (".cargo", "config.toml", AutorunClass::ToolchainConfig),
    (".cargo", "config", AutorunClass::ToolchainConfig),
    (".mvn", "jvm.config", AutorunClass::ToolchainConfig),
    (".mvn", "maven.config", AutorunClass::ToolchainConfig),
    (".mvn", "extensions.xml", AutorunClass::ToolchainConfig),
    (".bundle", "config", AutorunClass::ToolchainConfig),
    // A virtual environment's activation scripts, also of one without pyvenv.cfg: auto-venv
    // shell plugins source `venv/bin/activate` on entering the directory (red team 28).
    ("bin", "activate", AutorunClass::PythonStartup),
    ("bin", "activate.fish", AutorunClass::PythonStartup),
    ("bin", "activate.csh", AutorunClass::PythonStartup),
    ("bin", "activate.nu", AutorunClass::PythonStartup),
    ("bin", "activate.ps1", AutorunClass::PythonStartup),
    (".lsp", "config.edn", AutorunClass::EditorConfig),
    // mypy's and ansible-lint's configs in `~/.config` (or `$XDG_CONFIG_HOME`).
    ("mypy", "config", AutorunClass::EditorConfig),
    (".config", "ansible-lint.yml", AutorunClass::EditorConfig),
    (".config", "ansible-lint.yaml", AutorunClass::EditorConfig),
    (".vim", "coc-settings.json", AutorunClass::EditorConfig),
    ("mise", "config.toml", AutorunClass::DirectoryHooks),
    ("mise", "config.local.toml", AutorunClass::DirectoryHooks),
];

/// Directories that are auto-run places below a directory of this name: `(parent, directory)`.
const DIRS_IN: &[(&str, &str, AutorunClass)] = &[
    (".clinerules", "hooks", AutorunClass::AgentConfig),
    (".github", "hooks", AutorunClass::AgentConfig),
    (".config", "mise", AutorunClass::DirectoryHooks),
    ("conda", "activate.d", AutorunClass::PythonStartup),
    ("conda", "deactivate.d", AutorunClass::PythonStartup),
];

/// Instruction files: text a coding agent reads, never runs. Writable everywhere, also as a
/// direct child of an agent's directory (`.claude/CLAUDE.md`).
const INSTRUCTION_FILES: &[&str] = &[
    "claude.md",
    "claude.local.md",
    "agents.md",
    "agents.override.md",
    "gemini.md",
    ".cursorrules",
    ".windsurfrules",
    ".clinerules",
    "copilot-instructions.md",
    "qwen.md",
    "iflow.md",
    "guidelines.md",
];

/// An agent directory's sub-directory of instruction files (`.cursor/rules/`, `.claude/rules/`,
/// `.windsurf/rules/`, `.roo/rules/`, `.amazonq/rules/`): writable.
const INSTRUCTION_DIR: &str = "rules";

/// Directories of installed Python code: all below them runs at interpreter start or import.
const SITE_DIRS: &[&str] = &["site-packages", "dist-packages"];

/// The class of the auto-run place `path` is, or lies inside, by its names alone; `None` for an
/// ordinary path. `.git` components are not matched here: the write policy refuses all of
/// `.git` first. What a path is reachable as through symlinks, and directories recognised by
/// their content (an embedded git repository, a virtual environment), are the write policy's
/// part ([`crate::write_path`], [`symlinks`], [`repository`]).
pub fn autorun_class(path: &Path) -> Option<AutorunClass> {
    let names: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(fold(name)),
            _ => None,
        })
        .collect();
    let (last, dirs) = names.split_last()?;
    if let Some(class) = dir_class(&names) {
        return Some(class);
    }
    // The final component may itself be one of the directories (Write never targets a
    // directory, but the check is also asked about roots).
    if let Some((_, class)) = DIRS
        .iter()
        .chain(FILES.iter())
        .find(|(name, _)| last == name)
    {
        return Some(*class);
    }
    if is_mise_config(last) {
        return Some(AutorunClass::DirectoryHooks);
    }
    if is_site_customize(last) {
        return Some(AutorunClass::PythonStartup);
    }
    if hook_managers::hook_manager_place(&names) {
        return Some(AutorunClass::GitHooks);
    }
    // Project files of editors that carry settings, tasks or build systems like `.vscode/`
    // does: VS Code's workspace, Sublime Text's project.
    if [".code-workspace", ".sublime-project"]
        .iter()
        .any(|suffix| last.ends_with(suffix))
    {
        return Some(AutorunClass::EditorConfig);
    }
    if let Some(parent) = dirs.last()
        && let Some((_, _, class)) = FILES_IN
            .iter()
            .find(|(dir, file, _)| parent == dir && last == file)
    {
        return Some(*class);
    }
    // Everything below a `site-packages`: `.pth` files run the modules they name at every
    // interpreter start, and any installed module runs when imported (a venv's `bin/` is
    // recognised by content: [`repository::venv_class`]).
    if dirs.iter().any(|dir| SITE_DIRS.contains(&dir.as_str())) {
        return Some(AutorunClass::PythonStartup);
    }
    None
}

/// The class of the first auto-run directory among the parents of the last name, leaving out
/// instruction files inside an agent's directory.
fn dir_class(names: &[String]) -> Option<AutorunClass> {
    let (last, dirs) = names.split_last()?;
    let mut found: Vec<(usize, AutorunClass)> = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        // Yarn's deferred version bumps are plain data the release workflow commits.
        let yarn_versions = dir == ".yarn" && dirs.get(i + 1).is_some_and(|d| d == "versions");
        if let Some((_, class)) = DIRS.iter().find(|(name, _)| dir == name)
            && !yarn_versions
        {
            found.push((i, *class));
        }
        if i > 0
            && let Some((_, _, class)) = DIRS_IN
                .iter()
                .find(|(parent, name, _)| &dirs[i - 1] == parent && dir == name)
        {
            found.push((i, *class));
        }
    }
    let &(first, class) = found.first()?;
    // One agent directory only, and the file is an instruction file in it: its direct child
    // (`.claude/CLAUDE.md`) or anything in its `rules/` directory. Hook directories inside
    // another one (`.clinerules/hooks/`, `.github/hooks/`) hold no instructions.
    let instruction = found.len() == 1
        && class == AutorunClass::AgentConfig
        && DIRS.iter().any(|(name, _)| *name == dirs[first])
        && ((first + 1 == dirs.len() && INSTRUCTION_FILES.contains(&last.as_str()))
            || (first + 1 < dirs.len() && dirs[first + 1] == INSTRUCTION_DIR));
    (!instruction).then_some(class)
}

/// mise's per-environment and legacy config names: `mise.<env>.toml`, `.mise.<env>.toml`,
/// `.rtx.<env>.toml` (the plain names are in [`FILES`]).
fn is_mise_config(name: &str) -> bool {
    name.ends_with(".toml")
        && ["mise.", ".mise.", ".rtx."]
            .iter()
            .any(|prefix| name.starts_with(prefix))
}

/// Modules Python imports at every interpreter start from anywhere on its path — a project's
/// `src/` named by an editable install's `.pth`, `PYTHONPATH`, a venv's path (red team 28 B1:
/// the owner's `python3` ran a session's `src/usercustomize.py`): the source, a sourceless or
/// cached `.pyc` (`__pycache__/sitecustomize.cpython-312.pyc`, which runs if its header matches
/// the source's size and time) and an extension module (`sitecustomize.cpython-312-x86_64-linux-
/// gnu.so`).
fn is_site_customize(name: &str) -> bool {
    ["sitecustomize.", "usercustomize."]
        .iter()
        .any(|prefix| name.starts_with(prefix))
        && [".py", ".pyc", ".pyo", ".pyw", ".so", ".pyd"]
            .iter()
            .any(|suffix| name.ends_with(suffix))
}

/// Comparison key of a name: case- and normalisation-insensitive, as on a case-insensitive file
/// system (the same folding the macOS path policy uses).
fn fold(name: &OsStr) -> String {
    use std::os::unix::ffi::OsStrExt;
    String::from_utf8_lossy(&crate::fold::fold_insensitive(name.as_bytes())).into_owned()
}

/// The classes the owner allowed sessions to write. The default allows none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct AutorunAllowed(u16);

impl AutorunAllowed {
    /// Nothing allowed (the default).
    pub const NONE: Self = Self(0);

    pub fn all() -> Self {
        Self(AutorunClass::ALL.iter().fold(0, |acc, c| acc | c.bit()))
    }

    pub fn allows(self, class: AutorunClass) -> bool {
        self.0 & class.bit() != 0
    }

    /// The allowed classes, in [`AutorunClass::ALL`] order.
    pub fn classes(self) -> Vec<AutorunClass> {
        AutorunClass::ALL
            .into_iter()
            .filter(|c| self.allows(*c))
            .collect()
    }

    /// The classes' names, as [`Self::parse`] reads them (empty: none).
    pub fn names(self) -> Vec<&'static str> {
        self.classes().into_iter().map(AutorunClass::name).collect()
    }

    /// Parse the owner's value: comma-separated class names, or `all`; empty means none. An
    /// unknown name is an error (the gateway refuses to start rather than guess).
    pub fn parse(value: &str) -> Result<Self, String> {
        let mut out = Self::NONE;
        for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if item == "all" {
                out = Self::all();
                continue;
            }
            match AutorunClass::ALL.iter().find(|c| c.name() == item) {
                Some(class) => out.0 |= class.bit(),
                None => {
                    let known: Vec<&str> = AutorunClass::ALL.iter().map(|c| c.name()).collect();
                    return Err(format!(
                        "{ALLOW_ENV}: unknown class {item:?}; use `all` or a comma-separated \
                         list of {}",
                        known.join(", ")
                    ));
                }
            }
        }
        Ok(out)
    }

    /// From names as stored in a broker spec (unknown names are ignored: a newer gateway's
    /// class a broker does not know is refused, never allowed by accident).
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut out = Self::NONE;
        for name in names {
            if name == "all" {
                return Self::all();
            }
            if let Some(class) = AutorunClass::ALL.iter().find(|c| c.name() == name) {
                out.0 |= class.bit();
            }
        }
        out
    }
}

/// A file a repository holds and a tool reads (a git config, a gitfile, `.yarnrc`), as its
/// text; symlinks followed, as git and yarn follow them. Opened `O_NONBLOCK` and checked to be
/// a regular file, so a FIFO or a device in its place never hangs a write: such a file reads as
/// absent (the tool that reads it would hang on it too, running nothing).
fn read_text(path: &Path) -> Option<String> {
    read_head(path, u64::MAX)
}

/// [`read_head`] of a text file: `None` for a binary (an ELF, any NUL in its first KiB), which
/// no shell or tool reads as configuration; a Latin-1 byte is text (a `.vimrc` with an accented
/// comment had named nothing: red team 47b B13, B14) — reading a program named by a
/// start-up file or a tool config (`exec /bin/bash`, `ProxyCommand /usr/bin/nc`) as text had
/// passed the bounds, and past them every write was refused (red team 47a).
fn read_text_head(path: &Path, limit: u64) -> Option<String> {
    let text = read_head(path, limit)?;
    let head: String = text.chars().take(1024).collect();
    let binary = head.starts_with("\u{7f}ELF") || head.contains('\0');
    (!binary).then_some(text)
}

/// The first `limit` bytes of such a file, as text (a `#!` line needs no more).
fn read_head(path: &Path, limit: u64) -> Option<String> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    crate::look::answers(path).ok()?;
    #[allow(clippy::disallowed_methods)] // looked at through the gate just above
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The system's root, where the system-wide start-up files and schedulers are read
/// ([`env_files`]' `/etc/profile`, [`startup_links`]' `/etc/crontab`): `/`; in a unit test,
/// the directory the test set on its thread, and none by default (the host's own `/etc` would
/// change what each test finds).
fn system_root() -> PathBuf {
    #[cfg(test)]
    return TEST_SYSTEM_ROOT
        .with(|root| root.borrow().clone())
        .unwrap_or_else(|| PathBuf::from("/nonexistent/system-root"));
    #[cfg(not(test))]
    PathBuf::from("/")
}

#[cfg(test)]
thread_local! {
    /// [`system_root`] for the tests of this thread.
    static TEST_SYSTEM_ROOT: std::cell::RefCell<Option<PathBuf>> =
        const { std::cell::RefCell::new(None) };
}

mod env_files;
mod envrc;
mod git_syntax;
pub mod gitconfig;
mod hook_managers;
mod import_roots;
pub mod js_configs;
mod lefthook;
pub(crate) mod link_target;
pub mod lint_configs;
mod namespaces;
pub mod owner_env;
pub mod owner_files;
pub mod package_files;
pub mod package_json;
pub mod package_yaml;
mod programs;
mod pth_code;
pub mod repository;
mod shell_command;
mod shell_words;
pub mod startup_links;
pub mod strict_hooks;
pub mod symlinks;

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
