"""`funes ui` benchmark (issue #32): server time of the timeline and of a search, page weight.

Run:  python bench/bench_ui.py                  # the ~100k-chunk memory; bench/results/ui.md
      python bench/bench_ui.py --size 10000     # smaller, quicker

The memory is bench/bench_recall.py's scale memory (real LongMemEval text, synthetic vectors,
cached under ~/.cache/funes-bench or $FUNES_BENCH_CACHE), searched with its synthetic
cross-encoder of ms-marco-MiniLM's shape (real cost, meaningless scores), as bench_browse.py
does. `funes ui` runs in this process on loopback; every page is fetched over HTTP and its
server time read from the `Server-Timing` header it sends (`lib`: the library, `render`: the
templates, `total`: the whole request inside the server), so the figure excludes the client.

Measures:

* the timeline's first page (`/`): with the session catalogue cached (every later view), and
  rebuilt (the first view after a commit: funes.retrieval.browse rebuilds it once per HEAD);
* a search (`/search?q=…`) for LongMemEval questions, warm (models loaded);
* each page's weight: the HTML plus the only two assets (ui.css, ui.js), and, when
  /usr/bin/chromium is present, what headless Chromium actually requested to show each page,
  and whether any request left the server.
"""

from __future__ import annotations

import argparse
import http.client
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_recall as br  # noqa: E402
import longmemeval as lme  # noqa: E402

TARGET_MS = 300.0
TARGET_BYTES = 200 * 1024


