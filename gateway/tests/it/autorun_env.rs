//! The owner's environment with the real runner (red teams 32, 33): the variables that name
//! code or config the owner's tools run (`PYTHONPATH`, git's config variables and template
//! directory, `ZDOTDIR`, `PERL5LIB`, …) reach the brokers' write rules, and a `.pth` import line
//! is read as Python; the project's own files beside each place stay writable.

use serde_json::{Value, json};

use crate::autorun::{assert_refused, results, write};
use crate::support::*;
use crate::writes::{reply_calls, start_profile};

/// Red team 32: the owner's environment the write rules read (`PYTHONPATH`, `GIT_TEMPLATE_DIR`,
/// git's global config variables) never reached the broker, started with a cleared environment:
/// the gateway hands them on. With the gateway started with `PYTHONPATH=<root>/src`, a module
/// that shadows one every Python imports there is refused, and with `GIT_TEMPLATE_DIR` in the
/// root its hooks are; the project's own package stays writable.
#[tokio::test(flavor = "multi_thread")]
async fn the_owners_python_path_and_git_template_reach_the_write_rules() {
    let (_repo, root) = crate::writes::repo();
    let (src, template) = (root.join("src"), root.join("template"));
    let startup = root.join("pystartup.py");
    let gw = gateway_with(&[
        ("PYTHONPATH", src.to_str().unwrap()),
        ("GIT_TEMPLATE_DIR", template.to_str().unwrap()),
        ("PYTHONSTARTUP", startup.to_str().unwrap()),
    ])
    .await;
    let chat = chatgpt(&gw).await;
    let v = start_profile(&chat, &root, "direct_write", "owner-env-start").await;
    let calls = json!([
        write(&src.join("encodings/__init__.py"), "print('x')\n"),
        write(
            &template.join("hooks/post-checkout"),
            "#!/bin/sh\ntouch /tmp/pwned\n"
        ),
        write(&src.join("mypkg/core.py"), "X = 1\n"),
        // Red team 33: a standard-library name (read from the system's interpreters, not only
        // beside a site dir) and the file PYTHONSTARTUP names.
        write(&src.join("json/__init__.py"), "print('x')\n"),
        write(&startup, "print('x')\n"),
    ]);
    let v = reply_calls(&chat, &v, "owner-env-r1", calls).await;
    let got = results(&v);
    assert_eq!(got.len(), 5, "{v}");
    assert_refused(&got[0], "src/encodings/__init__.py", "python_startup");
    assert_refused(&got[1], "template/hooks/post-checkout", "git_hooks");
    assert_eq!(got[2]["status"], "ok", "{}", got[2]);
    assert_refused(&got[3], "src/json/__init__.py", "python_startup");
    assert_refused(&got[4], "pystartup.py", "python_startup");
    assert!(!src.join("json").exists() && !startup.exists());
    assert!(!src.join("encodings").exists() && !template.exists());
    chat.stop(&session_id(&v), &lease_id(&v), "owner-env-stop", None)
        .await
        .unwrap();
}

