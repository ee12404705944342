"""``git isopatch mcp``, the Model Context Protocol server (design: Command
line, "Subcommands"), end to end: the SDK's own client spawns the installed
``git-isopatch mcp`` over stdio and calls its tools on real repositories.
Parallel captures are independent runs, a timeout is a result, a bad base
or a bad folder is a tool error and the server goes on, ``apply`` is all or
nothing; without the SDK, ``git isopatch mcp`` says what to install."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
from repo_helpers import ISOPATCH, git, isopatch, registered_worktrees, repo_state
from sandbox_helpers import CONNECT, REFUSED_BWRAP
from startup_helpers import imported

mcp = pytest.importorskip(
    "mcp", reason="needs the Python package 'mcp' (the mcp and test extras install it)"
)
import anyio  # noqa: E402 (the SDK brings it)
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

#: The synopsis of ``git isopatch mcp``.
SYNOPSIS = (
    "git isopatch mcp [-C <path>] [--allow-unconfined] [--allow-network] [--allow-write <path>]"
)

#: How long each call may take before the test fails (the server must answer).
CALL_TIMEOUT = 120


def serve(repo: Path, env: dict[str, str], tmp_path: Path, body, *options: str, roots=None):
    """Start ``git-isopatch mcp [<options>]`` in ``repo`` with the SDK's
    stdio client, run ``await body(client)`` and return what it returns;
    the server's stderr goes to ``tmp_path/server.err``.  With ``roots``
    (folders) the client declares them, on a connection of the protocol
    before 2026-07-28 (which deprecates roots)."""

    async def list_roots(_context):
        from mcp.types import ListRootsResult, Root

        return ListRootsResult(roots=[Root(uri=Path(f).as_uri()) for f in roots])

    async def main():
        params = StdioServerParameters(
            command=str(ISOPATCH), args=["mcp", *options], cwd=str(repo), env=dict(env)
        )
        rooted = {"list_roots_callback": list_roots, "mode": "legacy"} if roots is not None else {}
        with open(tmp_path / "server.err", "w") as errlog:
            with anyio.fail_after(CALL_TIMEOUT):
                async with Client(stdio_client(params, errlog=errlog), **rooted) as client:
                    return await body(client)

    return anyio.run(main)


def text(result) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def test_lists_capture_and_apply_with_their_parameters(env, make_repo, tmp_path) -> None:
    repo = make_repo()

    async def body(client):
        return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = serve(repo, env, tmp_path, body)
    assert set(tools) == {"capture", "apply", "end_session"}
    capture = tools["capture"].input_schema
    assert capture["required"] == ["command"]
    assert capture["properties"]["command"]["type"] == "array"
    assert capture["properties"]["command"]["minItems"] == 1
    assert {
        "repo", "base", "include_uncommitted", "staged", "link", "copy", "no_link", "no_copy",
        "recurse_submodules", "sandbox", "allow_write", "allow_network", "timeout", "keep",
        "session", "patch_limit",
    } == set(capture["properties"]) - {"command"}  # fmt: skip
    assert tools["end_session"].input_schema["required"] == ["session"]
    assert tools["apply"].input_schema["required"] == ["patch"]
    assert set(tools["apply"].input_schema["properties"]) == {"patch", "repo"}
    assert tools["capture"].description and tools["apply"].description


def test_capture_returns_the_json_result_with_the_patch_inline(env, make_repo, tmp_path) -> None:
    """The same keys as ``--json`` prints for the same run, and the patch
    text, which ``git apply`` takes as it is."""
    repo = make_repo({"README": "hello\n"})
    before = repo_state(repo, env)
    command = ["sh", "-c", "echo world >> README"]

    async def body(client):
        return await client.call_tool("capture", {"command": command})

    result = serve(repo, env, tmp_path, body)
    assert not result.is_error, text(result)
    got = result.structured_content
    assert json.loads(text(result)) == got
    cli = json.loads(isopatch("--json", "--", *command, cwd=repo, env=env).out)
    assert set(got) - {"patch-text", "patch-text-truncated"} == set(cli)
    assert got["exit"] == 0 and got["files"] == 1 and got["base"] == cli["base"]
    assert got["patch-text-truncated"] is False
    assert got["patch-text"].encode() == Path(got["patch"]).read_bytes()
    assert "+world" in got["patch-text"]
    assert repo_state(repo, env) == before


def test_a_session_of_captures_then_end_session(env, make_repo, tmp_path) -> None:
    """Two calls with ``session`` are two steps of one session; ``end_session``
    removes it, and ending it again is a tool error."""
    repo = make_repo({"README": "hello\n"})
    before = repo_state(repo, env)

    async def body(client):
        steps = [
            await client.call_tool("capture", {"command": command, "session": "agent"})
            for command in (["sh", "-c", "echo a > a.txt"], ["sh", "-c", "echo b > b.txt"])
        ]
        ended = await client.call_tool("end_session", {"session": "agent"})
        again = await client.call_tool("end_session", {"session": "agent"})
        return steps, ended, again

    steps, ended, again = serve(repo, env, tmp_path, body)
    first, second = (step.structured_content for step in steps)
    assert [p["path"] for p in second["path"]] == ["b.txt"]
    assert second["session"] == "agent" and second["session-files"] == 2
    assert not ended.is_error and ended.structured_content == {"ended": True, "session": "agent"}
    assert again.is_error and "fatal: no session 'agent'" in text(again)
    assert registered_worktrees(repo, env) == []
    assert repo_state(repo, env) == before


def test_parallel_captures_are_independent_runs(env, make_repo, tmp_path) -> None:
    """Three calls at once: each command waits until all three have
    started (so they really run together), then changes the same file its
    own way; three results, three patches, the checkout untouched."""
    repo = make_repo({"README": "hello\n"})
    before = repo_state(repo, env)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    wait = (
        'touch "$0/$1"; n=0; '
        'while [ "$(ls "$0" | wc -l)" -lt 3 ]; do n=$((n+1)); [ $n -lt 600 ] || exit 9; '
        "sleep 0.05; done; "
        'echo "candidate $1" > README'
    )

    async def body(client):
        results = {}

        async def one(name):
            results[name] = await client.call_tool(
                "capture",
                {"command": ["sh", "-c", wait, str(barrier), name], "sandbox": False},
            )

        async with anyio.create_task_group() as group:
            for name in ("a", "b", "c"):
                group.start_soon(one, name)
        return results

    results = serve(repo, env, tmp_path, body, "--allow-unconfined")
    patches = set()
    for name, result in results.items():
        assert not result.is_error, text(result)
        got = result.structured_content
        assert got["exit"] == 0, got  # 9: the three did not run at once
        assert f"+candidate {name}" in got["patch-text"]
        patches.add(got["patch"])
    assert len(patches) == 3
    assert repo_state(repo, env) == before


def test_a_timeout_is_a_result_with_exit_124(env, make_repo, tmp_path) -> None:
    repo = make_repo()

    async def body(client):
        started = time.monotonic()
        result = await client.call_tool(
            "capture", {"command": ["sh", "-c", "echo x > new; sleep 60"], "timeout": 1}
        )
        return result, time.monotonic() - started

    result, took = serve(repo, env, tmp_path, body)
    assert not result.is_error, text(result)
    assert result.structured_content["exit"] == 124
    assert "+x" in result.structured_content["patch-text"]  # captured all the same
    assert took < 30


#: Bad calls of ``capture`` and what the tool error says.
BAD_CALLS = [
    ({"command": ["true"], "base": "no-such-rev"}, "fatal: unknown revision 'no-such-rev'"),
    ({"command": ["true"], "base": "--output=/tmp/x"}, "'--output=/tmp/x'"),
    ({"command": ["true"], "repo": "/"}, "outside the folders this server works in"),
    ({"command": ["true"], "repo": "no/such/folder"}, "no/such/folder"),
    ({"command": ["true"], "timeout": -1}, "timeout"),
    ({"command": ["true"], "link": ["../outside"]}, "../outside"),
    ({"command": []}, "command"),
    ({"command": "true"}, "command"),
    ({}, "command"),
]


def test_bad_input_is_a_tool_error_and_the_server_goes_on(env, make_repo, tmp_path) -> None:
    """Each bad call is an ``isError`` result saying what was wrong, and the
    next call works; nothing changes in the repository.  A fatal run's
    result (its ``error-code``) ends the message."""
    repo = make_repo()
    before = repo_state(repo, env)

    async def body(client):
        answers = []
        for arguments, _ in BAD_CALLS:
            bad = await client.call_tool("capture", arguments)
            good = await client.call_tool("capture", {"command": ["true"]})
            answers.append((bad, good))
        return answers

    answers = serve(repo, env, tmp_path, body)
    for (arguments, says), (bad, good) in zip(BAD_CALLS, answers, strict=True):
        assert bad.is_error and says in text(bad), (arguments, text(bad))
        assert not good.is_error and good.structured_content["exit"] == 0
    first = text(answers[0][0]).splitlines()
    assert json.loads(first[-1])["error-code"] == "unknown-revision"
    assert repo_state(repo, env) == before


def test_apply_brings_a_captured_patch_home_all_or_nothing(env, make_repo, tmp_path) -> None:
    """``apply`` writes the work tree, never the index; a patch that no
    longer applies in full writes nothing and is a tool error."""
    repo = make_repo({"a.txt": "one\n", "b.txt": "two\n"})
    command = ["sh", "-c", "echo ONE > a.txt; echo TWO > b.txt"]

    async def body(client):
        captured = await client.call_tool("capture", {"command": command})
        patch = captured.structured_content["patch"]
        applied = await client.call_tool("apply", {"patch": patch})
        # now b.txt alone goes back: a second apply fits a.txt, not b.txt
        (repo / "a.txt").write_text("one\n")
        (repo / "b.txt").write_text("edited\n")
        refused = await client.call_tool("apply", {"patch": patch})
        missing = await client.call_tool("apply", {"patch": str(tmp_path / "none.patch")})
        return applied, refused, missing

    index = (repo / ".git" / "index").read_bytes()
    applied, refused, missing = serve(repo, env, tmp_path, body)
    assert not applied.is_error, text(applied)
    assert applied.structured_content["applied"] is True
    assert refused.is_error and "does not apply" in text(refused), text(refused)
    assert (repo / "a.txt").read_text() == "one\n"  # nothing written
    assert (repo / "b.txt").read_text() == "edited\n"
    assert missing.is_error and "no such patch file" in text(missing)
    assert (repo / ".git" / "index").read_bytes() == index


def test_apply_in_a_subfolder_applies_at_the_top(env, make_repo, tmp_path) -> None:
    repo = make_repo({"top.txt": "a\n", "sub/file": "b\n"})

    async def body(client):
        captured = await client.call_tool("capture", {"command": ["sh", "-c", "echo c > top.txt"]})
        return await client.call_tool(
            "apply", {"patch": captured.structured_content["patch"], "repo": "sub"}
        )

    result = serve(repo, env, tmp_path, body)
    assert not result.is_error, text(result)
    assert (repo / "top.txt").read_text() == "c\n"


def test_patch_text_is_cut_after_a_whole_line_or_left_out(env, make_repo, tmp_path) -> None:
    repo = make_repo({"big.txt": "".join(f"line {n}\n" for n in range(2000))})
    latin1 = ["sh", "-c", "printf 'caf\\351\\n' > latin1.txt"]

    async def body(client):
        command = ["sh", "-c", "sed -i 's/line/LINE/' big.txt"]
        short = await client.call_tool("capture", {"command": command, "patch_limit": 1000})
        none = await client.call_tool("capture", {"command": command, "patch_limit": 0})
        binary = await client.call_tool("capture", {"command": latin1})
        return short, none, binary

    short, none, binary = serve(repo, env, tmp_path, body)
    got = short.structured_content
    whole = Path(got["patch"]).read_bytes()
    assert got["patch-text-truncated"] is True
    assert 0 < len(got["patch-text"].encode()) <= 1000
    assert got["patch-text"].endswith("\n") and whole.startswith(got["patch-text"].encode())
    assert none.structured_content["patch-text-truncated"] is True
    assert "patch-text" not in none.structured_content
    assert binary.structured_content["files"] == 1
    assert "patch-text" not in binary.structured_content  # not UTF-8
    assert binary.structured_content["patch-text-truncated"] is True


def test_without_the_sdk_mcp_says_what_to_install(env, make_repo, tmp_path) -> None:
    """An ``mcp`` that cannot be imported (as when the extra is not
    installed): one ``fatal:`` line, a ``hint:`` naming the extra, 128."""
    shadow = tmp_path / "shadow" / "mcp"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'mcp'\", name='mcp')\n"
    )
    environ = {**env, "PYTHONPATH": str(shadow.parent)}
    run = isopatch("mcp", cwd=make_repo(), env=environ)
    assert run.returncode == 128
    lines = run.err.splitlines()
    assert lines[0].startswith("fatal: the MCP server needs the 'mcp' package")
    assert lines[1:] == ["hint: pip install 'git-isopatch[mcp]'"]
    assert run.out == ""


def test_mcp_usage(env, make_repo) -> None:
    repo = make_repo()
    run = isopatch("mcp", "-h", cwd=repo, env=env)
    assert run.returncode == 129
    assert run.out.splitlines()[0] == f"usage: {SYNOPSIS}"
    bad = isopatch("mcp", "--bogus", cwd=repo, env=env)
    assert bad.returncode == 129 and bad.err.startswith("error: unknown option 'bogus'")
    assert f"   or: {SYNOPSIS}" in isopatch("-h", cwd=repo, env=env).out


def test_the_server_ends_when_its_client_closes_stdin(env, make_repo) -> None:
    done = subprocess.run(
        [str(ISOPATCH), "mcp"],
        cwd=make_repo(),
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""


def test_only_mcp_loads_the_sdk(env, make_repo) -> None:
    """Start-up does not grow: ``-h`` and a plain run load neither the SDK
    nor the server module."""
    repo = make_repo()
    for args in (["-h"], ["-q", "--", "true"], ["list"]):
        loaded = imported(args, repo, env)
        assert not {"mcp", "git_isopatch.mcp_server", "pydantic", "anyio"} & loaded, args


@pytest.mark.needs("git")
def test_completion_offers_mcp_and_its_option(env, make_repo) -> None:
    from test_cli_completion import complete

    repo = make_repo()
    first = complete("git isopatch mc", repo, env)
    # after an option, only programs on PATH of that name (the SDK may
    # install one called mcp): the subcommand is offered as the first word
    later = complete("git isopatch -q mc", repo, env)
    assert first.count("mcp ") == later.count("mcp ") + 1
    assert complete("git isopatch mcp -", repo, env) == [
        "-C ", "--allow-unconfined ", "--allow-network ", "--allow-write ",
    ]  # fmt: skip


def test_a_cancelled_call_stops_its_run_and_removes_its_worktree(env, make_repo, tmp_path) -> None:
    """The client gives up on a call: the run gets SIGTERM, stops its
    command and removes its worktree, as on Ctrl-C; the server goes on."""
    repo = make_repo()
    started = tmp_path / "started"

    async def body(client):
        with anyio.move_on_after(60) as scope:
            async with anyio.create_task_group() as group:

                async def call():
                    await client.call_tool(
                        "capture",
                        {"command": ["sh", "-c", f"touch {started}; sleep 120"], "sandbox": False},
                    )

                group.start_soon(call)
                while not started.exists():
                    await anyio.sleep(0.05)
                group.cancel_scope.cancel()
        assert not scope.cancelled_caught, "the command never started"
        for _ in range(300):  # its clean-up takes a moment
            if not registered_worktrees(repo, env):
                break
            await anyio.sleep(0.1)
        return await client.call_tool("capture", {"command": ["true"]})

    after = serve(repo, env, tmp_path, body, "--allow-unconfined")
    assert not after.is_error and after.structured_content["exit"] == 0
    assert registered_worktrees(repo, env) == []


def _described(schema: dict) -> dict:
    """``schema`` without what it says in words: its title and descriptions."""
    return {
        key: _described(value) if isinstance(value, dict) else value
        for key, value in schema.items()
        if key not in ("title", "description")
    }


def _options() -> set[str]:
    """Every option ``git isopatch -h`` lists (``--[no-]keep``: both)."""
    usage = subprocess.run([ISOPATCH, "-h"], capture_output=True, text=True).stdout
    found = set()
    for line in usage.splitlines():
        if line.startswith("    -"):
            for option in re.findall(r"(?<![\w-])-[\w\[\]-]+", line.split("  ")[2]):
                found.update({option.replace("[no-]", ""), option.replace("[no-]", "no-")})
    return found


def _capture_schema(env, make_repo, tmp_path) -> dict:
    async def body(client):
        return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = serve(make_repo(), env, tmp_path, body)
    assert tools["apply"].output_schema["required"] == ["applied", "patch"]
    return tools["capture"].output_schema


def test_the_output_schemas_are_the_shipped_schema(env, make_repo, tmp_path) -> None:
    """``capture`` describes its result with the schema that ships for
    ``--json`` (and the two keys MCP adds), in its own words, so the SDK's
    client checks every result against it; ``apply`` describes its own."""
    from schema_helpers import schema

    shipped = schema("result")
    output = _capture_schema(env, make_repo, tmp_path)
    assert set(output["properties"]) - set(shipped["properties"]) == {
        "patch-text",
        "patch-text-truncated",
    }
    del output["properties"]["patch-text"], output["properties"]["patch-text-truncated"]
    assert _described(output) == _described(shipped)


def test_the_capture_result_names_no_command_line_option(env, make_repo, tmp_path) -> None:
    """An MCP client calls a tool with arguments: its result names
    them, never the command line's options (which the shipped ``--json``
    schema names, for that command line)."""
    from schema_helpers import schema

    options = _options()
    assert {"--porcelain", "-z", "--apply", "--session", "--keep", "--no-keep"} <= options
    said = json.dumps(_capture_schema(env, make_repo, tmp_path))
    named = {o for o in options if re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", said)}
    assert named == set()
    shipped = json.dumps(schema("result"))
    assert {"--porcelain", "--apply", "--session"} <= {o for o in options if o in shipped}


def test_capture_carries_the_commands_output_inline(env, make_repo, tmp_path) -> None:
    """An agent reads the linter's message in the result: ``stdout-text``
    and ``stderr-text``, the files still named."""
    repo = make_repo()
    script = "echo 'app.py:1:1: F401 unused import'; echo 'Found 1 error.' >&2; exit 1"

    async def body(client):
        return await client.call_tool("capture", {"command": ["sh", "-c", script]})

    result = serve(repo, env, tmp_path, body)
    assert not result.is_error, text(result)
    got = result.structured_content
    assert got["exit"] == 1
    assert got["stdout-text"] == "app.py:1:1: F401 unused import\n"
    assert got["stderr-text"] == "Found 1 error.\n"
    assert Path(got["stderr"]).read_text() == "Found 1 error.\n"


def test_applying_an_empty_capture_is_applied_false(env, make_repo, tmp_path) -> None:
    repo = make_repo()
    before = repo_state(repo, env)

    async def body(client):
        captured = await client.call_tool("capture", {"command": ["true"]})
        assert captured.structured_content["files"] == 0
        return await client.call_tool("apply", {"patch": captured.structured_content["patch"]})

    result = serve(repo, env, tmp_path, body)
    assert not result.is_error, text(result)
    assert result.structured_content["applied"] is False
    assert repo_state(repo, env) == before


#: Calls that ask for more than a server started without options allows,
#: and the option each error names.
LOOSENING = [
    ({"sandbox": False}, "--allow-unconfined"),
    ({"allow_network": True}, "--allow-network"),
    ({"allow_write": ["{outside}"]}, "--allow-write"),
]


@pytest.mark.hostile
def test_an_agent_cannot_loosen_its_own_confinement(env, make_repo, tmp_path) -> None:
    """By default a call runs in the sandbox: ``sandbox: false``,
    ``allow_network`` and ``allow_write`` are tool errors naming the
    server's option that would allow them, and the command never runs."""
    repo = make_repo()
    outside = tmp_path / "outside"
    outside.mkdir()
    before = repo_state(repo, env)
    marker = outside / "ran"

    async def body(client):
        answers = []
        for arguments, _ in LOOSENING:
            asked = {
                k: [w.format(outside=outside) for w in v] if isinstance(v, list) else v
                for k, v in arguments.items()
            }
            command = ["sh", "-c", f"touch {marker}"]
            answers.append(await client.call_tool("capture", {"command": command, **asked}))
        return answers

    answers = serve(repo, env, tmp_path, body)
    for (arguments, option), answer in zip(LOOSENING, answers, strict=True):
        assert answer.is_error and option in text(answer), (arguments, text(answer))
    assert not marker.exists()
    assert repo_state(repo, env) == before


