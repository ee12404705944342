"""A sandboxed command writes git's global configuration in its
copy-on-write home (``~/.gitconfig``, ``$XDG_CONFIG_HOME/git/ignore`` and
``attributes``, a ``$GIT_CONFIG_GLOBAL`` in a temporary folder): the writes
are discarded, yet git-isopatch's own git, which runs in the same
namespaces, read them while it took the patch.  The patch must be the
change as the user's git sees it, with the global configuration as it was
before the command: a new file a planted ignore rule hides, and an edit a
planted clean filter turns back into the base's content, are in it; what
the user's own global configuration says still holds.  A tool that runs
``git config --global`` (not an attack) changes the patch no more.  The
repository's own configuration files are another matter, shown last."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from repo_helpers import git, isopatch
from sandbox_helpers import run_as_nobody

PLANT = (
    'mkdir -p "$XDG_CONFIG_HOME/git" && echo n > new.txt && echo evil >> a.txt'
    ' && printf "new.txt\\n" > "$XDG_CONFIG_HOME/git/ignore"'
    ' && printf "a.txt filter=hide\\n" > "$XDG_CONFIG_HOME/git/attributes"'
    " && git config --global filter.hide.clean 'printf \"hi\\n\"'"
)


def _patch(repo: Path, env: dict[str, str], script: str) -> bytes:
    run = isopatch("--porcelain", "--sandbox", "--", "sh", "-c", script, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    return Path(run.fields()["patch"]).read_bytes()


def _planted_in_a_named_file(
    env: dict[str, str], make_repo, tmp_path: Path, named: Path, key: str, planted: str
) -> None:
    """The global configuration names ``named`` under ``key`` (besides an
    excludes file for ``*.log`` and a filter ``hide`` that would turn
    ``a.txt`` back); the command writes ``planted`` there, makes
    ``new.txt`` and ``new.log`` and edits ``a.txt``: the file is left as
    it was and the patch is the one the real configuration gives."""
    home = Path(env["HOME"])
    real = "*.log\n" if key == "core.excludesFile" else ""
    named.write_text(real)
    excludes = home / "excludes"  # what the real configuration says holds
    excludes.write_text("*.log\n")
    git("config", "--global", "core.excludesFile", str(excludes), cwd=home, env=env)
    git("config", "--global", "filter.hide.clean", 'printf "hi\\n"', cwd=home, env=env)
    git("config", "--global", "--add", key, str(named), cwd=home, env=env)
    payload = tmp_path / "payload"
    payload.write_text(planted)
    repo = make_repo({"a.txt": "hi\n"})
    script = "echo n > new.txt && echo l > new.log && echo evil >> a.txt"
    script += f" && cat '{payload}' > '{named}'"
    patch = _patch(repo, env, script)
    assert named.read_text() == real
    assert b"+++ b/new.txt" in patch, patch
    assert b"+evil" in patch, patch
    assert b"new.log" not in patch, patch


@pytest.mark.hostile
def test_global_configuration_the_command_wrote_does_not_shape_its_patch(env, make_repo) -> None:
    repo = make_repo({"a.txt": "hi\n"})
    run = isopatch("--porcelain", "--sandbox", "--keep", "--", "sh", "-c", PLANT, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    fields = run.fields()
    kept = Path(fields["worktree"])
    assert (kept / "a.txt").read_text() == "hi\nevil\n"
    patch = Path(fields["patch"]).read_bytes()
    git("worktree", "remove", "--force", kept, cwd=repo, env=env)
    assert b"+++ b/new.txt" in patch, patch
    assert b"+evil" in patch, patch


@pytest.mark.hostile
def test_the_default_global_files_under_home_are_read_as_they_were(env, make_repo) -> None:
    """Without ``$XDG_CONFIG_HOME`` git reads ``~/.config/git/``: planted
    there, it shapes nothing either."""
    env.pop("XDG_CONFIG_HOME")
    repo = make_repo({"a.txt": "hi\n"})
    patch = _patch(repo, env, PLANT.replace("$XDG_CONFIG_HOME", "$HOME/.config"))
    assert b"+++ b/new.txt" in patch and b"+evil" in patch, patch


@pytest.mark.hostile
def test_a_git_config_global_file_the_command_rewrote_is_read_as_it_was(
    env, make_repo, tmp_path: Path
) -> None:
    """``$GIT_CONFIG_GLOBAL`` names a file in a temporary folder (copy-on-write
    inside): the command's ``git config --global`` writes there."""
    named = tmp_path / "tmp" / "global.config"
    named.write_text("[user]\n\tname = someone\n")
    env["GIT_CONFIG_GLOBAL"] = str(named)
    repo = make_repo({"a.txt": "hi\n"})
    script = (
        "git config --global filter.hide.clean 'printf \"hi\\n\"'"
        ' && mkdir -p "$XDG_CONFIG_HOME/git" && echo evil >> a.txt'
        ' && echo "a.txt filter=hide" > "$XDG_CONFIG_HOME/git/attributes"'
    )
    patch = _patch(repo, env, script)
    assert b"+evil" in patch, patch
    assert named.read_text() == "[user]\n\tname = someone\n"


