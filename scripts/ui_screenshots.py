"""Screenshots of every `funes ui` page for docs/ui.md (docs/ui/*.png).

Run:  python scripts/ui_screenshots.py        # needs /usr/bin/chromium and playwright

Builds the same memory the browser tests use (the Claude fixtures and one planted session, in
a temporary FUNES_HOME), serves it on loopback and photographs each page in headless Chromium.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PAGES = (
    ("timeline", "/"),
    ("search", "/search?q=how+long+does+the+cache+keep+entries"),
    ("session", "/session/planted-session-0001?turn=planted-session-0001-m1&q=cache+entries"),
    ("commits", "/commits"),
    ("memory", "/memory"),
    ("forget", "/session/planted-session-0001/forget"),
)


def main() -> int:
    """Build the memory, serve it, photograph each page into docs/ui/."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        os.environ.update(HOME=str(home), FUNES_HOME=str(home / ".funes"), FUNES_SERVE="off",
                          FUNES_AUTHOR_NAME="Ada Example", FUNES_AUTHOR_EMAIL="ada@example.org")
        from dataclasses import replace
        from datetime import UTC, datetime

        from funes import api
        from funes.ui.server import UiServer
        from tests.gitlink.conftest import dulwich_commit, init_git
        from tests.ui.browser import chromium
        from tests.ui.conftest import OWN_FIXTURES, planted_transcript

        code = init_git(Path(tmp) / "heliotrope")
        settings = replace(api.load_settings(), cwd=code)
        repo = api.init(settings, code).repo
        planted = planted_transcript(Path(tmp), cwd=str(code))
        fixtures = sorted((OWN_FIXTURES / "traces" / "claude").glob("*.jsonl"))
        api.index(settings, memory=str(repo.path), paths=[str(p) for p in [*fixtures, planted]])
        when = int(datetime(2026, 3, 4, 11, 0, tzinfo=UTC).timestamp())
        dulwich_commit(code, {"config/cache.toml": "ttl_seconds = 90\n"},
                       "Cache: evict after ninety seconds", when)
        api.link_commit(settings, index=False)
        server = UiServer.make(settings, [str(repo.path)]).start()
        out = ROOT / "docs" / "ui"
        out.mkdir(parents=True, exist_ok=True)
        try:
            with chromium(Path(tmp) / "profile") as context:
                page = context.new_page()
                page.set_viewport_size({"width": 960, "height": 640})
                for name, path in PAGES:
                    page.goto(server.url.rstrip("/") + path)
                    if "#" not in path and "turn=" in path:
                        page.locator("article.turn.hit").scroll_into_view_if_needed()
                    page.screenshot(path=str(out / f"{name}.png"))
                    print(f"docs/ui/{name}.png {(out / f'{name}.png').stat().st_size} bytes")
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
