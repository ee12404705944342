"""Hints where users get stuck: a command that could not run a program
(exit 126 or 127) while a dependency folder of the checkout is missing from
the worktree, and a command name holding a space (it is not run by a
shell).  Decided on the exit status, never on timing."""

from __future__ import annotations

import json
import os

import pytest
from repo_helpers import git, isopatch, write_tree

NOT_FOUND = ("sh", "-c", "prettier --write .")


def _hints(run) -> list[str]:
    return [line for line in run.err.splitlines() if line.startswith("hint: ")]


def _dependency_hint(folder: str) -> str:
    return (
        f"hint: '{folder}' of your checkout is not in the worktree; "
        f"bring it in with --link {folder} (or --copy {folder})"
    )


@pytest.mark.parametrize("folder", ["node_modules", ".venv", "vendor"])
def test_a_missing_dependency_folder_is_named(env, make_repo, folder: str) -> None:
    repo = make_repo({".gitignore": f"{folder}/\n"})
    write_tree(repo, {f"{folder}/tool": "installed\n"})
    run = isopatch("--", *NOT_FOUND, cwd=repo, env=env)
    assert run.returncode == 127
    assert _hints(run) == [_dependency_hint(folder)]
    quiet = isopatch("--porcelain", "--", *NOT_FOUND, cwd=repo, env=env)
    assert _hints(quiet) == [_dependency_hint(folder)], "stderr says it in every mode"


def test_not_executable_counts_too(env, make_repo) -> None:
    repo = make_repo({".gitignore": "node_modules/\n", "tool": "#!/bin/sh\n"})
    write_tree(repo, {"node_modules/x": "x"})
    run = isopatch("--", "sh", "-c", "./tool", cwd=repo, env=env)
    assert run.returncode == 126
    assert _hints(run) == [_dependency_hint("node_modules")]


def test_no_hint_when_linked_copied_tracked_or_absent(env, make_repo) -> None:
    repo = make_repo({".gitignore": "node_modules/\n.venv/\n", "vendor/lib.go": "package lib\n"})
    write_tree(repo, {"node_modules/x": "x", ".venv/y": "y"})
    run = isopatch("--link", "node_modules", "--copy", ".venv", "--", *NOT_FOUND, cwd=repo, env=env)
    assert run.returncode == 127
    assert _hints(run) == []
    bare = make_repo(name="bare")
    assert _hints(isopatch("--", *NOT_FOUND, cwd=bare, env=env)) == []


def test_a_program_not_on_path_gets_no_dependency_hint(env, make_repo) -> None:
    """``git isopatch -- rufff format .`` in a checkout with a ``.venv``:
    git-isopatch looked the name up on ``PATH`` itself, and linking
    ``.venv`` puts nothing there, so the hint would send the user round in
    a circle.  A relative ``PATH`` entry into the folder does lead there."""
    repo = make_repo({".gitignore": ".venv/\nnode_modules/\n"})
    write_tree(repo, {".venv/bin/ruff": "#!/bin/sh\n", "node_modules/.bin/eslint": "#!/bin/sh\n"})
    typo = isopatch("--", "rufff", "format", ".", cwd=repo, env=env)
    assert typo.returncode == 127
    assert typo.err.startswith("error: cannot run 'rufff': No such file or directory\n")
    assert _hints(typo) == []
    relative = {**env, "PATH": f"node_modules/.bin:{env['PATH']}"}
    eslint = isopatch("--", "eslint", ".", cwd=repo, env=relative)
    assert eslint.returncode == 127
    assert _hints(eslint) == [_dependency_hint("node_modules")]
    by_path = isopatch("--", ".venv/bin/ruff", cwd=repo, env=env)
    assert _hints(by_path) == [_dependency_hint(".venv")]