def test_a_tool_that_sets_core_autocrlf_globally_leaves_the_patch_as_it_was(env, make_repo) -> None:
    """``git config --global core.autocrlf true`` (discarded): the CRLF line
    the tool wrote is in the patch as the user's git stores it, CRLF."""
    repo = make_repo({"a.txt": "a\n"})
    patch = _patch(repo, env, "git config --global core.autocrlf true && printf 'b\\r\\n' >> a.txt")
    assert b"\n+b\r\n" in patch, patch


def test_a_tool_that_adds_a_global_excludes_file_leaves_the_patch_as_it_was(env, make_repo) -> None:
    repo = make_repo({"a.txt": "a\n"})
    script = (
        "git config --global core.excludesFile ~/.gitignore_global"
        " && echo '*.txt' > ~/.gitignore_global && echo n > new.txt"
    )
    assert b"+++ b/new.txt" in _patch(repo, env, script)


def test_the_users_own_global_configuration_still_shapes_the_patch(env, make_repo) -> None:
    """The user's ``core.excludesFile`` (``~/``, expanded to the real home)
    and ``core.autocrlf`` are read, whatever the command made of them."""
    home = Path(env["HOME"])
    (home / ".ignore").write_text("*.log\n")
    git("config", "--global", "core.excludesFile", "~/.ignore", cwd=home, env=env)
    git("config", "--global", "core.autocrlf", "input", cwd=home, env=env)
    repo = make_repo({"a.txt": "a\n"})
    script = (
        "echo '*.txt' > ~/.ignore && git config --global core.autocrlf false"
        " && echo l > x.log && echo t > y.txt && printf 'b\\r\\n' >> a.txt"
    )
    patch = _patch(repo, env, script)
    assert b"+++ b/y.txt" in patch, patch
    assert b"x.log" not in patch, patch
    assert b"\n+b\n" in patch, patch
    assert (home / ".ignore").read_text() == "*.log\n"


#: As uid 65534: the run's patch, from the command of ``PLANT``.
AS_NOBODY = textwrap.dedent(
    """\
    with open(os.path.join(repo, "a.txt"), "w") as handle:
        handle.write("hi\\n")
    subprocess.run(["git", "-C", repo, "add", "a.txt"], check=True)
    subprocess.run(["git", "-C", repo, "commit", "-q", "-m", "a"], check=True)
    done = subprocess.run(
        [sys.executable, "-m", "git_isopatch", "--porcelain", "--sandbox", "--",
         "sh", "-c", sys.argv[1]],
        cwd=repo, capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
    fields = dict(line.split(" ", 1) for line in done.stdout.decode().splitlines())
    with open(fields["patch"]) as handle:
        patch = handle.read()
    print(json.dumps({"code": done.returncode, "err": done.stderr.decode(), "patch": patch}))
    """
)


@pytest.mark.hostile
def test_global_configuration_planted_as_an_unprivileged_user(env) -> None:
    with run_as_nobody(env, AS_NOBODY, PLANT) as seen:
        assert seen["code"] == 0, seen["err"]
        assert "+++ b/new.txt" in seen["patch"] and "+evil" in seen["patch"], json.dumps(seen)


