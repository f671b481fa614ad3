#!/usr/bin/env python3
"""Interop test: the official Python MCP SDK (mcp 2.3.0) against a real `gateway serve`.

Run: python test_independent_client.py --gateway-bin target/debug/gateway   (or env GATEWAY_BIN)

It starts the gateway itself (temporary state dir, random token, --listen 127.0.0.1:0, the port
taken from the `listening http://...` line), then checks tools/list metadata, tool errors,
protocol errors, auth, and that a successful SessionView validates against the tool's
outputSchema. Prints `N passed, N failed` last and exits non-zero on any failure.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import queue
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from typing import Any, Awaitable, Callable

import httpx2
import jsonschema
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

EXPECTED_TOOLS = {
    "native_session_start",
    "native_session_continue",
    "native_session_reply_and_wait",
    "native_session_status",
    "native_session_recover",
    "native_session_stop",
}
ANNOTATIONS = ("read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint")
LISTEN_TIMEOUT = 60.0
CALL_TIMEOUT = 90.0


class Gateway:
    """A `gateway serve` child process with its own state dir and token."""

    def __init__(self, binary: str, extra_env: dict[str, str] | None = None) -> None:
        self.binary = binary
        self.work = tempfile.mkdtemp(prefix="gw-py-")
        self.state_dir = os.path.join(self.work, "state")
        os.mkdir(self.state_dir, 0o700)
        self.token = secrets.token_hex(32)
        self.stderr_path = os.path.join(self.work, "gateway.stderr.log")
        env = dict(os.environ)
        env["CLAUDE_TOOLS_STATE_DIR"] = self.state_dir
        env["CLAUDE_TOOLS_GATEWAY_TOKEN"] = self.token
        env.update(extra_env or {})
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
        )
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert self.proc.stdout is not None
            for raw in self.proc.stdout:
                lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        deadline = time.monotonic() + LISTEN_TIMEOUT
        self.url = ""
        while not self.url:
            left = deadline - time.monotonic()
            try:
                line = lines.get(timeout=max(left, 0.01))
            except queue.Empty:
                self.close()
                raise RuntimeError(f"no `listening` line within {LISTEN_TIMEOUT}s\n{self.stderr()}")
            if line is None:
                code = self.proc.wait(timeout=5)
                self.close()
                raise RuntimeError(f"gateway exited ({code}) before listening\n{self.stderr()}")
            if line.startswith("listening http://"):
                self.url = line.split(" ", 1)[1].strip()

    def stderr(self) -> str:
        try:
            with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            text = ""
        return f"--- gateway stderr ---\n{text[-20000:]}--- end ---"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._stderr.close()

    def cleanup(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)


def client(url: str, token: str | None, mode: str = "legacy") -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=CALL_TIMEOUT))
    return Client(streamable_http_client(url, http_client=http), mode=mode, read_timeout_seconds=CALL_TIMEOUT)


def check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)


class Suite:
    def __init__(self, gw: Gateway) -> None:
        self.gw = gw
        self.tools: dict[str, Any] = {}

    async def tools_list_metadata(self) -> None:
        async with client(self.gw.url, self.gw.token) as c:
            listed = await c.list_tools()
        names = [t.name for t in listed.tools]
        check(set(names) == EXPECTED_TOOLS and len(names) == 6, f"tools/list names: {names}")
        for t in listed.tools:
            self.tools[t.name] = t
            check(bool(t.description), f"{t.name}: no description")
            check(t.input_schema.get("type") == "object", f"{t.name}: inputSchema type {t.input_schema.get('type')!r}")
            check(t.output_schema is not None, f"{t.name}: no outputSchema")
            check(t.output_schema.get("type") == "object", f"{t.name}: outputSchema is not an object schema")
            jsonschema.validators.validator_for(t.output_schema).check_schema(t.output_schema)
            jsonschema.validators.validator_for(t.input_schema).check_schema(t.input_schema)
            check(t.annotations is not None, f"{t.name}: no annotations")
            for field in ANNOTATIONS:
                value = getattr(t.annotations, field)
                check(
                    field in t.annotations.model_fields_set and isinstance(value, bool),
                    f"{t.name}: annotation {field} not set explicitly ({value!r})",
                )
        start_required = set(self.tools["native_session_start"].input_schema.get("required", []))
        check(
            {"prompt", "working_directory", "idempotency_key"} <= start_required,
            f"native_session_start required inputs: {sorted(start_required)}",
        )

    async def capability_url_without_header(self) -> None:
        async with client(f"{self.gw.url}/{self.gw.token}", None) as c:
            listed = await c.list_tools()
        check({t.name for t in listed.tools} == EXPECTED_TOOLS, "tools/list via capability URL")

    async def wrong_token_is_refused(self) -> None:
        async with httpx2.AsyncClient(timeout=30.0) as http:
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
            }
            hdrs = {"Accept": "application/json, text/event-stream"}
            r1 = await http.post(self.gw.url, json=body, headers={**hdrs, "Authorization": "Bearer wrong"})
            r2 = await http.post(self.gw.url, json=body, headers=hdrs)
            r3 = await http.post(f"{self.gw.url}/wrong-token", json=body, headers=hdrs)
        for name, r in (("wrong bearer", r1), ("no token", r2), ("wrong capability URL", r3)):
            check(r.status_code == 401, f"{name}: HTTP {r.status_code}, expected 401")
        refused = False
        try:
            async with asyncio.timeout(30):
                async with client(self.gw.url, "wrong-token") as c:
                    await c.list_tools()
        except Exception:  # noqa: BLE001 - any failure to connect is the expected outcome
            refused = True
        check(refused, "the SDK connected with a wrong token")

    async def auto_mode_falls_back_or_discovers(self) -> None:
        async with asyncio.timeout(30):
            async with client(self.gw.url, self.gw.token, mode="auto") as c:
                listed = await c.list_tools()
        check({t.name for t in listed.tools} == EXPECTED_TOOLS, "tools/list in mode=auto")

    async def relative_working_directory_is_invalid_argument(self) -> None:
        async with client(self.gw.url, self.gw.token) as c:
            r = await c.call_tool(
                "native_session_start",
                {"prompt": "hello", "working_directory": "relative/dir", "idempotency_key": str(uuid.uuid4())},
            )
        check(r.is_error, f"relative working_directory accepted: {r}")
        code = error_code(r)
        check(code == "invalid_argument", f"error code {code!r}, expected invalid_argument")

    async def unknown_tool_is_protocol_error(self) -> None:
        async with client(self.gw.url, self.gw.token) as c:
            try:
                r = await c.call_tool("native_session_explode", {})
            except MCPError as e:
                print(f"    unknown tool -> MCPError code={e.code} message={e.message!r}")
                return
        raise AssertionError(f"unknown tool did not raise a protocol error; got result {r}")

    async def status_of_unknown_session_is_tool_error(self) -> None:
        async with client(self.gw.url, self.gw.token) as c:
            r = await c.call_tool(
                "native_session_status",
                {"native_session_id": "ns_does_not_exist", "lease_id": "lease_does_not_exist", "wait_seconds": 0},
            )
        check(r.is_error, f"status of a nonexistent session succeeded: {r}")
        code = error_code(r)
        check(code in ("not_found", "lease_invalid"), f"error code {code!r}, expected not_found or lease_invalid")

    async def launch_error_view_matches_output_schema(self) -> None:
        """The gateway runs with CLAUDE_BIN=/nonexistent/claude: start answers a failed SessionView."""
        if not self.tools:
            async with client(self.gw.url, self.gw.token) as c:
                self.tools = {t.name: t for t in (await c.list_tools()).tools}
        schema = self.tools["native_session_start"].output_schema
        status_schema = self.tools["native_session_status"].output_schema
        check(schema is not None and status_schema is not None, "no outputSchema to validate against")
        workdir = tempfile.mkdtemp(prefix="gw-py-wd-")
        try:
            async with client(self.gw.url, self.gw.token) as c:
                r = await c.call_tool(
                    "native_session_start",
                    {"prompt": "say hi", "working_directory": workdir, "idempotency_key": str(uuid.uuid4()), "wait_seconds": 5},
                )
                check(not r.is_error, f"start failed as a tool error: {r}")
                view = r.structured_content
                jsonschema.validate(view, schema, cls=jsonschema.validators.validator_for(schema))
                check(view.get("route") == "chatgpt-main" and view.get("fallback") == "none", f"route/fallback: {view}")
                check(bool(view.get("recovery_token")), "start answer carries no recovery_token")
                deadline = time.monotonic() + 30
                while view.get("status") != "failed" and time.monotonic() < deadline:
                    s = await c.call_tool(
                        "native_session_status",
                        {"native_session_id": view["native_session_id"], "lease_id": view["lease_id"], "wait_seconds": 5},
                    )
                    check(not s.is_error, f"status failed: {s}")
                    view = s.structured_content
                    jsonschema.validate(view, status_schema, cls=jsonschema.validators.validator_for(status_schema))
            check(view.get("status") == "failed", f"status {view.get('status')!r}, expected failed")
            check(view.get("launch_error") not in (None, {}, ""), f"no launch_error: {view}")
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


def error_code(result: Any) -> str | None:
    sc = result.structured_content
    if not isinstance(sc, dict) or not isinstance(sc.get("error"), dict):
        raise AssertionError(f"tool error without structuredContent.error: {result}")
    check(bool(sc["error"].get("message")), f"tool error without a message: {sc}")
    return sc["error"].get("code")


async def run(binary: str) -> int:
    passed = failed = 0
    gw = Gateway(binary, {"CLAUDE_BIN": "/nonexistent/claude"})
    print(f"gateway at {gw.url}")
    suite = Suite(gw)
    checks: list[tuple[str, Callable[[], Awaitable[None]]]] = [
        ("tools_list_metadata", suite.tools_list_metadata),
        ("capability_url_without_header", suite.capability_url_without_header),
        ("wrong_token_is_refused", suite.wrong_token_is_refused),
        ("auto_mode_falls_back_or_discovers", suite.auto_mode_falls_back_or_discovers),
        ("relative_working_directory_is_invalid_argument", suite.relative_working_directory_is_invalid_argument),
        ("unknown_tool_is_protocol_error", suite.unknown_tool_is_protocol_error),
        ("status_of_unknown_session_is_tool_error", suite.status_of_unknown_session_is_tool_error),
        ("launch_error_view_matches_output_schema", suite.launch_error_view_matches_output_schema),
    ]
    try:
        for name, fn in checks:
            try:
                await asyncio.wait_for(fn(), timeout=120)
            except Exception:  # noqa: BLE001 - every failure is reported, then counted
                failed += 1
                print(f"FAIL {name}\n{traceback.format_exc()}")
            else:
                passed += 1
                print(f"ok   {name}")
    finally:
        gw.close()
        if failed:
            print(gw.stderr())
        gw.cleanup()
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gateway-bin", default=os.environ.get("GATEWAY_BIN"))
    args = ap.parse_args()
    if not args.gateway_bin:
        print("give --gateway-bin PATH or set GATEWAY_BIN", file=sys.stderr)
        print("0 passed, 1 failed")
        return 2
    binary = os.path.abspath(args.gateway_bin)
    if not os.access(binary, os.X_OK):
        print(f"gateway binary not executable: {binary}", file=sys.stderr)
        print("0 passed, 1 failed")
        return 2
    try:
        return asyncio.run(run(binary))
    except Exception:  # noqa: BLE001 - e.g. the gateway did not start
        traceback.print_exc()
        print("0 passed, 1 failed")
        return 1


if __name__ == "__main__":
    sys.exit(main())