def test_the_operator_decides_what_calls_may_loosen(env, make_repo, tmp_path) -> None:
    """Started with the options, the same calls run: unconfined, with the
    network, writing a path under an ``--allow-write`` one (and not one
    outside it)."""
    repo = make_repo()
    allowed = tmp_path / "allowed"
    (allowed / "sub").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write = ["sh", "-c", f"echo hi > {allowed}/sub/out"]

    async def body(client):
        unconfined = await client.call_tool("capture", {"command": ["true"], "sandbox": False})
        network = await client.call_tool("capture", {"command": ["true"], "allow_network": True})
        writes = await client.call_tool(
            "capture", {"command": write, "allow_write": [str(allowed / "sub")]}
        )
        refused = await client.call_tool(
            "capture", {"command": ["true"], "allow_write": [str(elsewhere)]}
        )
        return unconfined, network, writes, refused

    options = ("--allow-unconfined", "--allow-network", "--allow-write", str(allowed))
    unconfined, network, writes, refused = serve(repo, env, tmp_path, body, *options)
    assert not unconfined.is_error and unconfined.structured_content["sandbox"] is False
    assert not network.is_error, text(network)
    assert not writes.is_error, text(writes)
    assert (allowed / "sub" / "out").read_text() == "hi\n"
    assert refused.is_error and "--allow-write" in text(refused)


