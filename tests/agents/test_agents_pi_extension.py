"""The pi extension, run by Node against a stand-in `pi` API: its MCP client, tools and hook."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.agents.conftest import child_env, funes_mcp, mcp_session

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed")

DRIVER = """\
import extension from "./funes.mjs";
const tools = {}, handlers = {};
extension({ registerTool: (t) => { tools[t.name] = t; }, on: (e, h) => { handlers[e] = h; } });
const out = { tools: {}, events: Object.keys(handlers).sort() };
for (const [name, tool] of Object.entries(tools)) out.tools[name] = tool.parameters;
const hits = await tools.funes_recall.execute("1", { query: process.argv[2], k: 2 });
out.recall = hits.content[0].text;
out.status = (await tools.funes_status.execute("2", {})).content[0].text;
try { await tools.funes_get.execute("3", { session_id: "nope", turn_id: "x" }); }
catch (error) { out.error = String(error.message); }
const ctx = { cwd: process.cwd(), sessionManager: { getSessionFile: () => "" } };
await handlers.session_shutdown({}, ctx);
console.log(JSON.stringify(out));
process.exit(0);
"""


def test_pi_extension_serves_the_mcp_tools(memory: Path, tmp_path: Path, run) -> None:  # type: ignore[no-untyped-def]
    assert run("add", "pi", str(memory)).exit_code == 0
    from funes._env import settings as load

    installed = load().pi_home / "extensions" / "funes.ts"
    work = tmp_path / "node"
    work.mkdir()
    shutil.copy(installed, work / "funes.mjs")  # the extension is plain JavaScript
    (work / "driver.mjs").write_text(DRIVER)
    done = subprocess.run([str(NODE), "driver.mjs", "streaming parser"], cwd=work,
                          capture_output=True, text=True, env=child_env(), timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)

    cli = run("--format", "agent", "recall", "streaming parser", "-k", "2", "--memory", str(memory))
    assert out["recall"] == cli.stdout.rstrip("\n")
    assert out["status"] == run("--format", "agent", "status", "--memory",
                                str(memory)).stdout.rstrip("\n")
    assert "funes:" in out["error"]
    assert out["events"] == ["agent_end", "session_shutdown"]
    # the extension's tool parameters are the MCP server's, name for name
    served, _, _ = mcp_session(funes_mcp(str(memory)), [])
    assert {f"funes_{n}": p for n, p in served.items()} == {
        name: set(params["properties"]) for name, params in out["tools"].items()}
