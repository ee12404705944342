"""The result is versioned and described (design: Porcelain v1): the JSON
Schemas ship in the package and in its wheel, list the porcelain keys in
the porcelain's order, and the manual page's table of keys is the same
table; the check every ``--json`` run of the suite goes through can fail."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest
from schema_helpers import check_against, check_json_output, json_schema_of, schema

from git_isopatch.render import PORCELAIN_KEYS

ROOT = Path(__file__).resolve().parents[2]

#: ``list --porcelain`` keys in their order (render.worktree_list_porcelain).
LIST_KEYS = [
    "worktree",
    "state",
    "pid",
    "created",
    "head",
    "command",
    "prunable",
    "session",
    "size",
]


def test_the_schemas_are_json_schemas_of_version_1() -> None:
    for name in ("result", "list"):
        jsonschema.Draft202012Validator.check_schema(schema(name))
    assert schema("result")["properties"]["version"] == {
        "description": "the version of this format",
        "const": 1,
    }


def test_the_result_schema_lists_the_porcelain_keys_in_their_order() -> None:
    assert tuple(schema("result")["properties"]) == PORCELAIN_KEYS


def test_the_list_schema_lists_the_list_porcelain_keys_in_their_order() -> None:
    assert list(schema("list")["items"]["properties"]) == LIST_KEYS


def _manual_keys(section: str, end: str) -> list[str]:
    """The keys of the manual page's table in ``section`` (up to ``end``):
    the bold words of each term line (a line not indented)."""
    text = (ROOT / "man" / "git-isopatch.rst").read_text(encoding="utf-8")
    table = text.split(section, 1)[1].split(end, 1)[0]
    keys = []
    for line in table.splitlines():
        if line.startswith("**"):
            keys += re.findall(r"\*\*([a-z][a-z-]*)\*\*", line)
    return keys


def test_the_manual_pages_table_of_keys_is_the_schemas() -> None:
    keys = _manual_keys("Porcelain v1\n------------\n", "A value that holds a path")
    assert keys == list(schema("result")["properties"])


def test_the_built_manual_page_is_current() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "man" / "build.py"), "--check"], capture_output=True
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    (built,) = out.glob("git_isopatch-*.whl")
    return built


def test_the_wheel_holds_the_schemas(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    for name in ("result", "list"):
        data = zipfile.ZipFile(wheel).read(f"git_isopatch/schema/{name}.json")
        assert json.loads(data) == schema(name)
    assert "git_isopatch/schema/result.json" in names


def test_a_run_and_a_fatal_error_obey_the_schema() -> None:
    run = {
        "version": 1,
        "command": ["make", "fmt"],
        "base": "a" * 40,
        "exit": 0,
        "patch": "/tmp/p",
        "files": 1,
        "path": [{"status": "R100", "path": "new", "old-path": "old"}],
        "insertions": 0,
        "deletions": 0,
        "duration": 0.25,
    }
    check_against("result", run)
    check_against("result", {"version": 1, "error": "bad", "error-code": "unknown-revision"})


@pytest.mark.parametrize(
    "broken",
    [
        {"error": "bad", "error-code": "x"},  # no version
        {"version": 2, "error": "bad", "error-code": "x"},
        {"version": 1, "error": "bad"},  # an error without its code
        {"version": 1, "command": ["x"], "base": "a" * 40, "exit": "0"},  # a string
        {"version": 1, "command": ["x"], "base": "a" * 40, "exit": 0, "path": ["M x"]},
        {"version": 1, "command": ["x"], "base": "a" * 40, "exit": 0, "timed-out": "true"},
        {"version": 1, "command": ["x"], "base": "a" * 40, "exit": 0, "unknown": 1},
        {"version": 1, "base": "a" * 40, "command": ["x"], "exit": 0},  # out of order
        {"version": 1, "command": ["x"], "exit": 0},  # neither a run nor a failure
    ],
)
def test_the_check_refuses_what_the_format_does_not_say(broken: dict) -> None:
    with pytest.raises((jsonschema.ValidationError, AssertionError)):
        check_against("result", broken)


def test_the_check_runs_on_json_outputs_only() -> None:
    assert json_schema_of(["--json", "--", "true"]) == "result"
    assert json_schema_of(["-q", "--", "tool", "--json"]) is None
    assert json_schema_of(["list", "--json"]) == "list"
    assert json_schema_of(["--porcelain", "--", "true"]) is None
    with pytest.raises(AssertionError):
        check_json_output(["--json", "--", "x"], b'{"version": 1}\n{"version": 1}\n', 0)


def test_a_list_obeys_its_schema() -> None:
    check_against("list", [])
    check_against(
        "list",
        [{"worktree": "/w", "state": "kept", "pid": 9, "command": ["a", "b"]}],
    )
    with pytest.raises(jsonschema.ValidationError):
        check_against("list", [{"worktree": "/w", "state": "gone"}])