@pytest.mark.hostile
def test_a_call_names_only_repositories_under_the_servers_folder(env, make_repo, tmp_path) -> None:
    """Another repository on the machine, and a link inside the folder that
    leads to it, are refused; a folder inside is not; the client's MCP
    roots add their folders."""
    repo = make_repo({"sub/file": "x\n"})
    other = make_repo(name="other")
    (repo / "sub" / "link").symlink_to(other)
    other_before = repo_state(other, env)
    touch = ["sh", "-c", "echo changed > README"]

    async def body(client):
        answers = []
        for where in (str(other), "../other", "sub/link", "sub"):
            answers.append(await client.call_tool("capture", {"command": touch, "repo": where}))
        answers.append(await client.call_tool("apply", {"patch": "x.patch", "repo": str(other)}))
        return answers

    *refused, inside, refused_apply = serve(repo, env, tmp_path, body)
    for answer in [*refused, refused_apply]:
        assert answer.is_error and "outside the folders" in text(answer), text(answer)
    assert not inside.is_error and inside.structured_content["files"] == 1, text(inside)
    assert repo_state(other, env) == other_before

    async def with_roots(client):
        return await client.call_tool("capture", {"command": touch, "repo": str(other)})

    rooted = serve(repo, env, tmp_path, with_roots, roots=[str(other)])
    assert not rooted.is_error, text(rooted)
    assert rooted.structured_content["files"] == 1