/// Red team 33: git's config variables (`GIT_CONFIG_COUNT` with its numbered keys,
/// `GIT_CONFIG_PARAMETERS` in git's quoted form) and the owner's variables that name code
/// (`ZDOTDIR`'s start-up files, a `PERL5LIB` dir ahead of Perl's library; red team 35's
/// `PERL5OPT=-Mlib=`, `LESSOPEN`, `NPM_CONFIG_USERCONFIG`) reach the brokers' write rules; the
/// project's own module beside them stays writable.
#[tokio::test(flavor = "multi_thread")]
async fn the_owners_git_config_variables_and_code_naming_variables_reach_the_write_rules() {
    let (_repo, root) = crate::writes::repo();
    let (hooks, zsh, perl) = (root.join("hooks"), root.join("zsh"), root.join("perl"));
    let pager = root.join("tools/pager.sh");
    let (plib, less, npmrc) = (
        root.join("plib"),
        root.join("bin/lessfilter"),
        root.join("npmrc"),
    );
    let perl5opt = format!("-w -Mlib={}", plib.display());
    let lessopen = format!("|{} %s", less.display());
    let params = format!("'core.pager'='{} -R'", pager.display());
    let gw = gateway_with(&[
        ("GIT_CONFIG_COUNT", "1"),
        ("GIT_CONFIG_KEY_0", "core.hooksPath"),
        ("GIT_CONFIG_VALUE_0", hooks.to_str().unwrap()),
        ("GIT_CONFIG_PARAMETERS", &params),
        ("ZDOTDIR", zsh.to_str().unwrap()),
        ("PERL5LIB", perl.to_str().unwrap()),
        ("PERL5OPT", &perl5opt),
        ("LESSOPEN", &lessopen),
        ("NPM_CONFIG_USERCONFIG", npmrc.to_str().unwrap()),
    ])
    .await;
    let chat = chatgpt(&gw).await;
    let v = start_profile(&chat, &root, "direct_write", "owner-env2-start").await;
    let calls = json!([
        write(&hooks.join("pre-commit"), "#!/bin/sh\ntouch /tmp/pwned\n"),
        write(&pager, "#!/bin/sh\ntouch /tmp/pwned\n"),
        write(&zsh.join(".zshrc"), "touch /tmp/pwned\n"),
        write(&perl.join("strict.pm"), "system('touch /tmp/pwned'); 1;\n"),
        write(&perl.join("MyApp.pm"), "package MyApp; 1;\n"),
        write(&root.join("tools/format.sh"), "#!/bin/sh\n"),
        write(
            &plib.join("Getopt/Long.pm"),
            "system('touch /tmp/pwned'); 1;\n"
        ),
        write(&less, "#!/bin/sh\ntouch /tmp/pwned\n"),
        write(&npmrc, "node-options=--require=/tmp/r.js\n"),
    ]);
    let v = reply_calls(&chat, &v, "owner-env2-r1", calls).await;
    let got = results(&v);
    assert_eq!(got.len(), 9, "{v}");
    assert_refused(&got[0], "hooks/pre-commit", "git_hooks");
    assert_refused(&got[1], "tools/pager.sh", "git_hooks");
    assert_refused(&got[2], "zsh/.zshrc", "shell_startup");
    assert_refused(&got[3], "perl/strict.pm", "shell_startup");
    assert_refused(&got[6], "plib/Getopt/Long.pm", "shell_startup");
    assert_refused(&got[7], "bin/lessfilter", "git_hooks");
    assert_refused(&got[8], "npmrc", "toolchain_config");
    for (i, rel) in [(4, "perl/MyApp.pm"), (5, "tools/format.sh")] {
        assert_eq!(got[i]["status"], "ok", "{rel}: {}", got[i]);
        assert!(root.join(rel).is_file(), "{rel}");
    }
    assert!(!hooks.exists() && !pager.exists() && !zsh.exists());
    assert!(!perl.join("strict.pm").exists());
    assert!(!plib.exists() && !less.exists() && !npmrc.exists());
    chat.stop(&session_id(&v), &lease_id(&v), "owner-env2-stop", None)
        .await
        .unwrap();
}

