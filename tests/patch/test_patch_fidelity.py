"""Configuration never changes the patch (issue 4).

Each diff-related setting, alone and all together, at repository, global,
``git -c`` and ``GIT_CONFIG_COUNT`` level, and the diff variables of the
environment, leave the patch byte-identical to the one made without them.
``test_each_setting_changes_plain_git_diff`` shows that each setting really
changes what ``git diff`` prints, so the comparison can fail.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hostile import Setting, hostile_settings, write_hostile_scripts
from repo_helpers import apply_to_clean_checkout, git, isopatch, repo_state, tree_manifest

pytestmark = pytest.mark.hostile

README = "".join(f"line {n}\n" if n % 4 else "\n" for n in range(1, 31))
PATIENCE_OLD = """#include <stdio.h>

// Frobs foo heartily
int frobnitz(int foo)
{
    int i;
    for(i = 0; i < 10; i++)
    {
        printf("Your answer is: ");
        printf("%d\\n", foo);
    }
}

int fact(int n)
{
    if(n > 1)
    {
        return fact(n-1) * n;
    }
    return 1;
}

int main(int argc, char **argv)
{
    frobnitz(fact(10));
}
"""
PATIENCE_NEW = """#include <stdio.h>

int fib(int n)
{
    if(n > 2)
    {
        return fib(n-1) + fib(n-2);
    }
    return 1;
}

// Frobs foo heartily
int frobnitz(int foo)
{
    int i;
    for(i = 0; i < 10; i++)
    {
        printf("%d\\n", foo);
    }
}