def fetch(port: int, path: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body


def timing(headers: dict[str, str]) -> dict[str, float]:
    return {m.group(1): float(m.group(2))
            for m in re.finditer(r"(\w+);dur=([\d.]+)", headers.get("server-timing", ""))}


def p(xs: Sequence[float], q: float) -> float:
    return br.pct(list(xs), q) / 1000  # br.pct takes seconds; these are milliseconds


def figure(totals: Sequence[float], libs: Sequence[float], cpus: Sequence[float]) -> str:
    own = [t - lib for t, lib in zip(totals, libs, strict=True)]
    return (f"p50 {p(totals, 50):.0f} ms, p95 {p(totals, 95):.0f} ms, max {max(totals):.0f} ms "
            f"(library p50 {p(libs, 50):.0f} ms, the page's own p50 {p(own, 50):.1f} ms; "
            f"server CPU p50 {p(cpus, 50):.0f} ms)")


def browser_weights(url: str, paths: Sequence[str]) -> list[tuple[str, int, int, int]]:
    """(path, requests, bytes, requests not to the server) as Chromium loaded each page."""
    import tempfile

    from tests.ui.browser import CHROMIUM, chromium

    if not CHROMIUM.exists():
        return []
    out = []
    with tempfile.TemporaryDirectory() as tmp, chromium(Path(tmp) / "profile") as context:
        for path in paths:
            page = context.new_page()
            asked: list[Any] = []
            done: list[Any] = []

            def sent(request: Any, asked: list[Any] = asked) -> None:
                asked.append(request)

            def finished(request: Any, done: list[Any] = done) -> None:
                done.append(request)

            page.on("request", sent)
            page.on("requestfinished", finished)
            page.goto(url.rstrip("/") + path, wait_until="load")
            page.wait_for_timeout(300)
            size = sum(r.sizes()["responseBodySize"] for r in done)
            foreign = sum(1 for r in asked if not r.url.startswith(url))
            page.close()
            out.append((path, len(asked), size, foreign))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=100000)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "ui.md")
    args = parser.parse_args(argv)

    def log(msg: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)

    from funes import api
    from funes.retrieval import browse as rbrowse
    from funes.ui.server import UiServer

    started = br.load_now()
    settings = lme.bench_settings()
    rs = br.rerank_settings(settings)
    oracle = lme.load(lme.ORACLE_FILE)
    texts = br._text_sessions(lme.load(lme.S_FILE), oracle)
    queries = [e["question"] for e in oracle if not lme.is_abstention(e)][::7][: args.reps]
    mem = br.build_scale_memory(settings, args.size, texts, log=log)
    label = f"{mem.chunks} chunks"
    ui = UiServer.make(rs, [str(mem.path)]).start()
    port = ui.state.port
    rows: list[tuple[str, str, str]] = []

    def add(row: tuple[str, str, str]) -> None:
        rows.append(row)
        log(" | ".join(row))

    try:
        fetch(port, "/")  # warm: imports, templates, the catalogue
        fetch(port, "/search?" + urlencode({"q": queries[0]}))  # warm: models loaded
        load = br.load_now()
        tot, lib, cpu = [], [], []
        for _ in range(args.reps):
            status, headers, _ = fetch(port, "/")
            assert status == 200
            t = timing(headers)
            tot.append(t["total"])
            lib.append(t["lib"])
            cpu.append(t["cpu"])
        add((f"timeline first page `/` (catalogue cached), {label}",
                     figure(tot, lib, cpu), f"{load} → {br.load_now()}"))
        load = br.load_now()
        tot, lib, cpu = [], [], []
        for _ in range(max(3, args.reps // 4)):
            rbrowse._catalogues.clear()
            status, headers, _ = fetch(port, "/")
            t = timing(headers)
            tot.append(t["total"])
            lib.append(t["lib"])
            cpu.append(t["cpu"])
        add((f"timeline first page `/`, catalogue rebuilt (first view after a commit), "
                     f"{label}", figure(tot, lib, cpu), f"{load} → {br.load_now()}"))
        load = br.load_now()
        tot, lib, cpu = [], [], []
        hits = []
        for q in queries:
            status, headers, body = fetch(port, "/search?" + urlencode({"q": q}))
            assert status == 200
            t = timing(headers)
            tot.append(t["total"])
            lib.append(t["lib"])
            cpu.append(t["cpu"])
            hits.append(body.count(b'<li class="hit">'))
        add((f"search `/search?q=…` ({len(queries)} LongMemEval questions, reranked "
                     f"within recall's budget, {sum(hits) / len(hits):.1f} hits each), {label}",
                     figure(tot, lib, cpu), f"{load} → {br.load_now()}"))
        first = api.sessions(api.open_memory(rs, str(mem.path)), limit=1).sessions[0]
        paths = ["/", "/search?" + urlencode({"q": queries[0]}),
                 f"/session/{quote(first.session_id)}", "/commits", "/memory"]
        assets = sum(len(fetch(port, f"/static/{n}")[2]) for n in ("ui.css", "ui.js"))
        for path in paths:
            status, headers, body = fetch(port, path)
            external = re.findall(rb'(?:src|href|action)="(?:https?:)?//', body)
            add((f"weight of `{path[:60]}`: HTML + ui.css + ui.js",
                         f"{(len(body) + assets) / 1024:.1f} KB ({len(body) / 1024:.1f} KB "
                         f"HTML); external addresses in the HTML: {len(external)}",
                         br.load_now()))
        for path, count, size, foreign in browser_weights(ui.url, paths):
            note = " (the timeline's event stream counted, open)" if path == "/" else ""
            add((f"Chromium loading `{path[:60]}`",
                 f"{count} request(s){note}, {size / 1024:.1f} KB, {foreign} request(s) not "
                 "to the server", br.load_now()))
    finally:
        ui.stop()
    text = "\n".join([
        "# `funes ui` benchmark (issue #32)",
        "",
        f"`python bench/bench_ui.py {' '.join(argv or sys.argv[1:])}` on a 2-core machine "
        f"shared with other work; load average (1/5/15 min) at start {started}, at end "
        f"{br.load_now()}. Server times are the `total` of each response's `Server-Timing` "
        f"header (the request inside the server, the client excluded); targets: ≤ "
        f"{TARGET_MS:.0f} ms for the timeline's first page and a search, ≤ "
        f"{TARGET_BYTES // 1024} KB a page, no external request.",
        "",
        "| measure | figure | load (1/5/15 min) |",
        "|---|---|---|",
        *[f"| {what} | {fig} | {load} |" for what, fig, load in rows],
        "",
        "The timeline's catalogue is rebuilt once per HEAD: `funes ui` does it in the "
        "background as soon as HEAD moves (funes.ui.app.watch), before the live pages ask "
        "again, so a person meets the rebuilt figure only by opening `/` within that moment.",
        "",
    ])
    print(text)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
