"""`funes ui` over real HTTP on loopback: the pages, what they show, and who may change what.

No browser here (tests/ui/test_ui_browser.py drives one): plain HTTP requests, so the checks
are exact about headers, status codes and what reached the memory.
"""

from __future__ import annotations

import http.client
import re
import socket
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote_plus, urlencode

import pytest

from tests.ui.conftest import PLANTED, PLANTED_SESSION, SECRET


def request(server: Any, method: str, path: str, *, body: str | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", server.state.port, timeout=60)
    sent = {"Host": f"127.0.0.1:{server.state.port}", **(headers or {})}
    if body is not None:
        sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
    conn.request(method, path, body=body, headers=sent)
    response = conn.getresponse()
    data = response.read().decode("utf-8")
    conn.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, data


def recall_finds(settings: Any, memory: Path, phrase: str) -> bool:
    from funes import api

    repo = api.open_memory(settings, str(memory))
    hits = api.recall(settings, repo, phrase, k=20).hits
    return any(phrase in str(h.row.get("text")) for h in hits)


def test_listens_on_loopback_only(ui_server: Any) -> None:
    assert ui_server.sock.getsockname()[0] == "127.0.0.1"
    assert ui_server.url == f"http://127.0.0.1:{ui_server.state.port}/"
    others = {info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None,
                                                       socket.AF_INET)}
    for address in sorted(a for a in others if not a.startswith("127.")):
        with pytest.raises(OSError), socket.create_connection((address, ui_server.state.port),
                                                               timeout=2):
            pass


def test_every_page_renders_server_side(ui_server: Any) -> None:
    for path in ("/", "/search", f"/search?q={quote(PLANTED)}", f"/session/{PLANTED_SESSION}",
                 "/commits", "/memory", f"/session/{PLANTED_SESSION}/forget",
                 "/memory/push", "/memory/sync"):
        status, headers, body = request(ui_server, "GET", path)
        assert status == 200, (path, body[:500])
        assert body.startswith("<!doctype html>") and "<h1>" in body, path
        assert "default-src 'none'" in headers["content-security-policy"]
        assert headers["x-frame-options"] == "DENY"
        assert re.search(r"total;dur=\d", headers["server-timing"]), headers
        # nothing from the network: every address a page loads is this server's own
        loads = re.findall(r'(?:src|href)="([^"#]+)"', body)
        assert loads and all(u.startswith(("/", "?")) for u in loads), (path, loads)


def test_search_finds_the_planted_passage_and_links_to_its_turn(ui_server: Any) -> None:
    status, _, body = request(ui_server, "GET", "/search?" + urlencode({"q": "heliotrope cache"}))
    assert status == 200
    assert "evicts entries after ninety seconds" in body
    link = re.search(r'href="(/session/' + PLANTED_SESSION + r'\?[^"]+)"', body)
    assert link, body
    status, _, page = request(ui_server, "GET", link.group(1).replace("&amp;", "&"))
    assert status == 200
    hit = re.search(r'<article class="turn role-assistant hit"[^>]*>(.*?)</article>', page, re.S)
    assert hit, page
    assert "<mark>heliotrope</mark>" in hit.group(1)
    assert SECRET not in page and "[redacted" in page  # the placeholder, shown as such
    assert re.search(r"<details class=\"block tool_use\">\s*<summary>tool call: Bash", page)


def test_transcript_text_is_escaped(ui_server: Any, settings: Any, ui_memory: Path) -> None:
    from funes import api
    from tests.ui.conftest import planted_transcript

    hostile = 'look <script>alert("x")</script> & <img src=x onerror=alert(1)> here'
    path = planted_transcript(ui_memory.parent, "hostile-session", hostile)
    api.index(settings, memory=str(ui_memory), paths=[str(path)])
    _, _, page = request(ui_server, "GET", "/session/hostile-session?q=script")
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;<mark>script</mark>&gt;alert" in page


def test_a_change_without_the_token_or_from_another_site_is_refused(
        ui_server: Any, settings: Any, ui_memory: Path) -> None:
    path = f"/session/{PLANTED_SESSION}/forget"
    token = ui_server.state.token
    own = f"http://127.0.0.1:{ui_server.state.port}"
    refused = [
        ({}, ""),  # no token
        ({}, "token=guess"),
        ({"Origin": "http://evil.example"}, f"token={token}"),
        ({"Origin": "null"}, f"token={token}"),
        ({"Origin": own, "Sec-Fetch-Site": "cross-site"}, f"token={token}"),
        ({"Host": "evil.example:80", "Origin": own}, f"token={token}"),
    ]
    for headers, body in refused:
        status, _, text = request(ui_server, "POST", path, body=body, headers=headers)
        assert status in (403, 421), (headers, body, status, text)
    assert recall_finds(settings, ui_memory, PLANTED)
    status, headers, _ = request(ui_server, "POST", path, body=f"token={token}",
                                 headers={"Origin": own})
    assert status == 303 and headers["location"].startswith("/?done=forgot")
    assert not recall_finds(settings, ui_memory, PLANTED)


