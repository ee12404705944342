"""pygit2 loads without the TLS set-up of a network transport
(:mod:`git_isopatch.git.library`): a run reads no certificate and loads no
``ssl``, whatever the user's OpenSSL variables say, and the command still
sees those variables as the user set them."""

from __future__ import annotations

import subprocess
import sys

import pytest
from repo_helpers import isopatch
from startup_helpers import imported

MODES = ["--sandbox", "--no-sandbox"]


def _seen_by_the_command(done: subprocess.CompletedProcess) -> bytes:
    """The one line the command wrote to ``seen``, from the patch on stdout."""
    added = [
        line for line in done.stdout.splitlines() if line.startswith(b"+") and line != b"+++ b/seen"
    ]
    assert len(added) == 1, done.stdout
    return added[0][1:]


@pytest.mark.hostile
@pytest.mark.parametrize("mode", MODES)
def test_a_certificate_file_openssl_cannot_read_breaks_no_run(env, make_repo, tmp_path, mode):
    """``SSL_CERT_FILE`` naming a file that holds no certificate made
    libgit2's start fail as pygit2 loaded: a traceback, no run.  The run
    reads no certificate now, and the command sees the variable as set."""
    junk = tmp_path / "junk.pem"
    junk.write_bytes(b"not a certificate\n")
    env = {**env, "SSL_CERT_FILE": str(junk)}
    command = ["sh", "-c", 'printf "%s\\n" "$SSL_CERT_FILE" > seen']
    done = isopatch("-q", "--stdout", mode, "--", *command, cwd=make_repo(), env=env)
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr
    assert _seen_by_the_command(done) == str(junk).encode()


@pytest.mark.parametrize("mode", MODES)
def test_the_command_sees_no_certificate_variable_the_user_did_not_set(env, make_repo, mode):
    env = {key: value for key, value in env.items() if key != "SSL_CERT_FILE"}
    command = ["sh", "-c", 'printf "%s\\n" "${SSL_CERT_FILE-unset}" > seen']
    done = isopatch("-q", "--stdout", mode, "--", *command, cwd=make_repo(), env=env)
    assert done.returncode == 0, done.stderr
    assert _seen_by_the_command(done) == b"unset"


@pytest.mark.parametrize("mode", MODES)
def test_a_run_loads_no_ssl(env, make_repo, mode) -> None:
    loaded = imported(["-q", mode, "--", "true"], make_repo(), env)
    assert "pygit2" in loaded
    assert {"ssl", "_ssl"} & loaded == set()


_STAND_IN_PROBE = """
import sys
from git_isopatch.git import library
stand_in = library._without_certificates()
sys.modules["ssl"] = stand_in
from ssl import get_default_verify_paths
assert get_default_verify_paths().cafile is None
assert sys.modules["ssl"] is stand_in
from ssl import create_default_context
import ssl
assert ssl is not stand_in and ssl.create_default_context is create_default_context
pygit2 = library.load_pygit2()
assert pygit2.settings.ssl_cert_file is None
print("ok")
"""


def test_any_other_name_of_ssl_is_the_real_module_s(env) -> None:
    """The stand-in answers only what pygit2 asks while it loads; any other
    name loads the real ``ssl`` and is its own; a pygit2 loaded after the
    real ``ssl`` reads no certificate either."""
    done = subprocess.run(
        [sys.executable, "-c", _STAND_IN_PROBE], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok\n"


def test_the_first_load_reads_no_certificate_and_restores_the_environment(env) -> None:
    probe = (
        "import os, sys\n"
        "os.environ['SSL_CERT_FILE'] = 'mine'\n"
        "from git_isopatch.git.library import load_pygit2\n"
        "pygit2 = load_pygit2()\n"
        "print(pygit2.settings.ssl_cert_file, os.environ['SSL_CERT_FILE'], 'ssl' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "None mine False\n"