def test_a_call_naming_no_repo_in_a_folder_of_repositories_is_told_to(
    env, make_repo, tmp_path
) -> None:
    """A server started in a folder that holds repositories but is in none:
    each tool called without ``repo`` fails with git's own message and a
    ``hint:`` naming ``repo``; named, the call works."""
    make_repo(name="projects/one")
    folder = tmp_path / "projects"
    hint = f"hint: this server works in '{folder}', which is in no git repository: name one"

    async def body(client):
        return [
            await client.call_tool("capture", {"command": ["true"]}),
            await client.call_tool("apply", {"patch": "x.patch"}),
            await client.call_tool("end_session", {"session": "s"}),
            await client.call_tool("capture", {"command": ["true"], "repo": "one"}),
        ]

    *unnamed, named = serve(folder, env, tmp_path, body)
    for answer in unnamed:
        assert answer.is_error and "not a git repository" in text(answer), text(answer)
        assert hint in text(answer), text(answer)
    assert json.loads(text(unnamed[0]).splitlines()[-1])["error-code"] == "not-a-git-repository"
    assert not named.is_error and named.structured_content["exit"] == 0, text(named)


@pytest.mark.hostile
def test_a_repository_s_own_git_isopatch_package_never_runs(env, make_repo, tmp_path) -> None:
    """The server runs each call's git-isopatch as a module of its own
    interpreter, in the folder it started in: a repository that holds a
    package named ``git_isopatch`` (a checkout of git-isopatch itself, or
    a hostile one) must not be what runs, unconfined, instead of the
    installed one."""
    marker = tmp_path / "ran-the-repository-s-code"
    planted = f"open({str(marker)!r}, 'w').close()\n"
    repo = make_repo({"git_isopatch/__init__.py": planted, "git_isopatch/__main__.py": planted})

    async def body(client):
        return [
            await client.call_tool("capture", {"command": ["sh", "-c", "echo x > new"]}),
            await client.call_tool("end_session", {"session": "none"}),
        ]

    captured, ended = serve(repo, env, tmp_path, body)
    assert not captured.is_error and captured.structured_content["files"] == 1, text(captured)
    assert ended.is_error and "no session 'none'" in text(ended), text(ended)
    assert not marker.exists()