def test_reads_are_refused_for_a_foreign_host(ui_server: Any) -> None:
    status, _, body = request(ui_server, "GET", "/", headers={"Host": "rebound.example:80"})
    assert status == 421 and PLANTED not in body
    own = {"Host": f"localhost:{ui_server.state.port}"}
    status, _, _ = request(ui_server, "GET", "/", headers=own)
    assert status == 200


def test_a_client_not_on_loopback_is_refused() -> None:
    import asyncio

    from funes.ui.guard import Guard

    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    guard = Guard(app, port=8123, token="t")
    for client, expected in ((("192.168.1.20", 5000), 403), (("127.0.0.1", 5000), None),
                             (("::1", 5000), None), (None, 403)):
        sent.clear()
        scope = {"type": "http", "method": "GET", "path": "/", "client": client,
                 "headers": [(b"host", b"127.0.0.1:8123")]}
        asyncio.run(guard(scope, receive, send))
        status = sent[0]["status"] if sent else None
        assert status == expected, client
    assert reached == ["/", "/"]


def test_unknown_session_and_bad_input_are_pages_not_crashes(ui_server: Any) -> None:
    status, _, body = request(ui_server, "GET", "/session/no-such-session")
    assert status == 404 and "no session no-such-session" in body
    status, _, body = request(ui_server, "GET", "/?offset=minus")
    assert status == 400 and "whole number" in body
    status, _, body = request(ui_server, "GET", "/?memory=/somewhere/else")
    assert status == 400 and "was not started with the memory" in body
    status, _, body = request(ui_server, "GET", "/commits?sha=0123456789abcdef")
    assert status == 200 and 'role="alert"' in body