/// Red team 33 `pthparse`: a `.pth` import line is read as Python (escapes inside its strings,
/// joined literals, exec'd code); what it imports, in a directory on every Python's path, is
/// refused, and a line that builds its module's name at run time refuses every module there;
/// the project's own package's modules stay writable.
#[tokio::test(flavor = "multi_thread")]
async fn a_pth_import_line_is_read_as_python() {
    let (_repo, root) = crate::writes::repo();
    let site = root.join(".venv/lib/python3.12/site-packages");
    std::fs::create_dir_all(&site).unwrap();
    let src = root.join("src");
    let pth = format!(
        "{}\nimport os;exec(\"import sys\\nimport colorama\");exec(\"import\\x20truststore\");__import__(\"sentry\"+\"_sdk\")\n",
        src.display()
    );
    std::fs::write(site.join("tools.pth"), pth).unwrap();
    let gw = gateway_with(&[]).await;
    let chat = chatgpt(&gw).await;
    let v = start_profile(&chat, &root, "direct_write", "pth-start").await;
    let calls = json!([
        write(&src.join("colorama/__init__.py"), "print('x')\n"),
        write(&src.join("truststore.py"), "print('x')\n"),
        write(&src.join("sentry_sdk/__init__.py"), "print('x')\n"),
        write(&src.join("mypkg/core.py"), "X = 1\n"),
    ]);
    let v = reply_calls(&chat, &v, "pth-r1", calls).await;
    let got = results(&v);
    assert_eq!(got.len(), 4, "{v}");
    assert_refused(&got[0], "src/colorama/__init__.py", "python_startup");
    assert_refused(&got[1], "src/truststore.py", "python_startup");
    assert_refused(&got[2], "src/sentry_sdk/__init__.py", "python_startup");
    assert_eq!(got[3]["status"], "ok", "{}", got[3]);
    // An opaque line: any module there may run; the package's other modules stay writable.
    std::fs::write(
        site.join("zz.pth"),
        "import os;__import__(chr(121)+'aml')\n",
    )
    .unwrap();
    // The scan is cached for up to 10 s: wait it out.
    tokio::time::sleep(std::time::Duration::from_secs(11)).await;
    let calls = json!([
        write(&src.join("helpers.py"), "print('x')\n"),
        write(&src.join("mypkg/more.py"), "Y = 1\n"),
    ]);
    let v = reply_calls(&chat, &v, "pth-r2", calls).await;
    let got = results(&v);
    assert_eq!(got.len(), 2, "{v}");
    assert_refused(&got[0], "src/helpers.py", "python_startup");
    let output = got[0]["output"].as_str().unwrap_or_default();
    assert!(output.contains("zz.pth"), "{output}");
    assert_eq!(got[1]["status"], "ok", "{}", got[1]);
    assert!(!src.join("colorama").exists() && !src.join("helpers.py").exists());
    chat.stop(&session_id(&v), &lease_id(&v), "pth-stop", None)
        .await
        .unwrap();
}

/// Red team 33 `pypath2 envrc`: the root's `.envrc` exports `PYTHONPATH` (direnv sets it at
/// `cd`; the gateway's environment has none): what shadows a module every Python imports in
/// that directory is refused, the project's own package is not.
#[tokio::test(flavor = "multi_thread")]
async fn a_python_path_the_root_s_envrc_exports_reaches_the_write_rules() {
    let (_repo, root) = crate::writes::repo();
    std::fs::write(
        root.join(".envrc"),
        "layout python3\nexport PYTHONPATH=\"$PWD/src:$PYTHONPATH\"\n",
    )
    .unwrap();
    let src = root.join("src");
    let gw = gateway_with(&[]).await;
    let chat = chatgpt(&gw).await;
    let v = start_profile(&chat, &root, "direct_write", "envrc-env-start").await;
    let calls = json!([
        write(&src.join("encodings/__init__.py"), "print('x')\n"),
        write(&src.join("json/__init__.py"), "print('x')\n"),
        write(&src.join("mypkg/core.py"), "X = 1\n"),
    ]);
    let v = reply_calls(&chat, &v, "envrc-env-r1", calls).await;
    let got = results(&v);
    assert_eq!(got.len(), 3, "{v}");
    assert_refused(&got[0], "src/encodings/__init__.py", "python_startup");
    assert_refused(&got[1], "src/json/__init__.py", "python_startup");
    assert_eq!(got[2]["status"], "ok", "{}", got[2]);
    assert!(!src.join("encodings").exists() && !src.join("json").exists());
    chat.stop(&session_id(&v), &lease_id(&v), "envrc-env-stop", None)
        .await
        .unwrap();
}