#: Tries to write the real folders' place, to rename it, to make a folder
#: there that a variable could lead to; prints what worked.
REPLACE = (
    "for d in /run/git-isopatch /run/git-isopatch/0; do"
    ' echo x > "$d/.gitconfig" 2>/dev/null && echo "wrote $d";'
    ' mkdir "$d/9" 2>/dev/null && echo "made $d/9"; done;'
    " mv /run/git-isopatch /run/moved 2>/dev/null && echo moved;"
    " mv /run/git-isopatch/0 /run/moved0 2>/dev/null && echo moved0;"
    " ls /run/git-isopatch/0/.gitconfig >/dev/null 2>&1 || echo unseen; echo n > new.txt"
)


@pytest.mark.hostile
def test_the_real_global_configuration_inside_cannot_be_replaced(env, make_repo) -> None:
    """The place where git-isopatch's own git reads the user's global
    configuration is out of the command's sight (a unix socket there would
    answer it: ``test_the_command_cannot_reach_the_real_home_bound_for_our_own_git``),
    and neither it nor what covers it can be written or moved."""
    (Path(env["HOME"]) / ".gitconfig").write_text("[core]\n\tautocrlf = false\n")
    repo = make_repo({"a.txt": "a\n"})
    run = isopatch("--porcelain", "--sandbox", "--", "sh", "-c", REPLACE, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    fields = run.fields()
    said = Path(fields["stdout"]).read_text()
    assert said == "unseen\n", "the command saw or changed the real folders' place"
    assert b"+++ b/new.txt" in Path(fields["patch"]).read_bytes()


#: The repository's own files, written by the command in its view.
PLANT_IN_REPOSITORY = (
    'c="$(git rev-parse --git-common-dir)"; mkdir -p "$c/info"'
    ' && echo new.txt >> "$c/info/exclude" && echo "a.txt filter=hide" > "$c/info/attributes"'
    " && git config filter.hide.clean 'printf \"hi\\n\"' && echo n > new.txt && echo evil >> a.txt"
)


@pytest.mark.hostile
def test_the_repositorys_own_configuration_is_read_as_the_command_left_it(env, make_repo) -> None:
    """Unlike the global files, the repository's ``config``,
    ``info/exclude`` and ``info/attributes`` are read as the command left
    them in its view, as an unconfined run reads what it really wrote (a
    tool that excludes its own scratch files there keeps them out of the
    patch); the writes are discarded and each is named as a shared write."""
    repo = make_repo({"a.txt": "hi\n"})
    twin = make_repo({"a.txt": "hi\n"}, name="twin")
    run = isopatch(
        "--porcelain", "--sandbox", "--", "sh", "-c", PLANT_IN_REPOSITORY, cwd=repo, env=env
    )
    assert run.returncode == 0, run.err
    own = isopatch(
        "--porcelain", "--no-sandbox", "--", "sh", "-c", PLANT_IN_REPOSITORY, cwd=twin, env=env
    )
    assert own.returncode == 0, own.err
    patch = Path(run.fields()["patch"]).read_bytes()
    assert patch == Path(own.fields()["patch"]).read_bytes()
    for said in ("config changed", "info/attributes created", "info/exclude changed"):
        assert f"shared-write {said} discarded\n" in run.out, run.out
    assert not (repo / ".git" / "info" / "attributes").exists()
    assert b"hide" not in (repo / ".git" / "config").read_bytes()


@pytest.mark.hostile
def test_a_program_planted_in_a_home_folder_of_path_does_not_run_as_a_filter(
    env, make_repo
) -> None:
    """The user's filter names a program of ``~/bin``, a folder of ``PATH``;
    the command plants its own there, which turns the edit back into the
    base's content: git-isopatch's own git still runs the user's."""
    bin_dir = Path(env["HOME"]) / "bin"
    bin_dir.mkdir()
    (bin_dir / "myclean").write_text("#!/bin/sh\nexec cat\n")
    (bin_dir / "myclean").chmod(0o755)
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    git("config", "--global", "filter.mine.clean", "myclean", cwd=bin_dir, env=env)
    repo = make_repo({"a.txt": "hi\n", ".gitattributes": "a.txt filter=mine\n"})
    script = "printf '#!/bin/sh\\nprintf \"hi\\\\n\"\\n' > ~/bin/myclean && echo evil >> a.txt"
    patch = _patch(repo, env, script)
    assert b"+evil" in patch, patch
    assert (bin_dir / "myclean").read_text() == "#!/bin/sh\nexec cat\n"


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("key", "planted"),
    [
        ("core.excludesFile", "new.txt\n"),
        ("core.attributesFile", "a.txt filter=hide\n"),
        ("include.path", "[core]\n\texcludesFile = /dev/null\n"),
        ("includeIf.gitdir:/.path", "[core]\n\texcludesFile = /dev/null\n"),
    ],
)
def test_a_file_the_global_configuration_names_by_its_absolute_path_is_read_as_it_was(
    env, make_repo, tmp_path: Path, key: str, planted: str
) -> None:
    """``git config --global core.excludesFile ~/.gitignore_global``: the
    shell expands ``~``, git keeps the absolute path, which names the home
    the command writes (copy-on-write) and not the real folders bound for
    git-isopatch's own git."""
    named = Path(env["HOME"]) / "named-by-the-global-config"
    _planted_in_a_named_file(env, make_repo, tmp_path, named, key, planted)


