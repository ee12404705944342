"""Submodule clones share nothing writable with the user's
``.git/modules`` (issue 19, "Broken" 3: ``--recurse-submodules``
hard-linked ``.git/modules/<name>`` objects into the writable private
folder, so seven bytes written into a pack there corrupted the user's
submodule repository)."""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_helpers import git, isopatch

FILE_PROTOCOL = ("-c", "protocol.file.allow=always")

#: Lists the submodule's object files with more than one link (shared
#: with another folder), then writes into each of them (loose objects and
#: packs are read-only files: chmod first, as an attacker would).
SCRIPT = """\
objects=$(git -C sub rev-parse --path-format=absolute --git-common-dir)/objects
find "$objects" -type f -links +1 > "$TMPDIR/linked"
cat "$TMPDIR/linked"
while read -r f; do
  chmod u+w "$f"; printf 'garbage' | dd of="$f" conv=notrunc 2>/dev/null
done < "$TMPDIR/linked"
echo done
"""


@pytest.mark.parametrize("options", [(), ("--sandbox",)], ids=["plain", "sandbox"])
def test_a_submodule_clone_holds_no_link_to_the_users_objects(
    env, make_repo, tmp_path: Path, options
) -> None:
    make_repo({"s": "s\n"}, name="sub-up")
    repo = make_repo({"t": "t\n"})
    git(*FILE_PROTOCOL, "submodule", "add", "-q", tmp_path / "sub-up", "sub", cwd=repo, env=env)
    git("commit", "-q", "-m", "submodule", cwd=repo, env=env)
    git("-C", "sub", "gc", "-q", cwd=repo, env=env)  # a pack, as a real one has
    run = isopatch(
        "--porcelain", "--recurse-submodules", *options, "--", "sh", "-c", SCRIPT,
        cwd=repo, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.err
    assert Path(run.fields()["stdout"]).read_text() == "done\n"
    git("fsck", "--strict", cwd=repo / "sub", env=env)
    git("fsck", "--strict", cwd=tmp_path / "sub-up", env=env)
    assert git("-C", "sub", "cat-file", "-p", "HEAD:s", cwd=repo, env=env) == b"s\n"
