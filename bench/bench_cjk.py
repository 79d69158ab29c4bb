"""Chinese and Japanese recall through BM25 alone: the "simple" tokenizer against "icu".

bench/data/cjk_recall.json holds developer chats written for funes in Chinese, Japanese and
English (one fact each) and questions in the same language. Each tokenizer gets a memory of all
the chats, built through the generic import (`api.index`, no vectors), stamped with
`api.reindex(tokenizer=…)`; every question is asked with `api.recall(vector=False)`, and a hit
is the question's session at rank 1 (hit@1) or in the first 5 sessions (hit@5).

    python bench/bench_cjk.py          # results/cjk.md

The English side of "English figures unchanged" is the default: a memory not stamped keeps the
"simple" tokenizer, so every English figure elsewhere in bench/results stands; the English
questions here are reported under both tokenizers too.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "cjk_recall.json"
WORKDIR = "/home/dev/app"


def load(path: Path = DATA) -> dict[str, Any]:
    """Sessions and questions."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def import_lines(data: dict[str, Any]) -> list[str]:
    """Every chat as generic-import lines, a day apart, a minute per turn."""
    out = []
    for day, session in enumerate(data["sessions"]):
        for i, (role, text) in enumerate(session["turns"]):
            out.append(json.dumps({
                "session_id": session["id"], "id": f"{session['id']}_{i + 1}", "role": role,
                "content": text, "cwd": WORKDIR,
                "timestamp": f"2026-{1 + day // 28:02d}-{1 + day % 28:02d}T10:{i:02d}:00Z",
            }, ensure_ascii=False))
    return out


def build(settings: Any, root: Path, data: dict[str, Any], tokenizer: str) -> Any:
    """A memory of every chat, stamped with `tokenizer`."""
    from funes import api

    target = root / tokenizer
    target.mkdir(parents=True)
    src = target / "chats.jsonl"
    src.write_text("".join(line + "\n" for line in import_lines(data)), encoding="utf-8")
    api.init(settings, target)
    mem = str(target / ".funes")
    api.index(settings, memory=mem, paths=[str(src)], agents=["import"])
    repo = api.open_memory(settings, mem)
    if tokenizer != "simple":
        api.reindex(settings, repo, tokenizer=tokenizer)
    return repo


def ask(settings: Any, repo: Any, questions: Sequence[dict[str, Any]]) -> dict[str, list[int]]:
    """Per language: [hit@1, hit@5] counts and the number of questions."""
    from funes import api

    out: dict[str, list[int]] = {}
    for q in questions:
        result = api.recall(settings, repo, q["q"], k=20, vector=False, neighbors=0)
        ranked: list[str] = []
        for hit in result.hits:
            if hit.row["session_id"] not in ranked:
                ranked.append(hit.row["session_id"])
        counts = out.setdefault(q["lang"], [0, 0, 0])
        counts[0] += ranked[:1] == [q["gold"]]
        counts[1] += q["gold"] in ranked[:5]
        counts[2] += 1
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Build both memories, ask, write results/cjk.md."""
    from funes._env import settings as load_settings

    out_path = ROOT / "bench" / "results" / "cjk.md"
    if argv:
        out_path = Path(argv[0])
    data = load()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_avg = " ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = ["# Chinese and Japanese through BM25 alone (`python bench/bench_cjk.py`)", "",
             f"Started {started}, load {load_avg}. {len(data['sessions'])} chats, "
             f"{len(data['questions'])} questions (bench/data/cjk_recall.json, written for "
             "funes); `api.recall(vector=False)`, sessions ranked by their best passage.", "",
             "| tokenizer | language | questions | hit@1 | hit@5 |", "|---|---|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        settings = replace(load_settings(), home=Path(tmp) / "home")
        for tokenizer in ("simple", "icu"):
            repo = build(settings, Path(tmp), data, tokenizer)
            per = ask(settings, repo, data["questions"])
            cjk = [sum(per[lang][i] for lang in ("zh", "ja")) for i in range(3)]
            for lang, (h1, h5, n) in [*per.items(), ("zh + ja", tuple(cjk))]:
                lines.append(f"| {tokenizer} | {lang} | {n} | {h1 / n:.3f} ({h1}) | "
                             f"{h5 / n:.3f} ({h5}) |")
    text = "\n".join(lines) + "\n"
    print(text)
    out_path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