@pytest.mark.hostile
def test_a_filter_program_named_by_its_absolute_path_runs_as_it_was(env, make_repo) -> None:
    """``filter.mine.clean = /home/u/myclean``: the command rewrites that
    program in its view; git-isopatch's own git still runs the user's."""
    program = Path(env["HOME"]) / "myclean"
    program.write_text("#!/bin/sh\nexec cat\n")
    program.chmod(0o755)
    git("config", "--global", "filter.mine.clean", str(program), cwd=program.parent, env=env)
    repo = make_repo({"a.txt": "hi\n", ".gitattributes": "a.txt filter=mine\n"})
    script = f"printf '#!/bin/sh\\nprintf \"hi\\\\n\"\\n' > '{program}' && echo evil >> a.txt"
    patch = _patch(repo, env, script)
    assert b"+evil" in patch, patch
    assert program.read_text() == "#!/bin/sh\nexec cat\n"


@pytest.mark.hostile
def test_in_a_repository_inside_the_home_the_commands_commit_is_in_the_patch(
    env, make_repo
) -> None:
    """The usual place: the checkout, its worktree and its git directory
    inside the home.  Our own git reads the real home, yet the worktree,
    and the git directory (the objects of the commit the command made), as
    the command left them."""
    home = Path(env["HOME"])
    excludes = home / ".gitignore_global"
    excludes.write_text("*.log\n")
    git("config", "--global", "core.excludesFile", str(excludes), cwd=home, env=env)
    repo = make_repo({"a.txt": "hi\n"}, name="home/src/repo")
    assert repo == home / "src" / "repo"
    script = (
        f"echo b > b.txt && git add b.txt && git commit -qm b && echo '*.txt' > '{excludes}'"
        " && echo n > new.txt && echo l > new.log && echo evil >> a.txt"
    )
    patch = _patch(repo, env, script)
    for expected in (b"+++ b/b.txt", b"+++ b/new.txt", b"+evil"):
        assert expected in patch, patch
    assert b"new.log" not in patch, patch
    assert excludes.read_text() == "*.log\n"


def test_neither_the_command_nor_our_own_git_holds_a_capability(env, make_repo) -> None:
    """As root: the launcher keeps ``CAP_SYS_ADMIN`` to make our own git's
    view, and nothing it starts does (a clean filter of our own git prints
    its capabilities into the patch)."""
    shown = "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status"
    repo = make_repo({"a.txt": "hi\n", ".gitattributes": "a.txt filter=caps\n"})
    git("config", "--global", "filter.caps.clean", shown, cwd=env["HOME"], env=env)
    patch = _patch(repo, env, f"echo evil >> a.txt && {shown} > caps.txt").decode()
    lines = [ln[1:] for ln in patch.splitlines() if ln.startswith("+Cap")]
    assert len(lines) == 10, patch
    assert all(ln.endswith("\t0000000000000000") for ln in lines), patch


