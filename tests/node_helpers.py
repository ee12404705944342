"""The Node project of ``tests/fixtures/node-prettier`` (prettier, pinned by
its ``package-lock.json``), installed once per test session from the npm
registry: a fixture of two sections (includes, packaging)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

NODE_FIXTURE = Path(__file__).resolve().parent / "fixtures" / "node-prettier"


@pytest.fixture(scope="session")
def prettier_node_modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``npm ci`` of the fixture, once per session (shared by xdist workers
    through a lock file); returns its ``node_modules``."""
    npm = shutil.which("npm")
    assert npm is not None, "the tests that use this fixture are marked needs('npm')"
    lock_bytes = (NODE_FIXTURE / "package-lock.json").read_bytes()
    key = hashlib.sha256(lock_bytes).hexdigest()[:16]
    shared = tmp_path_factory.getbasetemp().parent
    target = shared / f"npm-prettier-{key}"
    with open(shared / f"npm-prettier-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "installed").exists():
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(NODE_FIXTURE, target)
            subprocess.run(
                [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
                cwd=target,
                env={
                    **os.environ,
                    "npm_config_cache": str(shared / "npm-cache"),
                    "npm_config_update_notifier": "false",
                },
                check=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                timeout=600,
            )
            (target / "installed").touch()
    return target / "node_modules"
