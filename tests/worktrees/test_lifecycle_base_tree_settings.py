"""A base tree is chosen by the settings that convert files on checkout
too: one made under other settings (``core.autocrlf``, ``core.eol``, an
attributes file outside the tree) serves no run, whose patch and view are
then what an unconfined run's are."""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_helpers import git, isopatch


def _run(repo: Path, env: dict[str, str], where: str, *command: str) -> tuple[bytes, bytes]:
    """The patch and the output of ``command`` run ``where``."""
    run = isopatch("--porcelain", where, "--", *command, cwd=repo, env=env)
    assert run.returncode == 0, run.err
    fields = run.fields()
    return Path(fields["patch"]).read_bytes(), Path(fields["stdout"]).read_bytes()


def _attributes_file(home: Path, value: str) -> list[tuple[str, str]]:
    (home / "attributes").write_text(value)
    return [("core.attributesFile", str(home / "attributes")), ("core.eol", "crlf")]


CASES = {
    "autocrlf": lambda home, on: [("core.autocrlf", "true" if on else "false")],
    "eol": lambda home, on: [("core.eol", "crlf" if on else "lf")],
    "attributes-file": lambda home, on: _attributes_file(home, "*.txt text\n" if on else ""),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_base_tree_made_under_other_conversions_serves_no_run(env, make_repo, case) -> None:
    files = {"a.txt": "one\ntwo\n", "b.txt": "three\n"}
    if case == "eol":
        files[".gitattributes"] = "*.txt text\n"
    repo = make_repo(files)
    home = Path(env["HOME"])
    for key, value in CASES[case](home, True):
        git("config", "--global", key, value, cwd=repo, env=env)
    _, seen = _run(repo, env, "--sandbox", "cat", "a.txt")
    assert seen == b"one\r\ntwo\r\n"  # the base tree is checked out with CRLF
    for key, value in CASES[case](home, False):
        git("config", "--global", key, value, cwd=repo, env=env)
    for command in (["true"], ["touch", "a.txt"], ["sh", "-c", "echo x >> b.txt"]):
        expected = _run(repo, env, "--no-sandbox", *command)
        assert _run(repo, env, "--sandbox", *command) == expected
    patch, seen = _run(repo, env, "--sandbox", "cat", "a.txt")
    assert seen == b"one\ntwo\n" and patch == b""