def test_a_program_only_in_a_dependency_folder_is_named_with_its_path(env, make_repo) -> None:
    """``git isopatch -- prettier --write .`` where only the checkout's
    ``node_modules/.bin`` holds ``prettier``: the hint gives the path to
    run, from the user's folder, and the folder to link."""
    repo = make_repo({".gitignore": "node_modules/\n", "sub/x.js": "x\n"})
    write_tree(repo, {"node_modules/.bin/prettier": "#!/bin/sh\n"})
    os.chmod(repo / "node_modules" / ".bin" / "prettier", 0o755)
    run = isopatch("--", "prettier", "--write", ".", cwd=repo / "sub", env=env)
    assert run.returncode == 127
    assert _hints(run) == [
        "hint: 'prettier' is not on PATH but in your checkout:"
        " run ../node_modules/.bin/prettier with --link ../node_modules"
    ]
    ran = isopatch(
        "--link",
        "../node_modules",
        "--",
        "../node_modules/.bin/prettier",
        cwd=repo / "sub",
        env=env,
    )
    assert ran.returncode == 0, ran.err


def test_no_hint_for_an_ordinary_failure(env, make_repo) -> None:
    repo = make_repo({".gitignore": "node_modules/\n"})
    write_tree(repo, {"node_modules/x": "x"})
    for command in (("sh", "-c", "exit 1"), ("sh", "-c", "exit 2"), ("true",)):
        run = isopatch(
            "--no-sandbox", "--", *command, cwd=repo, env=env
        )  # the sandbox's hint aside
        assert _hints(run) == [], command


def test_a_command_name_with_a_space_is_not_run_by_a_shell(env, make_repo) -> None:
    repo = make_repo({".gitignore": "node_modules/\n"})
    write_tree(repo, {"node_modules/x": "x"})
    run = isopatch("ruff format src", cwd=repo, env=env)
    assert run.returncode == 127
    assert "error: cannot run 'ruff format src'" in run.err
    assert _hints(run) == [
        "hint: the command is run without a shell, so 'ruff format src' is one program "
        "name; split it (git isopatch -- ruff format src) or use sh -c 'ruff format src'"
    ]
    quiet = isopatch("-q", "ruff format src", cwd=repo, env=env)
    assert quiet.err.splitlines() == run.err.splitlines()[:2], "-q keeps both"


def test_from_a_subfolder_the_hint_names_the_path_from_there(env, make_repo) -> None:
    """--link paths are taken from where the user stands: from sub/deeper
    the hint must say ../../.venv, and that path must then work."""
    repo = make_repo({".gitignore": ".venv/\n", "sub/deeper/x": "x\n"})
    write_tree(repo, {".venv/bin/tool": "#!/bin/sh\necho ok\n"})
    os.chmod(repo / ".venv/bin/tool", 0o755)
    here = repo / "sub/deeper"
    run = isopatch("--", "../../.venv/bin/tool", cwd=here, env=env)
    assert run.returncode == 127
    assert _hints(run) == [
        "hint: '.venv' of your checkout is not in the worktree; "
        "bring it in with --link ../../.venv (or --copy ../../.venv)"
    ]
    linked = isopatch("--link", "../../.venv", "--", "../../.venv/bin/tool", cwd=here, env=env)
    assert linked.returncode == 0, linked.err
    assert _hints(linked) == []
    # -C names where the run stands as cd would
    from_top = isopatch("-C", "sub", "--", "../.venv/bin/tool", cwd=repo, env=env)
    assert _hints(from_top) == [
        "hint: '.venv' of your checkout is not in the worktree; "
        "bring it in with --link ../.venv (or --copy ../.venv)"
    ]


UNCOMMITTED = (
    "hint: your uncommitted changes are not in the worktree, which starts from HEAD; "
    "--include-uncommitted starts from them"
)