def test_the_cli_command_serves_and_prints_its_address(ui_memory: Path, tmp_path: Path) -> None:
    import os
    import subprocess
    import sys
    import time

    from tests.conftest import REPO_ROOT

    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    proc = subprocess.Popen([sys.executable, "-m", "funes", "ui", "--memory", str(ui_memory),
                             "--no-open"], stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert found, line
        port = int(found.group(1))
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                conn.request("GET", "/", headers={"Host": f"127.0.0.1:{port}"})
                response = conn.getresponse()
                assert response.status == 200 and "Timeline" in response.read().decode()
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(30)


def test_a_taken_port_is_a_clear_error(ui_server: Any, settings: Any, ui_memory: Path) -> None:
    from funes.ui.server import PortInUseError, UiServer

    with pytest.raises(PortInUseError, match="cannot listen") as caught:
        UiServer.make(settings, [str(ui_memory)], ui_server.state.port)
    assert caught.value.hint and "--port" in caught.value.hint


def test_events_announce_a_new_head(ui_server: Any, settings: Any, ui_memory: Path) -> None:
    from funes import api
    from tests.ui.conftest import planted_transcript

    conn = http.client.HTTPConnection("127.0.0.1", ui_server.state.port, timeout=60)
    conn.request("GET", "/events", headers={"Host": f"127.0.0.1:{ui_server.state.port}"})
    response = conn.getresponse()
    assert response.status == 200
    assert response.getheader("Content-Type", "").startswith("text/event-stream")
    assert response.readline() == b"retry: 2000\n"
    path = planted_transcript(ui_memory.parent, "new-session-0003", "a fresh turn arrives")
    api.index(settings, memory=str(ui_memory), paths=[str(path)])
    head = api.log(api.open_memory(settings, str(ui_memory)), limit=1)[0].id
    lines = []
    while not lines or lines[-1] != f"data: {head}":
        line = response.readline().decode().strip()
        assert line.startswith(("event:", "data:", ":", "")), line
        if line:
            lines.append(line)
    assert "event: head" in lines
    conn.close()


def test_the_timeline_names_and_filters_who_committed_each_session(
        ui_server: Any, settings: Any, ui_memory: Path) -> None:
    import socket as sock
    from dataclasses import replace

    from funes import api
    from funes.api import overview
    from tests.ui.conftest import planted_transcript

    other = replace(settings, author_name="Bea Other", author_email="bea@example.org")
    path = planted_transcript(ui_memory.parent, "bea-session-0004", "bea's own passage")
    api.index(other, memory=str(ui_memory), paths=[str(path)])
    origins = overview.session_origins(api.open_memory(settings, str(ui_memory)))
    host = {o.host for found in origins.values() for o in found}
    assert len(host) == 1 and next(iter(host)) in (sock.gethostname(), sock.getfqdn())
    bea = f"Bea Other@{next(iter(host))}"
    mine = f"Test Author@{next(iter(host))}"
    assert [o.label for o in origins["bea-session-0004"]] == [bea]
    assert [o.label for o in origins[PLANTED_SESSION]] == [mine]
    _, _, page = request(ui_server, "GET", "/")
    assert f"from <span title=\"Bea Other &lt;bea@example.org&gt;\">{bea}</span>" in page
    _, _, only = request(ui_server, "GET", "/?" + urlencode({"origin": bea}))
    assert "bea-session-0004" in only and PLANTED_SESSION not in only
    _, _, rest = request(ui_server, "GET", "/?" + urlencode({"origin": mine}))
    assert "bea-session-0004" not in rest and PLANTED_SESSION in rest


def test_push_and_sync_through_the_pages_reach_a_directory_remote(
        ui_memory: Path, settings: Any, tmp_path: Path) -> None:
    from funes import api
    from funes.ui.server import UiServer

    remote = tmp_path / "team-remote"
    api.remote_add(api.open_memory(settings, str(ui_memory)), "origin", str(remote))
    ui = UiServer.make(settings, [str(ui_memory)]).start()
    try:
        own = {"Origin": f"http://127.0.0.1:{ui.state.port}"}
        status, _, page = request(ui, "GET", "/memory")
        assert status == 200 and 'href="/memory/push?remote=origin"' in page
        status, _, ask = request(ui, "GET", "/memory/push?remote=origin")
        assert status == 200 and "funes push origin" in ask and not remote.exists()
        status, _, _ = request(ui, "POST", "/memory/push?remote=origin", body="token=nope",
                               headers=own)
        assert status == 403 and not remote.exists()
        token = f"token={ui.state.token}"
        status, headers, _ = request(ui, "POST", "/memory/push?remote=origin", body=token,
                                     headers=own)
        assert status == 303 and "pushed" in unquote_plus(headers["location"]), headers
        head = api.log(api.open_memory(settings, str(ui_memory)), limit=1)[0].id
        assert (remote / "refs" / "heads" / "main").read_text().strip() == head
        status, headers, _ = request(ui, "POST", "/memory/sync?remote=origin", body=token,
                                     headers=own)
        assert status == 303 and "synced with origin" in unquote_plus(headers["location"])
        status, _, page = request(ui, "GET", headers["location"])
        assert status == 200 and "synced with origin" in page and "ok: " in page
    finally:
        ui.stop()


def test_no_memory_is_a_clear_error(run: Any, project_dir: Path) -> None:
    result = run("ui", "--no-open")
    assert result.exit_code == 3
    assert "not a funes repository" in result.stderr and "funes init" in result.stderr


def test_a_memory_not_yours_is_marked_on_every_page(
        ui_memory: Path, settings: Any, tmp_path: Path) -> None:
    from funes import api
    from funes.ui.server import UiServer

    remote = tmp_path / "their-remote"
    mine = api.open_memory(settings, str(ui_memory))
    api.remote_add(mine, "origin", str(remote))
    api.push(mine)
    copy = api.clone(settings, str(remote), str(tmp_path / "their-copy")).path
    theirs = api.open_memory(settings, str(copy))
    theirs.config.set("core.owned", "false")  # a teammate's memory, as funes decides it
    ui = UiServer.make(settings, [str(copy)]).start()
    try:
        badge = '<span class="badge untrusted"'
        for path in ("/", "/search?" + urlencode({"q": "heliotrope cache"}),
                     f"/session/{PLANTED_SESSION}"):
            status, _, page = request(ui, "GET", path)
            assert status == 200 and "not yours" in page, path
            assert badge in page, path
    finally:
        ui.stop()
    status, _, page = request_own(ui_memory, settings)
    assert status == 200 and badge not in page and "not yours" not in page


def request_own(memory: Path, settings: Any) -> tuple[int, dict[str, str], str]:
    from funes.ui.server import UiServer

    ui = UiServer.make(settings, [str(memory)]).start()
    try:
        return request(ui, "GET", "/search?" + urlencode({"q": "heliotrope cache"}))
    finally:
        ui.stop()


def test_several_memories_each_on_its_own_pages(ui_memory: Path, settings: Any,
                                               tmp_path: Path) -> None:
    from funes import api
    from funes.ui.server import UiServer
    from tests.ui.conftest import planted_transcript

    other = api.init(settings, tmp_path / "other").repo
    path = planted_transcript(tmp_path, "other-session-0005", "the other memory's passage")
    api.index(settings, memory=str(other.path), paths=[str(path)])
    ui = UiServer.make(settings, [str(ui_memory), str(other.path)]).start()
    try:
        _, second = ui.state.labels()
        _, _, page = request(ui, "GET", "/")
        assert 'id="pick-memory"' in page and PLANTED_SESSION in page
        assert "other-session-0005" not in page
        _, _, page = request(ui, "GET", "/?" + urlencode({"memory": second}))
        assert "other-session-0005" in page and PLANTED_SESSION not in page
        _, _, hits = request(ui, "GET", "/search?" + urlencode({"q": "other memory's passage",
                                                                "memory": second}))
        link = re.search(r'href="(/session/other-session-0005\?[^"]+)"', hits)
        assert link and f"memory={quote(second)}" in link.group(1)
        status, _, page = request(ui, "GET", link.group(1).replace("&amp;", "&").split("#")[0])
        assert status == 200, page[page.find("<main"):][:800]
        assert "the other memory's passage" in re.sub(r"<[^>]+>", "", page)
    finally:
        ui.stop()