/// Red team 36: the `.envrc` is read as the shell splits it — a word joined from quoted pieces
/// (`'-Mlib='"$PWD"'/plib'`), direnv's `$(expand_path py)` — and a value built on what is not
/// read (a command's output) refuses every write of the tree, naming the variable.
#[tokio::test(flavor = "multi_thread")]
async fn an_envrc_s_quote_joined_and_computed_values_reach_the_write_rules() {
    let (_repo, root) = crate::writes::repo();
    std::fs::write(
        root.join(".envrc"),
        "export PERL5OPT='-Mlib='\"$PWD\"'/plib'\nPYTHONPATH=$(expand_path py)\nexport PYTHONPATH\n",
    )
    .unwrap();
    let (_other_repo, other) = crate::writes::repo();
    std::fs::write(
        other.join(".envrc"),
        "export PYTHONPATH=\"$(brew --prefix)/src\"\n",
    )
    .unwrap();
    let gw = gateway_with(&[]).await;
    let chat = chatgpt(&gw).await;
    let v = start_profile(&chat, &root, "direct_write", "envrc36-start").await;
    let calls = json!([
        write(&root.join("plib/strict.pm"), "1;\n"),
        write(&root.join("py/json/__init__.py"), "print('x')\n"),
        write(&root.join("plib/MyApp.pm"), "package MyApp; 1;\n"),
    ]);
    let v = reply_calls(&chat, &v, "envrc36-r1", calls).await;
    let got = results(&v);
    assert_eq!(got.len(), 3, "{v}");
    assert_refused(&got[0], "plib/strict.pm", "shell_startup");
    assert_refused(&got[1], "py/json/__init__.py", "python_startup");
    assert_eq!(got[2]["status"], "ok", "{}", got[2]);
    assert!(!root.join("plib/strict.pm").exists() && !root.join("py").exists());
    chat.stop(&session_id(&v), &lease_id(&v), "envrc36-stop", None)
        .await
        .unwrap();

    let before = std::fs::read(other.join("notes.txt")).unwrap();
    let v = start_profile(&chat, &other, "direct_write", "envrc36-start2").await;
    let calls = json!([write(&other.join("notes.txt"), "hello\n")]);
    let v = reply_calls(&chat, &v, "envrc36-r2", calls).await;
    let got = results(&v);
    assert_refused(&got[0], "notes.txt", "python_startup");
    let text = got[0].to_string();
    assert!(text.contains("PYTHONPATH"), "{text}");
    assert_eq!(std::fs::read(other.join("notes.txt")).unwrap(), before);
    chat.stop(&session_id(&v), &lease_id(&v), "envrc36-stop2", None)
        .await
        .unwrap();
}

/// Red team 39: what an `.envrc` makes bash read whatever the command (`export $(grep … |
/// xargs)` of a `.env.local`) is a place, and what that file assigns is the `.envrc`'s — a
/// `NODE_OPTIONS` preload, git's global config by `GIT_CONFIG_GLOBAL`; the repository's top
/// (`$(git rev-parse --show-toplevel)`), which used to refuse every write, is read.
#[tokio::test(flavor = "multi_thread")]
async fn files_an_envrc_makes_bash_read_and_what_they_assign_reach_the_write_rules() {
    let (_repo, root) = crate::writes::repo();
    std::fs::write(
        root.join(".envrc"),
        "export $(grep -v '^#' .env.local | xargs)\n\
         export PYTHONPATH=\"$(git rev-parse --show-toplevel)/src\"\n",
    )
    .unwrap();
    std::fs::write(
        root.join(".env.local"),
        "# local\nNODE_OPTIONS=--require=./tools/env.js\nGIT_CONFIG_GLOBAL=./dev.gitconfig\n",
    )
    .unwrap();
    let gw = gateway_with(&[]).await;
    let chat = chatgpt(&gw).await;
    let v = start_profile(&chat, &root, "direct_write", "envrc39-start").await;
    let calls = json!([
        write(&root.join(".env.local"), "BASH_ENV=./x.sh\n"),
        write(&root.join("tools/env.js"), "require('fs')\n"),
        write(
            &root.join("dev.gitconfig"),
            "[core]\n\tfsmonitor = ./f.sh\n"
        ),
        write(&root.join("src/json/__init__.py"), "print('x')\n"),
        write(&root.join("src/app/__init__.py"), "VERSION = 1\n"),
        write(&root.join("notes.txt"), "hello\n"),
    ]);
    let v = reply_calls(&chat, &v, "envrc39-r1", calls).await;
    let got = results(&v);
    assert_eq!(got.len(), 6, "{v}");
    assert_refused(&got[0], ".env.local", "directory_hooks");
    assert_refused(&got[1], "tools/env.js", "shell_startup");
    assert_refused(&got[2], "dev.gitconfig", "vcs_config");
    assert_refused(&got[3], "src/json/__init__.py", "python_startup");
    for ok in &got[4..] {
        assert_eq!(ok["status"], "ok", "{ok}");
    }
    assert!(!root.join("tools").exists() && !root.join("dev.gitconfig").exists());
    chat.stop(&session_id(&v), &lease_id(&v), "envrc39-stop", None)
        .await
        .unwrap();
}

