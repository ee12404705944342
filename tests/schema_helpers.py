"""The JSON Schemas that ship in the package (``git_isopatch/schema/``),
and the check that every JSON output the test suite sees obeys them
(design: Porcelain v1, "its JSON Schema ships in the package and every
output is tested against it").

:func:`check_json_output` runs on every ``git-isopatch --json`` that
:func:`repo_helpers.isopatch` runs.  It is stricter than the schema, which
lets consumers meet keys of a later release: here every key must be one the
schema names, in the schema's order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

import jsonschema


@cache
def schema(name: str) -> dict[str, Any]:
    """``result`` or ``list``: the schema as installed with the package."""
    text = (resources.files("git_isopatch") / "schema" / f"{name}.json").read_text("utf-8")
    loaded = json.loads(text)
    jsonschema.Draft202012Validator.check_schema(loaded)
    return loaded


def check_against(name: str, value: object) -> None:
    """``value`` obeys schema ``name``, and names no key it does not know,
    in its order."""
    known = schema(name)
    jsonschema.Draft202012Validator(
        known, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    ).validate(value)
    objects = value if isinstance(value, list) else [value]
    order = list((known["items"] if isinstance(value, list) else known)["properties"])
    for one in objects:
        keys = list(one)
        assert set(keys) <= set(order), set(keys) - set(order)
        assert keys == sorted(keys, key=order.index), keys


def json_schema_of(args: Sequence[str]) -> str | None:
    """Which schema the output of ``git-isopatch <args>`` obeys: ``list``
    for ``list --json``, ``result`` for a run with ``--json``, else
    ``None`` (the options end at ``--``)."""
    options = list(args[: list(args).index("--")] if "--" in args else args)
    if "--json" not in options:
        return None
    return "list" if options[:1] == ["list"] else "result"


def check_json_output(args: Sequence[str], stdout: bytes, returncode: int) -> None:
    """A ``--json`` run's stdout is one line of JSON obeying its schema;
    a usage error (129) prints one too, but none with ``--porcelain`` also."""
    name = json_schema_of(args)
    if name is None or (returncode == 129 and not stdout):
        return
    assert stdout.endswith(b"\n") and stdout.count(b"\n") == 1, stdout[-200:]
    check_against(name, json.loads(stdout))
