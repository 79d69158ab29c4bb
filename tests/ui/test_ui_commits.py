"""The commits page and the session page's commits, on a real git link (dulwich, the hook's
own `link_commit`): the code commit, the turns behind it, `why` and `blame`."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.gitlink.conftest import dulwich_commit, init_git
from tests.ui.browser import axe_source, chromium, needs_browser
from tests.ui.conftest import PLANTED_SESSION, planted_transcript


def _get(port: int, path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    return r.status, body


@pytest.fixture
def linked(tmp_path: Path, settings: Any) -> Iterator[tuple[Any, str]]:
    """A served memory inside a git work tree whose one commit is linked to the planted turns."""
    from funes import api
    from funes.ui.server import UiServer

    code = init_git(tmp_path / "code")
    here = replace(settings, cwd=code)
    memory = api.init(here, code).repo
    planted = planted_transcript(tmp_path, cwd=str(code), day="2026-03-04")
    api.index(here, memory=str(memory.path), paths=[str(planted)])
    when = int(datetime(2026, 3, 4, 11, 0, tzinfo=UTC).timestamp())
    sha = dulwich_commit(code, {"config/cache.toml": "ttl_seconds = 90\n"},
                         "Cache: evict after ninety seconds", when)
    result = api.link_commit(here, index=False)
    assert result.sha == sha and result.link is not None
    ui = UiServer.make(here, [str(memory.path)]).start()
    try:
        yield ui, sha
    finally:
        ui.stop()


def test_commits_show_the_turns_behind_them(linked: tuple[Any, str]) -> None:
    ui, sha = linked
    status, page = _get(ui.state.port, "/commits")
    assert status == 200 and sha[:10] in page
    assert "Cache: evict after ninety seconds" in page
    assert f"/session/{PLANTED_SESSION}?turn=" in page
    status, why = _get(ui.state.port, f"/commits?sha={sha}")
    assert status == 200 and "evicts entries after ninety seconds" in why
    status, blame = _get(ui.state.port, "/commits?file=config/cache.toml")
    assert status == 200 and "ttl_seconds = 90" in blame and sha[:8] in blame
    status, session = _get(ui.state.port, f"/session/{PLANTED_SESSION}")
    assert status == 200 and f"funes why {sha[:12]}" in session
    status, timeline = _get(ui.state.port, "/")
    assert f"/commits?sha={sha}" in timeline


@needs_browser
@pytest.mark.slow
def test_commit_pages_pass_axe(linked: tuple[Any, str], tmp_path: Path) -> None:
    ui, sha = linked
    source = axe_source()
    problems = []
    with chromium(tmp_path / "axe", bypass_csp=True) as context:
        page = context.new_page()
        for path in ("/", "/commits", f"/commits?sha={sha}", "/commits?file=config/cache.toml",
                     f"/session/{PLANTED_SESSION}"):
            page.goto(ui.url.rstrip("/") + path)
            page.evaluate(source)
            result = page.evaluate("""() => axe.run(document, {runOnly: {type: 'tag',
                values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']}})""")
            problems += [f"{path}: {v['id']}: {v['help']} ({v['nodes'][0]['html'][:120]})"
                         for v in result["violations"]]
    assert not problems, "\n".join(problems)
