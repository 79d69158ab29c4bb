"""Headless Chromium for the browser tests: Debian's package, driven by Playwright.

Never a downloaded browser (`playwright install` is not used): the system's /usr/bin/chromium,
installed by .ci/run, in a fresh profile per test, with everything that would reach the
network on its own turned off. Tests that need it skip with the reason when it is missing.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _missing() -> str | None:
    if not CHROMIUM.exists():
        return ("needs Debian's chromium at /usr/bin/chromium (`apt-get install chromium "
                "chromium-driver`; .ci/run installs it)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "needs the playwright package (`pip install -e '.[test]'`)"
    return None


needs_browser = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


@contextmanager
def chromium(profile: Path, **options: Any) -> Iterator[Any]:
    """A browser context on a new profile directory; `options` go to the context."""
    from playwright.sync_api import sync_playwright

    profile.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), headless=True, args=ARGS,
            viewport={"width": 1100, "height": 800}, **options)
        try:
            yield context
        finally:
            context.close()
    shutil.rmtree(profile, ignore_errors=True)


def axe_source() -> str:
    """axe-core (MPL-2.0), as the axe-playwright-python package ships it."""
    import axe_playwright_python

    return (Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text("utf-8")