@pytest.mark.hostile
def test_a_folder_of_the_global_configuration_replaced_by_a_link_is_read_as_it_was(
    env, make_repo, tmp_path: Path
) -> None:
    """The folder of ``$GIT_CONFIG_GLOBAL`` (copy-on-write inside) becomes a
    link to a planted configuration, which excludes ``new.txt``: our own
    git reads the real folder (the folder holding it is shown as it is),
    never the planted one."""
    folder = tmp_path / "tmp" / "config"
    folder.mkdir()
    (folder / "global.config").write_text("[core]\n\texcludesFile = /dev/null\n")
    env["GIT_CONFIG_GLOBAL"] = str(folder / "global.config")
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "ignore").write_text("new.txt\n")
    (planted / "global.config").write_text(f"[core]\n\texcludesFile = {planted}/ignore\n")
    repo = make_repo({"a.txt": "hi\n"})
    script = f"rm -r '{folder}' && ln -s '{planted}' '{folder}' && echo n > new.txt"
    patch = _patch(repo, env, script)
    assert b"+++ b/new.txt" in patch, patch
    assert (folder / "global.config").is_file()


#: As uid 65534, the global excludes file named by its absolute path: the
#: run's patch, from a command that empties it.
AS_NOBODY_ABSOLUTE = (
    textwrap.dedent(
        """\
    home = os.environ["HOME"]
    with open(os.path.join(home, "ignore"), "w") as handle:
        handle.write("*.log\\n")
    subprocess.run(["git", "config", "--global", "core.excludesFile",
                    os.path.join(home, "ignore")], check=True)
    """
    )
    + AS_NOBODY
)


@pytest.mark.hostile
@pytest.mark.parametrize("variable", ["HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL"])
def test_a_link_on_the_way_to_the_global_configuration_is_read_as_it_was(
    env, make_repo, tmp_path: Path, variable: str
) -> None:
    """The variable names the real folder through a link in a temporary
    folder (copy-on-write inside): the command points the link at a folder
    of its own, whose configuration would hide its new file."""
    real, planted = tmp_path / "real", tmp_path / "planted"
    for folder, excludes in ((real, "/dev/null"), (planted, str(planted / "ignore"))):
        (folder / "git").mkdir(parents=True)
        for name in (".gitconfig", "git/config", "global.config"):
            (folder / name).write_text(f"[core]\n\texcludesFile = {excludes}\n")
    (planted / "ignore").write_text("new.txt\n")
    link = tmp_path / "tmp" / "link"
    link.symlink_to(real)
    env[variable] = str(link / "global.config") if variable == "GIT_CONFIG_GLOBAL" else str(link)
    repo = make_repo({"a.txt": "hi\n"})
    script = f"rm '{link}' && ln -s '{planted}' '{link}' && echo n > new.txt && echo evil >> a.txt"
    patch = _patch(repo, env, script)
    assert b"+++ b/new.txt" in patch, patch
    assert b"+evil" in patch, patch
    assert link.resolve() == real


@pytest.mark.hostile
def test_the_real_folders_place_is_out_of_sight_as_an_unprivileged_user(env) -> None:
    """As uid 65534 (an unprivileged user namespace): the command finds
    nothing of the real home (its ``repo``) where our own git's view is
    bound."""
    seek = (
        'if [ -n "$(find /run -maxdepth 4 -name repo 2>/dev/null)" ]; then'
        " echo seen > seen.txt; fi; echo n > new.txt"
    )
    with run_as_nobody(env, AS_NOBODY, seek) as seen:
        assert seen["code"] == 0, seen["err"]
        assert "+++ b/new.txt" in seen["patch"], json.dumps(seen)
        assert "seen.txt" not in seen["patch"], json.dumps(seen)


