"""The command the round-trip tests hand to git-isopatch.

``python change_script.py <spec.json> [<manifest.json>]`` applies the
changes listed in the spec to the current folder (the worktree top), then
writes the manifest of the resulting tree, which the test compares with a
clean checkout of the base after ``git apply``.  A change that does not fit the
tree as it stands (a rename of a missing file, say) is skipped: what
counts is the tree the command left behind.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys

from repo_helpers import tree_manifest


def _clear(path: str) -> None:
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)


def _make_parent(path: str) -> bool:
    parent = os.path.dirname(path)
    if not parent:
        return True
    probe = parent
    while probe:  # a file or a link where a folder must go: skip the change
        if os.path.lexists(probe) and (os.path.islink(probe) or not os.path.isdir(probe)):
            return False
        probe = os.path.dirname(probe)
    os.makedirs(parent, exist_ok=True)
    return True


def apply_change(change: dict) -> None:
    kind = change["kind"]
    path = os.fsdecode(base64.b64decode(change.get("path", "")))
    if kind == "write":
        if not _make_parent(path) or os.path.isdir(path) and not os.path.islink(path):
            return
        _clear(path)
        with open(path, "wb") as handle:
            handle.write(base64.b64decode(change["data"]))
        os.chmod(path, 0o755 if change.get("exec") else 0o644)
    elif kind == "remove":  # whatever is there, a whole folder too
        _clear(path)
    elif kind == "delete":
        if os.path.lexists(path) and not (os.path.isdir(path) and not os.path.islink(path)):
            os.unlink(path)
    elif kind == "chmod":
        if os.path.isfile(path) and not os.path.islink(path):
            os.chmod(path, 0o755 if change.get("exec") else 0o644)
    elif kind == "symlink":
        if not _make_parent(path) or os.path.isdir(path) and not os.path.islink(path):
            return
        _clear(path)
        os.symlink(os.fsdecode(base64.b64decode(change["target"])), path)
    elif kind == "rename":
        target = os.fsdecode(base64.b64decode(change["to"]))
        if not os.path.lexists(path) or os.path.lexists(target) or not _make_parent(target):
            return
        if os.path.isdir(path) and not os.path.islink(path):
            return
        os.rename(path, target)
    elif kind == "commit":
        subprocess.run(["git", "add", "-A"], check=True)
        subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "by the command"], check=True)
    elif kind == "git":  # its index, HEAD: what git makes of the tree as it stands
        git = ["git", *change["args"]]
        subprocess.run(git, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    elif kind == "ignored":
        os.makedirs("ignored", exist_ok=True)
        with open(os.path.join("ignored", "out.bin"), "wb") as handle:
            handle.write(b"\0ignored output\n")


def main() -> None:
    spec_path, manifest_path = sys.argv[1], sys.argv[2:]
    with open(spec_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    for change in spec["changes"]:
        apply_change(change)
    if not manifest_path:
        return
    manifest = tree_manifest(os.getcwd(), exclude=(".git", "ignored"))
    with open(manifest_path[0], "w", encoding="utf-8") as handle:
        json.dump(
            [
                [
                    base64.b64encode(k).decode(),
                    list(v if v[0] == "file" else ("link", base64.b64encode(v[1]).decode())),
                ]
                for k, v in sorted(manifest.items())
            ],
            handle,
        )


if __name__ == "__main__":
    main()
