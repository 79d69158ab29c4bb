"""`funes ui` in a real browser: headless Chromium over loopback, on a real memory.

Search finds the planted passage and its link opens the session with the hit marked; a forget
through the pages (with its confirmation) removes the passage from a later recall; a form on
another site posting to the server is refused; every page works with JavaScript off; every
page passes axe-core's checks (labels, headings, contrast: WCAG 2 A and AA); the timeline
shows a session indexed while it is open, without a reload; no page loads anything from
outside the server.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ui.browser import axe_source, chromium, needs_browser
from tests.ui.conftest import PLANTED, PLANTED_SESSION, planted_transcript
from tests.ui.test_ui_server import recall_finds

pytestmark = [needs_browser, pytest.mark.slow]

PAGES = ("/", "/search?q=heliotrope+cache", f"/session/{PLANTED_SESSION}", "/commits",
         "/memory", f"/session/{PLANTED_SESSION}/forget", "/memory/sync")


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    with chromium(tmp_path / "profile") as context:
        yield context


def test_search_finds_the_planted_passage_and_the_session_shows_it(
        ui_server: Any, browser: Any) -> None:
    page = browser.new_page()
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url))
    page.goto(ui_server.url)
    page.get_by_label("Search the memory").fill("heliotrope cache")
    page.get_by_role("button", name="Search", exact=True).click()
    page.wait_for_url("**/search?q=*")
    hits = page.locator("ol.hits > li")
    assert hits.count() >= 1
    first = hits.filter(has_text="evicts entries after ninety seconds").first
    first.get_by_role("link").click()
    page.wait_for_url(f"**/session/{PLANTED_SESSION}*")
    hit = page.locator("article.turn.hit")
    assert hit.count() == 1
    assert "evicts entries after ninety seconds" in hit.inner_text()
    assert hit.locator("mark").first.inner_text().lower() in ("heliotrope", "cache")
    assert page.locator(".redacted").first.is_visible()
    tool = page.locator("details.block.tool_use").first
    assert not tool.evaluate("d => d.open")  # folded until asked
    assert all(u.startswith(ui_server.url) for u in seen), seen


def test_forget_through_the_page_removes_it_from_a_later_recall(
        ui_server: Any, browser: Any, settings: Any, ui_memory: Path) -> None:
    assert recall_finds(settings, ui_memory, PLANTED)
    page = browser.new_page()
    page.goto(f"{ui_server.url}session/{PLANTED_SESSION}")
    page.get_by_role("link", name="Forget this session…").click()
    page.wait_for_url("**/forget")
    assert "will be hidden from every recall" in page.inner_text("main")
    assert recall_finds(settings, ui_memory, PLANTED)  # asking changed nothing
    page.get_by_role("button", name="Forget this session").click()
    page.wait_for_url(lambda url: "done=" in url)
    assert "forgot" in page.get_by_role("status").first.inner_text()
    assert not recall_finds(settings, ui_memory, PLANTED)


class _Evil(http.server.BaseHTTPRequestHandler):
    """Another site on another port: a page that posts to funes ui as soon as it loads."""

    target = ""

    def do_GET(self) -> None:
        body = ('<!doctype html><html lang="en"><title>win a prize</title><body>'
                '<form id="f" method="post" action="' + self.target + '">'
                '<input name="token" value="guessed"></form>'
                '<script>document.getElementById("f").submit()</script></body></html>')
        if self.path == "/quiet":
            body = '<!doctype html><html lang="en"><title>quiet</title><body>hi</body></html>'
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_cross_site_post_is_refused(ui_server: Any, browser: Any, settings: Any,
                                      ui_memory: Path) -> None:
    handler = type("Evil", (_Evil,), {"target": f"{ui_server.url}session/{PLANTED_SESSION}/forget"})
    evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=evil.serve_forever, daemon=True)
    thread.start()
    try:
        page = browser.new_page()
        answers: list[tuple[str, int]] = []
        page.on("response", lambda r: answers.append((r.request.method, r.status)))
        with page.expect_navigation(url=f"**/session/{PLANTED_SESSION}/forget"):
            page.goto(f"http://127.0.0.1:{evil.server_address[1]}/")
        assert ("POST", 403) in answers, answers
        assert "another site" in page.inner_text("body")
        # the same from a script: fetch without the page's token or origin
        page.goto(f"http://127.0.0.1:{evil.server_address[1]}/quiet")
        status = page.evaluate(
            """async (url) => { try { const r = await fetch(url, {method: 'POST',
                 mode: 'no-cors', body: new URLSearchParams({token: 'x'})}); return r.type; }
                 catch (e) { return 'error'; } }""",
            f"{ui_server.url}session/{PLANTED_SESSION}/forget")
        assert status in ("opaque", "error")
    finally:
        evil.shutdown()
        evil.server_close()
    assert recall_finds(settings, ui_memory, PLANTED)


def test_every_page_works_with_javascript_off(ui_server: Any, tmp_path: Path) -> None:
    with chromium(tmp_path / "nojs", java_script_enabled=False) as context:
        page = context.new_page()
        for path in PAGES:
            response = page.goto(ui_server.url.rstrip("/") + path)
            assert response is not None and response.status == 200, path
            assert page.locator("h1").count() == 1, path
        page.goto(ui_server.url)
        page.get_by_label("Search the memory").fill("heliotrope cache")
        page.get_by_role("button", name="Search", exact=True).click()
        page.wait_for_url("**/search?q=*")
        assert "evicts entries after ninety seconds" in page.inner_text("main")
        page.goto(ui_server.url)
        page.get_by_label("Agent").select_option("claude")
        page.get_by_role("button", name="Filter").click()
        page.wait_for_url("**agent=claude*")
        assert page.locator("li.session").count() >= 1


def test_every_page_passes_axe(ui_server: Any, tmp_path: Path) -> None:
    source = axe_source()
    with chromium(tmp_path / "axe", bypass_csp=True) as context:
        page = context.new_page()
        problems = []
        for path in PAGES:
            page.goto(ui_server.url.rstrip("/") + path)
            page.evaluate(source)
            result = page.evaluate("""() => axe.run(document, {runOnly: {type: 'tag',
                values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']}})""")
            checked = {r["id"] for r in result["passes"]} | {r["id"] for r in
                                                               result["violations"]}
            # the checks the issue names ran on every page
            assert {"label", "color-contrast", "page-has-heading-one"} <= checked, path
            problems += [f"{path}: {v['id']}: {v['help']} ({len(v['nodes'])} node(s): "
                         f"{v['nodes'][0]['html'][:120]})" for v in result["violations"]]
        assert not problems, "\n".join(problems)


def test_the_timeline_shows_a_new_session_without_a_reload(
        ui_server: Any, browser: Any, settings: Any, ui_memory: Path) -> None:
    from funes import api

    page = browser.new_page()
    page.goto(ui_server.url)
    page.evaluate("window.__sameDocument = true")
    assert "lanterns are relit" not in page.inner_text("#timeline")
    time.sleep(1.5)  # the event stream is open and has seen the current HEAD
    path = planted_transcript(ui_memory.parent, "live-session-0002",
                              "the lanterns are relit at dusk", day="2026-05-06")
    api.index(settings, memory=str(ui_memory), paths=[str(path)])  # what a hook's run does
    page.wait_for_function(
        "() => document.getElementById('timeline').innerText.includes('live-session-0002')",
        timeout=30_000)
    assert page.evaluate("window.__sameDocument") is True