int main(int argc, char **argv)
{
    frobnitz(fib(10));
}
"""
MOVED = "".join(f"a line that makes the file worth a rename {n}\n" for n in range(12))
ORIG = "".join(f"original content, copied by the command {n}\n" for n in range(12))

BASE_TREE = {
    "README": README,
    "a.c": PATIENCE_OLD,
    "h.txt": "1\n2\na\n\nb\n3\n4\n",
    "notes.txt": "notes\n",
    "moved.txt": MOVED,
    "orig.txt": ORIG,
    "tool.sh": "#!/bin/sh\necho tool\n",
    "sub/file": "in a folder\n",
    ".gitattributes": "*.txt diff=hostile\n",
}

CHANGED = {
    "README": README.replace("line 5\n", "line five\n").replace("line 14\n", "line fourteen\n"),
    "a.c": PATIENCE_NEW,
    "h.txt": "1\n2\na\n\nb\na\n\nb\n3\n4\n",
    "notes.txt": "notes, more\n",
    "moved-renamed.txt": MOVED + "and one more line\n",
    "orig.txt": ORIG.replace("0\n", "zero\n"),
    "blob.bin": bytes(range(256)) * 4,
    "é ünïcode.txt": "non-ASCII name\n",
}

#: What the command does, from wherever it starts: CHANGED (copied from
#: $CHANGES), a rename with an edit, a copy, an exec bit, a new gitlink.
#: (Its own git would run the fsmonitor hook of the hostile profile: that is
#: the command's business, so it turns it off to keep the marks ours.)
COMMAND = r"""set -e
cd "$(git rev-parse --show-toplevel)"
cp "$CHANGES/README" "$CHANGES/a.c" "$CHANGES/h.txt" "$CHANGES/notes.txt" .
mkdir -p sub && cp "$CHANGES/moved-renamed.txt" sub/moved-renamed.txt && rm moved.txt
cp orig.txt copy.txt && cp "$CHANGES/orig.txt" orig.txt
cp "$CHANGES/blob.bin" "$CHANGES/é ünïcode.txt" .
chmod +x tool.sh
git -c core.fsmonitor=false update-index --cacheinfo "160000,$SUBMODULE_NEXT,sm"
"""


def _without_funcname(patch: bytes) -> bytes:
    return re.sub(rb"(?m)^(@@ [^@\n]* @@).*$", rb"\1", patch)


@dataclass
class World:
    repo: Path
    env: dict[str, str]
    marks: Path
    scripts: Path
    settings: list[Setting]


@pytest.fixture
def world(env: dict[str, str], make_repo, tmp_path: Path) -> Iterator[World]:
    sub = make_repo({"s": "first\n"}, name="subproject")
    first = git("rev-parse", "HEAD", cwd=sub, env=env).decode().strip()
    (sub / "s").write_text("second\n")
    git("commit", "-qam", "second", cwd=sub, env=env)
    second = git("rev-parse", "HEAD", cwd=sub, env=env).decode().strip()

    repo = make_repo({**BASE_TREE, ".gitmodules": '[submodule "sm"]\n\tpath = sm\n\turl = ../s\n'})
    git("update-index", "--add", "--cacheinfo", f"160000,{first},sm", cwd=repo, env=env)
    git("commit", "-qm", "submodule", cwd=repo, env=env)

    changes = tmp_path / "changes"
    for name, content in CHANGED.items():
        path = changes / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    scripts = tmp_path / "scripts"
    write_hostile_scripts(scripts)
    marks = tmp_path / "marks"
    marks.mkdir()
    run_env = {
        **env,
        "CHANGES": str(changes),
        "SUBMODULE_NEXT": second,
        "HOSTILE_MARKS": str(marks),
    }
    yield World(repo, run_env, marks, scripts, hostile_settings(scripts))


def _capture(world: World, config: tuple[tuple[str, str], ...], environ: dict, level: str) -> bytes:
    """Run git isopatch with ``config`` at ``level``; return the patch bytes."""
    env = {**world.env, **environ}
    command = ["--porcelain", "--", "sh", "-c", COMMAND]
    repo = world.repo
    if level == "command line":
        pairs = [word for key, value in config for word in ("-c", f"{key}={value}")]
        out = git(*pairs, "isopatch", *command, cwd=repo / "sub", env=env)
    else:
        if level == "environment":
            env["GIT_CONFIG_COUNT"] = str(len(config))
            for n, (key, value) in enumerate(config):
                env[f"GIT_CONFIG_KEY_{n}"] = key
                env[f"GIT_CONFIG_VALUE_{n}"] = value
        else:
            scope = "--global" if level == "global" else "--local"
            for key, value in config:
                git("config", scope, "--add", key, value, cwd=repo, env=world.env)
        run = isopatch(*command, cwd=repo / "sub", env=env)
        assert run.returncode == 0, run.err
        out = run.stdout
    fields = dict(line.split(" ", 1) for line in out.decode().splitlines())
    assert fields["exit"] == "0"
    return Path(fields["patch"]).read_bytes()


def _restore(world: World, files: dict[Path, bytes | None]) -> None:
    for path, content in files.items():
        if content is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(content)


def _command_tree(world: World, dest: Path) -> Path:
    """A clone of the repository where COMMAND ran directly."""
    git("clone", "-q", world.repo, dest, cwd=dest.parent, env=world.env)
    subprocess.run(["sh", "-c", COMMAND], cwd=dest, env=world.env, check=True)
    return dest


@pytest.mark.parametrize("level", ["repository", "global", "command line", "environment"])
def test_configuration_never_changes_the_patch(world: World, tmp_path: Path, level: str) -> None:
    """Each setting alone and all together at repository and global level;
    all together for ``git -c`` and ``GIT_CONFIG_COUNT`` (git-isopatch drops
    both from its own git calls, so the settings one by one add nothing)."""
    repo = world.repo
    baseline = _capture(world, (), {}, "none")
    # the baseline is right: it reproduces the command's tree
    base = git("rev-parse", "HEAD", cwd=repo, env=world.env).decode().strip()
    (tmp_path / "baseline.patch").write_bytes(baseline)
    checkout = apply_to_clean_checkout(
        repo, base, tmp_path / "baseline.patch", tmp_path / "checkout", world.env
    )
    assert tree_manifest(checkout) == tree_manifest(_command_tree(world, tmp_path / "direct"))

    before = repo_state(repo, world.env)
    config_files = {
        repo / ".git" / "config": (repo / ".git" / "config").read_bytes(),
        Path(world.env["HOME"]) / ".gitconfig": None,
    }
    together = Setting(
        "all together",
        tuple(pair for s in world.settings for pair in s.config),
        {k: v for s in world.settings for k, v in s.environ.items()},
        funcname=True,
    )
    alone = world.settings if level in ("repository", "global") else []
    mismatches = []
    for setting in [*alone, together]:
        try:
            patch = _capture(world, setting.config, setting.environ, level)
        finally:
            _restore(world, config_files)
        if setting.funcname:
            same = _without_funcname(patch) == _without_funcname(baseline)
        else:
            same = patch == baseline
        if not same:
            mismatches.append(setting.name)
    assert mismatches == [], ", ".join(mismatches)
    assert {p.name: p.read_text() for p in world.marks.iterdir()} == {}  # nothing ran
    assert repo_state(repo, world.env) == before


def test_each_setting_changes_plain_git_diff(world: World, tmp_path: Path) -> None:
    """The witness: in a clone where the command ran, ``git diff`` prints
    something else under each setting, so the test above can fail."""
    probe = _command_tree(world, tmp_path / "probe")
    git("add", "--intent-to-add", ".", cwd=probe, env=world.env)

    def diff(config: tuple[tuple[str, str], ...], environ: dict[str, str]) -> bytes:
        pairs = [word for key, value in config for word in ("-c", f"{key}={value}")]
        return git(*pairs, "diff", "HEAD", cwd=probe / "sub", env={**world.env, **environ})

    plain = diff((), {})
    unchanged = [s.name for s in world.settings if s.witness and diff(s.config, s.environ) == plain]
    assert unchanged == []


@pytest.mark.parametrize("level", ["global", "environment"])
def test_autocrlf_patch_holds_the_content_git_stores(env, make_repo, tmp_path, level) -> None:
    """``core.autocrlf`` is not diff output but content conversion: the
    worktree is checked out as the user's own checkout is (CRLF here), and
    the patch holds what git would store (LF), like ``git diff``.  ``git
    apply`` on a checkout made with the same configuration reproduces the
    command's files byte for byte, except a change of line endings alone,
    which is no change for git either (gitattributes(5), ``text``)."""
    repo = make_repo({"t.txt": "a\nb\n", "u.txt": "x\n"})
    if level == "global":
        git("config", "--global", "core.autocrlf", "true", cwd=repo, env=env)
        crlf_env = env
    else:
        crlf_env = {
            **env,
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "core.autocrlf",
            "GIT_CONFIG_VALUE_0": "true",
        }
    command = "od -c t.txt > \"$OUT\"; printf 'c\\r\\n' >> t.txt; printf 'new\\r\\n' > n.txt; "
    command += "printf 'x\\n' > u.txt"
    seen = tmp_path / "seen"
    seen.touch()  # written outside the worktree: really writable in the sandbox
    run = isopatch(
        "--keep", "--porcelain", "--allow-write", seen, "--", "sh", "-c", command,
        cwd=repo, env={**crlf_env, "OUT": str(seen)},
    )  # fmt: skip
    assert run.returncode == 0, run.err
    fields = run.fields()
    worktree = Path(fields["worktree"])
    try:
        assert "\\r" in seen.read_text()  # the command saw CRLF, as in a checkout
        patch = Path(fields["patch"])
        assert b"\r" not in patch.read_bytes()
        assert b"u.txt" not in patch.read_bytes()
        checkout = apply_to_clean_checkout(
            repo, fields["base"], patch, tmp_path / "checkout", crlf_env
        )
        for name in ("t.txt", "n.txt"):
            assert (checkout / name).read_bytes() == (worktree / name).read_bytes()
        assert (worktree / "t.txt").read_bytes() == b"a\r\nb\r\nc\r\n"
        assert (checkout / "u.txt").read_bytes() == b"x\r\n"  # the line-ending-only change
    finally:
        git("worktree", "remove", "--force", worktree, cwd=repo, env=env)