/// The owner's `PATH` in the tree (red team 41, found while aiming it): direnv's `PATH_add bin`
/// puts the project's `bin/` first on the owner's `PATH` there, so a session's `bin/ls` would
/// run at the owner's next `ls`; a relative entry of the owner's own `PATH` (`.`, `tools`) is
/// searched from wherever the shell is. Files named like the system's programs are refused
/// there, with the class; the project's own scripts and files stay writable.
#[tokio::test(flavor = "multi_thread")]
async fn the_owners_path_in_the_tree_protects_files_named_like_the_system_s_programs() {
    let (_repo, root) = crate::writes::repo();
    std::fs::write(root.join(".envrc"), "PATH_add bin\n").unwrap();
    let path = format!("{}:tools", std::env::var("PATH").unwrap());
    let gw = gateway_with(&[("PATH", path.as_str())]).await;
    let chat = chatgpt(&gw).await;
    let v = start_profile(&chat, &root, "direct_write", "path41-start").await;
    let calls = json!([
        write(&root.join("bin/ls"), "#!/bin/sh\ntouch /tmp/pwned\n"),
        write(&root.join("src/deep/env"), "#!/bin/sh\ntouch /tmp/pwned\n"),
        write(&root.join("bin/run-tests"), "#!/bin/sh\ncargo test\n"),
        write(&root.join("src/main.rs"), "fn main() {}\n"),
    ]);
    let v = reply_calls(&chat, &v, "path41-r1", calls).await;
    let got = results(&v);
    assert_eq!(got.len(), 4, "{v}");
    assert_refused(&got[0], "bin/ls", "shell_startup");
    assert!(got[0].to_string().contains("PATH"), "{}", got[0]);
    assert_refused(&got[1], "src/deep/env", "shell_startup");
    assert_eq!(got[2]["status"], "ok", "{}", got[2]);
    assert_eq!(got[3]["status"], "ok", "{}", got[3]);
    assert!(!root.join("bin/ls").exists() && !root.join("src/deep/env").exists());
    chat.stop(&session_id(&v), &lease_id(&v), "path41-stop", None)
        .await
        .unwrap();
}