@pytest.mark.hostile
def test_an_argument_a_tool_does_not_know_is_an_error_naming_it(env, make_repo, tmp_path) -> None:
    """A misspelt ``"include-uncommitted": true`` must not run from HEAD
    and report success."""
    repo = make_repo()
    (repo / "README").write_text("edited, uncommitted\n")

    async def body(client):
        capture = await client.call_tool(
            "capture", {"command": ["true"], "include-uncommitted": True}
        )
        apply = await client.call_tool("apply", {"patch": "x.patch", "staged": True})
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        return capture, apply, tools

    capture, apply, tools = serve(repo, env, tmp_path, body)
    assert capture.is_error and "include-uncommitted" in text(capture), text(capture)
    assert apply.is_error and "staged" in text(apply), text(apply)
    assert tools["capture"].input_schema["additionalProperties"] is False
    assert tools["apply"].input_schema["additionalProperties"] is False


def test_the_network_hint_names_what_a_call_can_ask(env, make_repo, tmp_path) -> None:
    """A call has no ``--allow-network`` or ``--no-sandbox``: the hint for a
    command that failed after trying the network names the call's
    ``allow_network`` and ``sandbox`` where the server lets a call ask
    them, and the server's option where it does not."""
    import sys

    repo = make_repo()
    refused = "the command failed after trying the network, which the sandbox keeps from it"

    async def body(client):
        return await client.call_tool("capture", {"command": [sys.executable, "-c", CONNECT]})

    closed = serve(repo, env, tmp_path, body)
    loosened = serve(repo, env, tmp_path, body, "--allow-network", "--allow-unconfined")
    for result in (closed, loosened):
        assert not result.is_error, text(result)
        assert result.structured_content["exit"] == 1, text(result)
    assert closed.structured_content["hint"] == [
        f"{refused}; this server keeps the network from every call (started with "
        "'git isopatch mcp --allow-network', a call may ask allow_network)"
    ]
    assert loosened.structured_content["hint"] == [
        f"{refused}; a call with allow_network keeps the network, "
        "one with sandbox false runs it unconfined"
    ]