@pytest.mark.parametrize("where", ["beside the checkout", "in the temporary folder"])
@pytest.mark.parametrize(
    ("key", "planted"),
    [
        ("core.excludesFile", "new.txt\n"),
        ("core.attributesFile", "a.txt filter=hide\n"),
        ("include.path", "[core]\n\texcludesFile = /dev/null\n"),
    ],
)
def test_a_file_the_global_configuration_names_outside_the_home_is_read_as_it_was(
    env, make_repo, tmp_path: Path, where: str, key: str, planted: str
) -> None:
    """The global configuration names a file outside the home and its
    configuration folders: a team's excludes beside the checkouts, a file
    in a temporary folder.  Those folders are copy-on-write for the command
    too: it rewrites the file in its view, and git-isopatch's own git,
    after it, must read the file as it was."""
    folder = tmp_path if where == "beside the checkout" else Path(env["TMPDIR"])
    _planted_in_a_named_file(env, make_repo, tmp_path, folder / "team.config", key, planted)


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("key", "planted"),
    [
        ("core.excludesFile", "new.txt\n"),
        ("include.path", "[core]\n\texcludesFile = /dev/null\n"),
    ],
)
def test_a_file_the_global_configuration_names_in_a_cache_folder_is_read_as_it_was(
    env, make_repo, tmp_path: Path, key: str, planted: str
) -> None:
    """The global configuration names a file in a cache folder
    (``~/.cache``), whose writes land in the cache layer kept for the
    repository's later runs: the command rewrites the file there, and our
    own git must still read it as it was, in this run and in the next one,
    whose command sees the cache as the first left it."""
    cache = Path(env["HOME"]) / ".cache"
    cache.mkdir()
    env["XDG_CACHE_HOME"] = str(cache)
    named = cache / "team.config"
    _planted_in_a_named_file(env, make_repo, tmp_path, named, key, planted)
    repo = tmp_path / "repo"
    patch = _patch(repo, env, f"cat '{named}' > /dev/null && echo n > new.txt && echo l > new.log")
    assert b"+++ b/new.txt" in patch, patch
    assert b"new.log" not in patch, patch


#: As uid 65534, the global excludes file named by its absolute path
#: outside the home (in the temporary folder holding it): the run's patch,
#: from a command that empties it.
AS_NOBODY_OUTSIDE = (
    textwrap.dedent(
        """\
    named = os.path.join(os.path.dirname(os.environ["HOME"]), "team-ignore")
    with open(named, "w") as handle:
        handle.write("*.log\\n")
    subprocess.run(["git", "config", "--global", "core.excludesFile", named], check=True)
    """
    )
    + AS_NOBODY
)

#: As uid 65534, the global excludes file named by its absolute path in the
#: cache folder (``~/.cache``, a cache layer kept for later runs).
AS_NOBODY_CACHE = (
    textwrap.dedent(
        """\
    cache = os.path.join(os.environ["HOME"], ".cache")
    os.environ["XDG_CACHE_HOME"] = cache
    os.mkdir(cache)
    with open(os.path.join(cache, "ignore"), "w") as handle:
        handle.write("*.log\\n")
    subprocess.run(["git", "config", "--global", "core.excludesFile",
                    os.path.join(cache, "ignore")], check=True)
    """
    )
    + AS_NOBODY
)


@pytest.mark.hostile
@pytest.mark.parametrize(
    ("setup", "emptied"),
    [
        (AS_NOBODY_ABSOLUTE, '"$HOME/ignore"'),
        (AS_NOBODY_OUTSIDE, '"$(dirname "$HOME")/team-ignore"'),
        (AS_NOBODY_CACHE, '"$HOME/.cache/ignore"'),
    ],
    ids=["in the home", "outside the home", "in a cache folder"],
)
def test_a_global_file_named_by_its_absolute_path_as_an_unprivileged_user(
    env, setup: str, emptied: str
) -> None:
    """As uid 65534, the command empties the global excludes file named by
    its absolute path: the patch is the one the real file gives."""
    script = f"echo > {emptied} && echo n > new.txt && echo l > new.log"
    with run_as_nobody(env, setup, script) as seen:
        assert seen["code"] == 0, seen["err"]
        assert "+++ b/new.txt" in seen["patch"], json.dumps(seen)
        assert "new.log" not in seen["patch"], json.dumps(seen)
