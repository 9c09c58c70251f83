"""Drives `toolsrv mcp` with the official Python MCP SDK (PyPI `mcp`).

Usage: client.py SCENARIO --toolsrv BIN --socket SOCK --agent A --cwd DIR
                 [--http URL --token T] [--outside DIR]

Over stdio the script starts `toolsrv mcp` itself; with --http it connects to
a bridge the test started. Other processes (`toolsrv load`, `toolsrv
approve`) are run as subprocesses. Exit status 0 means every check held; a
failed check raises with a message on stderr.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

A = None  # parsed arguments


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def text_of(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def toolsrv(*args, check_ok=True):
    env = {k: v for k, v in os.environ.items() if k not in ("TOOLSRV_SECRET", "TOOLSRV_SOCKET")}
    p = subprocess.run([A.toolsrv, "--socket", A.socket, *args], capture_output=True, text=True, env=env, timeout=30)
    if check_ok:
        check(p.returncode == 0, f"toolsrv {args}: {p.returncode} {p.stderr}")
    return p


class Session:
    """An initialized ClientSession over the chosen transport; collects notifications."""

    def __init__(self):
        self.notes = []
        self.changed = anyio.Event()

    async def handler(self, message):
        if isinstance(message, Exception):
            return
        self.notes.append(message)
        if getattr(message, "method", "") == "notifications/tools/list_changed":
            self.changed.set()


async def with_session(body):
    s = Session()
    if A.http:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {A.token}"})
        transport = streamable_http_client(A.http, http_client=http)
    else:
        env = {k: v for k, v in os.environ.items() if k not in ("TOOLSRV_SECRET",)}
        env["TOOLSRV_SOCKET"] = A.socket
        params = StdioServerParameters(
            command=A.toolsrv,
            args=["mcp", "--agent", A.agent, "--load", "shell,file_read,file_write", "--cwd", A.cwd],
            env=env,
            cwd=A.cwd,
        )
        transport = stdio_client(params)
    async with transport as (read, write):
        async with ClientSession(read, write, message_handler=s.handler) as session:
            init = await session.initialize()
            check(init.server_info.name == "toolsrv", f"server name {init.server_info}")
            check(init.capabilities.tools is not None and init.capabilities.tools.list_changed, "listChanged capability")
            await body(session, s)


async def basic(session, s):
    tools = (await session.list_tools()).tools
    names = {t.name for t in tools}
    check({"shell", "file_read", "file_write"} <= names, f"tools: {names}")
    shell = next(t for t in tools if t.name == "shell")
    check(shell.input_schema.get("properties", {}).get("command", {}).get("type") == "string", f"schema {shell.input_schema}")

    r = await session.call_tool("shell", {"command": "echo hello from mcp"})
    check(not r.is_error and text_of(r) == "hello from mcp\n", f"echo: {r}")

    r = await session.call_tool("shell", {"command": "echo failing; exit 3"})
    check(r.is_error and "exit status 3" in text_of(r), f"failing: {r}")

    r = await session.call_tool("no_such_tool", {})
    check(r.is_error and "not loaded" in text_of(r), f"unknown tool: {r}")

    # A value that needs escaping reaches the tool byte for byte.
    content = 'a\\b\\n\nc\r\n\t\'"$HOME `x` ü \\'
    r = await session.call_tool("file_write", {"path": "escaped.txt", "content": content})
    check(not r.is_error, f"file_write: {r}")
    with open(os.path.join(A.cwd, "escaped.txt"), "rb") as f:
        got = f.read()
    check(got == content.encode(), f"bytes differ: {got!r} != {content.encode()!r}")

    # JSON types are kept: an integer argument.
    with open(os.path.join(A.cwd, "lines.txt"), "w") as f:
        f.write("one\ntwo\nthree\n")
    r = await session.call_tool("file_read", {"path": "lines.txt", "offset": 2, "limit": 1})
    check(not r.is_error and "two" in text_of(r) and "three" not in text_of(r), f"file_read: {r}")
    r = await session.call_tool("file_read", {"path": "lines.txt", "limit": 2.5})
    check(r.is_error and "integer" in text_of(r), f"wrong type: {r}")
    r = await session.call_tool("shell", {"command": "true", "bypass": True})
    check(r.is_error and "toolsrv/bypass" in text_of(r), f"bypass argument: {r}")


async def list_changed(session, s):
    before = {t.name for t in (await session.list_tools()).tools}
    check("file_glob" not in before, f"file_glob loaded already: {before}")
    toolsrv("load", A.agent, "file_glob")
    with anyio.fail_after(5):
        await s.changed.wait()
    after = {t.name for t in (await session.list_tools()).tools}
    check("file_glob" in after, f"after load: {after}")


def procs_with(marker):
    p = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    return [int(x) for x in p.stdout.split()]


async def cancel(session, s):
    marker = f"{4000 + os.getpid() % 1000}.{time.time_ns() % 100000}"
    cmd = f"sleep {marker} & sh -c 'sleep {marker}' & sleep {marker}; wait"
    with anyio.move_on_after(30):
        async with anyio.create_task_group() as tg:
            async def run():
                await session.call_tool("shell", {"command": cmd})
            tg.start_soon(run)
            with anyio.fail_after(10):
                while len(procs_with(f"sleep {marker}")) < 3:
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
    t0 = time.monotonic()
    while procs_with(f"sleep {marker}") and time.monotonic() - t0 < 3:
        await anyio.sleep(0.05)
    left = procs_with(f"sleep {marker}")
    check(not left, f"processes left 3 s after the cancel: {left}")
    # The session still works.
    r = await session.call_tool("shell", {"command": "echo still here"})
    check(text_of(r) == "still here\n", f"after cancel: {r}")


async def progress(session, s):
    seen = []

    async def on_progress(p, total, message):
        seen.append((p, message))

    r = await session.call_tool(
        "shell", {"command": "for i in 1 2 3 4 5 6; do echo line $i; sleep 0.5; done"}, progress_callback=on_progress
    )
    check(not r.is_error, f"long call: {r}")
    check(len(seen) >= 2, f"progress notifications: {seen}")
    check(all(b[0] > a[0] for a, b in zip(seen, seen[1:])), f"progress must increase: {seen}")
    check(any("output bytes" in (m or "") for _, m in seen), f"messages: {seen}")


async def bypass(session, s):
    seen = []
    approved = anyio.Event()

    async def on_progress(p, total, message):
        seen.append(message or "")
        if "awaiting approval: bypass request " in (message or "") and not approved.is_set():
            rid = message.split("bypass request ")[1].split(" ")[0]
            toolsrv("approve", rid)
            approved.set()

    with anyio.fail_after(30):
        r = await session.call_tool(
            "shell", {"command": "echo unsandboxed"}, progress_callback=on_progress, meta={"toolsrv/bypass": True}
        )
    check(approved.is_set(), f"never saw awaiting approval: {seen}")
    text = text_of(r)
    check(not r.is_error and text.startswith("unsandboxed\n"), f"bypass result: {r}")
    check("approved by an observer" in text, f"who decided: {text}")
    meta = (r.meta or {}).get("toolsrv/bypass", {})
    check(meta.get("approved") is True and meta.get("decidedBy") == "observer", f"_meta: {r.meta}")

    # A rejected one says why.
    async def reject(p, total, message):
        if "awaiting approval: bypass request " in (message or "") and not seen.count("rejected"):
            rid = message.split("bypass request ")[1].split(" ")[0]
            toolsrv("reject", rid, "not", "today")
            seen.append("rejected")

    with anyio.fail_after(30):
        r = await session.call_tool("shell", {"command": "echo no"}, progress_callback=reject, meta={"toolsrv/bypass": True})
    check(r.is_error and "bypass rejected: not today" in text_of(r), f"rejected: {r}")
    check("rejected by an observer" in text_of(r), f"who rejected: {text_of(r)}")


def refused(text):
    # Landlock's EACCES; the filesystem view's EROFS (a write outside the
    # writable rules meets a read-only mount first) or ENOENT (a path no rule
    # names does not exist in the view), as the C library and sh print it.
    return any(e in text for e in (
        "Permission denied",
        "Read-only file system",
        "No such file or directory",
        "Directory nonexistent",
    ))


async def escape(session, s):
    # /etc/shadow is refused (Landlock) or masked (the view: an empty file).
    r = await session.call_tool("shell", {"command": "cat /etc/shadow"})
    shown = text_of(r)
    masked = not r.is_error and shown.strip() == ""
    check(masked or (r.is_error and refused(shown)), f"/etc/shadow: {r}")
    check("root:" not in shown, f"/etc/shadow shown: {r}")
    target = os.path.join(A.outside, "written-through-mcp")
    r = await session.call_tool("shell", {"command": f"echo pwned > {target}"})
    check(r.is_error and refused(text_of(r)), f"write outside: {r}")
    check(not os.path.exists(target), "a file was written outside the cwd")
    r = await session.call_tool("file_write", {"path": target, "content": "pwned"})
    check(r.is_error and not os.path.exists(target), f"file_write outside: {r}")
    r = await session.call_tool("file_read", {"path": os.path.join(A.outside, "secret.txt")})
    check(r.is_error and "outside-secret" not in text_of(r), f"read outside: {r}")


async def large(session, s):
    # Larger than Linux passes in one argument (128 KiB): file_write gets it
    # in a file ("file: true").
    content = "".join(f"line {i}\n" for i in range(20000))
    check(len(content) > 140000, len(content))
    r = await session.call_tool("file_write", {"path": "large.txt", "content": content})
    check(not r.is_error and f"wrote {len(content)} bytes" in text_of(r), f"file_write: {r}")
    with open(os.path.join(A.cwd, "large.txt")) as f:
        check(f.read() == content, "large.txt differs")
    # An argument the tool does not take is refused by name.
    r = await session.call_tool("file_read", {"path": "large.txt", "limt": 1})
    check(r.is_error and '"limt"' in text_of(r), f"unknown argument: {r}")


SCENARIOS = {f.__name__: f for f in (basic, list_changed, cancel, progress, bypass, escape, large)}


def main():
    global A
    p = argparse.ArgumentParser()
    p.add_argument("scenario", choices=[*SCENARIOS, "all"])
    p.add_argument("--toolsrv", required=True)
    p.add_argument("--socket", required=True)
    p.add_argument("--agent", required=True)
    p.add_argument("--cwd", required=True)
    p.add_argument("--http")
    p.add_argument("--token")
    p.add_argument("--outside", default="/nonexistent")
    A = p.parse_args()
    names = list(SCENARIOS) if A.scenario == "all" else [A.scenario]

    async def run():
        for name in names:
            t0 = time.monotonic()
            await with_session(SCENARIOS[name])
            print(f"ok {name} ({time.monotonic() - t0:.2f}s)", flush=True)

    anyio.run(run)


if __name__ == "__main__":
    main()