def test_hints_and_errors_name_the_calls_parameters_not_options(env, make_repo, tmp_path) -> None:
    """What reaches the client names what a call can give: a missing
    dependency folder's hint names ``link`` and ``copy``, a program name
    with a space is split into a ``command`` list, signing in the sandbox
    names ``sandbox`` false and the server's option that allows it, a repository
    without a commit names ``include_uncommitted`` and ``staged``, a session
    started otherwise names ``staged``; no ``--option`` of the command line."""
    import re

    repo = make_repo({".gitignore": "node_modules/\nfresh/\n", "README": "hello\n"})
    (repo / "node_modules").mkdir()
    (repo / "node_modules" / "dep.js").write_text("x\n")
    (repo / "fresh").mkdir()
    git("init", "-q", cwd=repo / "fresh", env=env)

    async def body(client):
        missing = await client.call_tool(
            "capture", {"command": ["sh", "-c", "no-such-program-here"]}
        )
        spaced = await client.call_tool("capture", {"command": ["no-such format"]})
        signed = await client.call_tool(
            "capture",
            {
                "command": [
                    "git",
                    "-c",
                    "commit.gpgSign=true",
                    "commit",
                    "--allow-empty",
                    "-qm",
                    "x",
                ]
            },
        )
        fresh = await client.call_tool("capture", {"command": ["true"], "repo": "fresh"})
        await client.call_tool("capture", {"command": ["true"], "session": "s"})
        later = await client.call_tool(
            "capture", {"command": ["true"], "session": "s", "staged": True}
        )
        await client.call_tool("end_session", {"session": "s"})
        return missing, spaced, signed, fresh, later

    missing, spaced, signed, fresh, later = serve(repo, env, tmp_path, body)
    assert missing.structured_content["exit"] == 127, text(missing)
    assert missing.structured_content["hint"] == [
        "'node_modules' of your checkout is not in the worktree; "
        "bring it in with link node_modules (or copy node_modules)"
    ]
    assert spaced.structured_content["hint"] == [
        "the command is run without a shell, so 'no-such format' is one program name; "
        'split it (command ["no-such", "format"]) or use command ["sh", "-c", "no-such format"]'
    ]
    assert signed.structured_content["hint"][0].endswith(
        "sign after applying the patch, or use sandbox false "
        "(on a server started with 'git isopatch mcp --allow-unconfined')"
    ), text(signed)
    assert fresh.is_error and later.is_error
    assert (
        "there is no commit yet: include_uncommitted starts from your work tree, "
        "staged from your index"
    ) in text(fresh)
    assert "option 'staged' cannot be used with the existing session 's'" in text(later)
    hints = (*missing.structured_content["hint"], *spaced.structured_content["hint"])
    for said in (*hints, text(fresh), text(later)):
        assert not re.search(r"(?<![\w-])--[a-z]", said), said