def test_an_empty_patch_while_the_checkout_has_changes_names_include_uncommitted(
    env, make_repo
) -> None:
    """The worktree starts from HEAD: a formatter run right after editing
    finds nothing to do, which reads as "your edits are fine"."""
    repo = make_repo({"a": "a\n"})
    write_tree(repo, {"a": "edited\n"})
    run = isopatch("--", "true", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    assert UNCOMMITTED in run.err.splitlines()
    for args in (("--include-uncommitted",), ("--staged",), ("--base", "HEAD~0")):
        assert UNCOMMITTED not in isopatch(*args, "--", "true", cwd=repo, env=env).err
    changed = isopatch("--", "sh", "-c", "echo b > b", cwd=repo, env=env)
    assert UNCOMMITTED not in changed.err  # a patch came back: nothing to explain
    write_tree(repo, {"a": "a\n"})
    assert UNCOMMITTED not in isopatch("--", "true", cwd=repo, env=env).err


def test_a_program_not_on_path_gets_no_uncommitted_hint(env, make_repo) -> None:
    """A program looked for on ``PATH`` and not found owes nothing to the
    work tree: the hint would send the user after the wrong cause.  One
    named by its path may be an uncommitted file: the hint stays."""
    repo = make_repo({"a": "a\n"})
    write_tree(repo, {"a": "edited\n", "tool.sh": "#!/bin/sh\n"})
    missing = isopatch("--", "no-such-program-here", cwd=repo, env=env)
    assert missing.returncode == 127, missing.err
    assert "error: cannot run 'no-such-program-here'" in missing.err, missing.err
    assert UNCOMMITTED not in missing.err.splitlines()
    untracked = isopatch("--", "./tool.sh", cwd=repo, env=env)
    assert untracked.returncode == 127, untracked.err
    assert UNCOMMITTED in untracked.err.splitlines()


def test_quiet_leaves_the_uncommitted_hint_to_the_record(env, make_repo) -> None:
    """It explains no failure: ``-q``, as git's, does not print it."""
    repo = make_repo({"a": "a\n"})
    write_tree(repo, {"a": "edited\n"})
    assert isopatch("-q", "--", "true", cwd=repo, env=env).err == ""
    record = isopatch("-q", "--porcelain", "--", "true", cwd=repo, env=env)
    assert record.err == ""
    assert f"hint {UNCOMMITTED.removeprefix('hint: ')}" in record.out.splitlines()


def _checkout_looks(repo, env, tmp_path, *args: str) -> tuple[object, int]:
    """A traced ``git isopatch --sandbox <args> -- true`` and how many
    ``git status`` of the user's checkout it ran (git inside the sandbox
    cannot write the trace: what is traced is git-isopatch's own)."""
    trace = tmp_path / "trace.json"
    trace.unlink(missing_ok=True)
    run = isopatch(
        "--sandbox", *args, "--", "true", cwd=repo, env={**env, "GIT_TRACE2_EVENT": str(trace)}
    )
    assert run.returncode == 0, run.err
    looks = 0
    for line in trace.read_text().splitlines():
        event = json.loads(line)
        argv = event.get("argv", [])
        if event.get("event") == "start" and "status" in argv and f"--work-tree={repo}" in argv:
            looks += 1
    return run, looks


def test_quiet_spares_the_sandboxed_run_its_look_for_the_hint(env, make_repo, tmp_path) -> None:
    """Under the sandbox the checkout is looked at only for the hint: with
    ``-q`` alone, which shows it nowhere, the look is not taken; with
    ``--porcelain`` (or without ``-q``) it is, and the hint is there."""
    repo = make_repo({"a": "a\n"})
    write_tree(repo, {"a": "edited\n"})
    quiet, looks = _checkout_looks(repo, env, tmp_path, "-q")
    assert (quiet.err, looks) == ("", 0)
    shown, looks = _checkout_looks(repo, env, tmp_path)
    assert UNCOMMITTED in shown.err.splitlines() and looks == 1
    record, looks = _checkout_looks(repo, env, tmp_path, "-q", "--porcelain")
    assert f"hint {UNCOMMITTED.removeprefix('hint: ')}" in record.out.splitlines()
    assert looks == 1


#: ``npx``'s and ``npm exec``'s runs of a tool the checkout installs.
PACKAGE_RUNNERS = [
    ("npx", "prettier", "--check", "."),
    ("npm", "exec", "--", "prettier", "--check", "."),
    ("npm", "x", "prettier"),
]


@pytest.mark.needs("npm")
@pytest.mark.parametrize("command", PACKAGE_RUNNERS, ids=lambda argv: " ".join(argv[:2]))
def test_a_package_runner_that_fails_names_node_modules(env, make_repo, command) -> None:
    """``npx prettier`` with no ``node_modules`` in the worktree does not
    exit 127: npx falls back to downloading the package, which in the
    sandbox (no network) fails with exit 1, after about 70 s of npm's
    retries (``npm_config_offline`` here makes it fail at once).  The
    missing ``node_modules`` is the trouble, as for 127."""
    repo = make_repo({".gitignore": "node_modules/\n", "a.js": "a\n"})
    write_tree(repo, {"node_modules/prettier/package.json": "{}\n"})
    offline = {**env, "npm_config_offline": "true"}
    run = isopatch("--", *command, cwd=repo, env=offline)
    assert run.returncode not in (0, 126, 127), run.err
    assert _dependency_hint("node_modules") in _hints(run), run.err
    quiet = isopatch("-q", "--", *command, cwd=repo, env=offline)
    assert _dependency_hint("node_modules") in _hints(quiet), "-q keeps it, as for 127"
    linked = isopatch("--link", "node_modules", "--", *command, cwd=repo, env=offline)
    assert _dependency_hint("node_modules") not in _hints(linked)


@pytest.mark.parametrize(("typed", "meant"), [("lst", "list"), ("purne", "prune")])
def test_a_misspelt_subcommand_names_the_most_similar(env, make_repo, typed, meant) -> None:
    """``git isopatch lst`` runs a program named ``lst``, which is not
    found: as git does for ``git lst``, the hint names the subcommand."""
    repo = make_repo()
    run = isopatch(typed, cwd=repo, env=env)
    assert run.returncode == 127
    assert run.err.startswith(f"error: cannot run '{typed}': No such file or directory\n")
    assert _hints(run) == [f"hint: the most similar subcommand is 'git isopatch {meant}'"]
    for other in ("no-such-tool", "lint"):  # lint: 0.75 like list, a tool of its own
        assert _hints(isopatch(other, cwd=repo, env=env)) == [], other


def test_help_as_a_command_names_the_manual(env, make_repo) -> None:
    """``git isopatch help`` (as ``git help``) runs a program named
    ``help``, which is not found: the hint names ``--help``, the manual."""
    repo = make_repo()
    run = isopatch("help", cwd=repo, env=env)
    assert run.returncode == 127
    assert _hints(run) == ["hint: 'help' is no subcommand; the manual: 'git isopatch --help'"]


def test_a_subcommand_after_options_runs_a_program_and_says_so(env, make_repo) -> None:
    """``git isopatch -C repo list`` (git's own order: ``git -C repo
    worktree list``) runs a program named ``list``: subcommands are
    recognised only as the first argument.  The hint gives the order
    that works instead of sending the user to ``node_modules``; for
    ``mcp`` too, which the MCP SDK (the ``mcp`` extra) installs as a
    program of its own that fails here: an agent's server configuration
    ``["-C", repo, "mcp"]`` would start the SDK's tool."""
    repo = make_repo({".gitignore": "node_modules/\n"})
    write_tree(repo, {"node_modules/x": "x"})
    for name in ("list", "prune", "mcp"):
        run = isopatch("--no-sandbox", "-C", repo, name, cwd=repo.parent, env=env)
        assert run.returncode != 0, run.err
        assert _hints(run) == [
            f"hint: '{name}' is git isopatch's subcommand only as its first argument: "
            f"git isopatch {name} -C <path>"
        ], run.err


def _submodule_hint(path: str) -> str:
    return (
        f"hint: '{path}' is a submodule, empty in the worktree; "
        "--recurse-submodules populates it from yours"
    )


def test_a_path_in_an_unpopulated_submodule_is_named(env, make_repo, tmp_path) -> None:
    """``cargo fmt --manifest-path vendor/lib/Cargo.toml``, ``make -C
    vendor/lib``: a worktree starts with empty submodule folders, so a
    command that names a path in a submodule the user has checked out finds
    nothing there.  The hint names the submodule and the option, from the
    user's folder; decided on the arguments and the checkout, not on what
    the command printed."""
    make_repo({"Makefile": "all:\n"}, name="lib-up")
    repo = make_repo({"src/a": "a\n"})
    protocol = ("-c", "protocol.file.allow=always")
    git(*protocol, "submodule", "add", "-q", tmp_path / "lib-up", "vendor/lib", cwd=repo, env=env)
    git("commit", "-q", "-m", "submodule", cwd=repo, env=env)
    run = isopatch("--", "make", "-C", "vendor/lib", cwd=repo, env=env)
    assert run.returncode != 0, run.err
    assert _hints(run) == [_submodule_hint("vendor/lib")], run.err
    option = isopatch("--", "ls", "--file=vendor/lib/Makefile", cwd=repo, env=env)
    assert _hints(option) == [_submodule_hint("vendor/lib")], option.err
    below = isopatch("--", "ls", "../vendor/lib/Makefile", cwd=repo / "src", env=env)
    assert _hints(below) == [_submodule_hint("../vendor/lib")], below.err
    populated = isopatch(
        "--recurse-submodules", "--", "make", "-C", "vendor/lib", cwd=repo, env=env
    )
    assert populated.returncode == 0, populated.err
    assert _hints(populated) == []
    for other in (["ls", "src/a"], ["ls", "vendor/other"], ["ls", "/vendor/lib"]):
        assert _hints(isopatch("--", *other, cwd=repo, env=env)) == [], other


@pytest.mark.parametrize("sandbox", ["--sandbox", "--no-sandbox"])
def test_an_absolute_path_into_the_checkout_that_was_written_is_named(
    env, make_repo, sandbox
) -> None:
    """``ruff format "$PWD/src"`` (lint-staged's absolute paths): the
    command works on the user's checkout, not on the worktree, so its fix
    is discarded in the sandbox (or lands in the checkout unconfined) and
    the patch is empty.  When the command wrote there, the hint names the
    argument; decided on the arguments and the writes."""
    repo = make_repo({"a.txt": "a\n", "b.txt": "b\n"})
    append = ("sh", "-c", 'echo x >> "$1"', "sh")
    run = isopatch(sandbox, "--", *append, f"{repo}/a.txt", cwd=repo, env=env)
    assert run.returncode == 0, run.err
    hint = (
        f"hint: '{repo}/a.txt' leads into your checkout, not the worktree, and the command "
        "wrote there: pass paths relative to the current folder"
    )
    assert hint in _hints(run), run.err
    option = isopatch(sandbox, "--", *append, "b.txt", f"--config={repo}", cwd=repo, env=env)
    assert f"hint: '{repo}' leads into your checkout" not in option.err, "nothing written there"
    second = ("sh", "-c", 'echo x >> "$2"', "sh", f"--config={repo}/b.txt", f"{repo}/a.txt")
    elsewhere = isopatch(sandbox, "--", *second, cwd=repo, env=env)
    led = [line for line in _hints(elsewhere) if "leads into your checkout" in line]
    assert led == [hint], "only the argument the command wrote under"
    read = isopatch(sandbox, "--", "cat", f"{repo}/b.txt", cwd=repo, env=env)
    assert "leads into your checkout" not in read.err