/// Red team 43a B1, B1b, B8, B9 with the real runner: with the gateway started under a home
/// whose `.bashrc` sources a project file and runs one of its scripts on a line of its own,
/// whose direnv `direnvrc` sources another, and whose `~/.ssh/config` and `~/.vimrc` name
/// project files to run or load, each of those is refused — as `shell_startup` for what a
/// shell start-up file sources or runs, naming the config file for what a tool's config
/// names — and nothing is written; the project's other files stay writable. B2: a program in a
/// directory the `.bashrc` puts on `PATH` (`$HOME/tools/deploy`) is a program name, so
/// `bin/deploy` in a tree dir direnv puts on `PATH` is refused; `bin/setup` is not.
#[tokio::test(flavor = "multi_thread")]
async fn files_the_owners_start_up_and_tool_configs_run_are_refused() {
    let (_repo, root) = crate::writes::repo();
    let home = tempfile::tempdir().unwrap();
    let home_dir = std::fs::canonicalize(home.path()).unwrap();
    let p = root.to_string_lossy().into_owned();
    let put = |rel: &str, text: String| {
        let at = home_dir.join(rel);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::write(at, text).unwrap();
    };
    put(
        ".bashrc",
        format!(
            "source {p}/.devrc\n{p}/tools/motd.sh\nalias ll='{p}/tools/ll.sh -la'\n\
             export PATH=\"$HOME/tools:$PATH\"\nexport PROJ={p}\nalias m='mytool --fast'\n\
             for f in {p}/rc.d/*.sh; do . \"$f\"; done\n"
        ),
    );
    // B2: a program of the owner's own PATH dir, named in a tree dir direnv puts on PATH.
    put("tools/deploy", "#!/bin/sh\n".to_string());
    std::fs::write(root.join(".envrc"), "PATH_add bin\n").unwrap();
    put(
        ".config/direnv/direnvrc",
        format!("source {p}/tools/direnv-lib.sh\n"),
    );
    put(
        ".ssh/config",
        format!("Host *\n  ProxyCommand {p}/tools/proxy.sh %h %p\n"),
    );
    // Red team 46a: through a variable the start-up files give (vim started from that shell).
    put(".vimrc", "source $PROJ/tools/vimrc.vim\n".to_string());
    let gw = gateway_with(&[("HOME", home_dir.to_str().unwrap())]).await;
    let chat = chatgpt(&gw).await;
    let v = start_profile(&chat, &root, "direct_write", "startup-runs-start").await;
    let targets = [
        ".devrc",
        "tools/motd.sh",
        "tools/ll.sh",
        "tools/direnv-lib.sh",
        "tools/proxy.sh",
        "tools/vimrc.vim",
        "bin/deploy",
        "bin/mytool",
        "tools/build.sh",
        "bin/setup",
    ];
    let calls: Vec<Value> = targets
        .iter()
        .map(|rel| write(&root.join(rel), "touch /tmp/pwned\n"))
        .collect();
    let v = reply_calls(&chat, &v, "startup-runs-r1", json!(calls)).await;
    let got = results(&v);
    assert_eq!(got.len(), targets.len(), "{v}");
    for (result, rel) in got.iter().zip(&targets).take(4) {
        assert_refused(result, rel, "shell_startup");
    }
    for (result, (rel, config)) in got[4..6].iter().zip([
        ("tools/proxy.sh", ".ssh/config"),
        ("tools/vimrc.vim", ".vimrc"),
    ]) {
        let output = result["output"].as_str().unwrap_or_default();
        assert_eq!(result["status"], "error", "{rel}: {result}");
        assert!(output.starts_with("not_permitted"), "{rel}: {output}");
        assert!(
            output.contains(&format!(
                "is named by ~/{config}, a tool's configuration file"
            )),
            "{rel}: {output}"
        );
        assert!(output.contains("(startup_links)"), "{rel}: {output}");
    }
    assert_refused(&got[6], "bin/deploy", "shell_startup");
    // Red team 46a: a name `.bashrc` runs bare (an alias's `mytool`) is a program name too.
    assert_refused(&got[7], "bin/mytool", "shell_startup");
    assert_eq!(got[8]["status"], "ok", "{}", got[8]);
    assert_eq!(got[9]["status"], "ok", "{}", got[9]);
    for rel in &targets[..8] {
        assert!(!root.join(rel).exists(), "{rel} was written");
    }
    // Red team 44a C1-B6: a line the owner adds while the session is live counts from the
    // session's next write, not ten seconds later.
    let rc = home_dir.join(".bashrc");
    let mut text = std::fs::read_to_string(&rc).unwrap();
    text.push_str(&format!("source {p}/tools/live.sh\n"));
    std::fs::write(&rc, text).unwrap();
    let calls = json!([write(&root.join("tools/live.sh"), "touch /tmp/pwned\n")]);
    let v = reply_calls(&chat, &v, "startup-runs-r2", calls).await;
    assert_refused(&results(&v)[0], "tools/live.sh", "shell_startup");
    assert!(!root.join("tools/live.sh").exists());
    // Red team 47b B6: a new file in a directory `.bashrc` sources by a pattern.
    let calls = json!([write(&root.join("rc.d/new.sh"), "touch /tmp/pwned\n")]);
    let v = reply_calls(&chat, &v, "startup-runs-r3", calls).await;
    assert_refused(&results(&v)[0], "rc.d/new.sh", "shell_startup");
    assert!(!root.join("rc.d/new.sh").exists());
    chat.stop(&session_id(&v), &lease_id(&v), "startup-runs-stop", None)
        .await
        .unwrap();
}