def test_subcommand_session_and_sandbox_words_name_the_calls_terms(
    env, make_repo, tmp_path
) -> None:
    """A command named after a subcommand is a program (no call of this
    server runs ``git isopatch list``: its hint says so, and a name close to
    one gets no hint); ``session`` with ``keep`` is refused in the call's
    words; a sandbox the kernel refuses points to the manual, not to
    ``--help``; no ``--option`` of git-isopatch's command line."""
    import os
    import re

    repo = make_repo()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "bwrap").write_text(REFUSED_BWRAP)
    (bin_dir / "bwrap").chmod(0o755)
    refusing = {**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}"}

    async def body(client):
        listed = await client.call_tool("capture", {"command": ["list"]})
        similar = await client.call_tool("capture", {"command": ["lst"]})
        kept = await client.call_tool(
            "capture", {"command": ["true"], "session": "s", "keep": True}
        )
        return listed, similar, kept

    async def refused(client):
        return await client.call_tool("capture", {"command": ["true"], "sandbox": True})

    listed, similar, kept = serve(repo, env, tmp_path, body)
    unavailable = serve(repo, refusing, tmp_path, refused)
    assert listed.structured_content["hint"] == [
        'command ["list"] runs a program of that name, not git isopatch\'s subcommand '
        "'list', which no call of this server runs"
    ], text(listed)
    assert "hint" not in similar.structured_content, text(similar)
    assert kept.is_error
    assert "options 'session' and 'keep' cannot be used together" in text(kept), text(kept)
    assert unavailable.is_error
    assert "\"Sandbox\" in 'man git-isopatch' says what it needs" in text(unavailable)
    assert not re.search(r"--(help|sandbox)", text(unavailable))  # docker's options stay
    for said in (*listed.structured_content["hint"], text(kept)):
        assert not re.search(r"(?<![\w-])--[a-z]", said), said


def test_a_usage_error_is_a_tool_error_with_its_code(env, make_repo, tmp_path) -> None:
    """A call the command line refuses (129) is a tool error as a fatal one
    is: the message, in the call's terms and without the command line's
    usage, then its result, ``error-code usage``."""
    repo = make_repo()

    async def body(client):
        return await client.call_tool(
            "capture", {"command": ["true"], "session": "s", "keep": True}
        )

    refused = serve(repo, env, tmp_path, body)
    message = "options 'session' and 'keep' cannot be used together"
    assert refused.is_error
    assert text(refused).splitlines()[0].endswith(f": error: {message}"), text(refused)
    assert json.loads(text(refused).splitlines()[-1]) == {
        "version": 1,
        "error": message,
        "error-code": "usage",
    }
    assert len(text(refused).splitlines()) == 2, text(refused)
