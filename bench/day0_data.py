"""The full LongMemEval-S question list, assembled from a per-question public copy.

The day-zero benchmark at full size needs `longmemeval_s_cleaned.json` (500 questions, ~19k
distinct haystack sessions); ../shared/fixtures holds only a 40-question sample. A public copy
of the S set one question per file is in github:hussainzs/Memoria,
`evaluations/data/lme_jsons/<haystack size>_<question id>.json` (the same folder also holds
the oracle variant, sizes 1-6, and the M variant, sizes ~500, whose files are not stored):
this script takes the files whose haystack has 30 to 100 sessions (the S variant's ~50) from
such a folder, or from a git mirror of that repository, and writes them as one JSON list.

Run:  python bench/day0_data.py MIRROR_OR_FOLDER OUT.json.gz

On the copy used for bench/results/day0.md it gives 498 questions over 19,133 distinct
sessions, identical (ids and turns) to the cleaned sample's 40 questions.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

FOLDER = "evaluations/data/lme_jsons"
S_SIZES = range(30, 101)


def _size(name: str) -> int | None:
    head = name.split("_", 1)[0]
    return int(head) if head.isdigit() else None


def from_git(repo: Path) -> Iterator[dict[str, Any]]:
    """Every S question in a git directory's HEAD (files absent from the mirror skipped)."""
    listing = subprocess.run(["git", "-C", str(repo), "ls-tree", "-r", "--long", "HEAD", FOLDER],
                             capture_output=True, text=True, check=True).stdout
    for row in listing.splitlines():
        meta, path = row.split("\t", 1)
        _, _, blob, size = meta.split()
        if size == "BAD" or _size(Path(path).name) not in S_SIZES:
            continue
        data = subprocess.run(["git", "-C", str(repo), "cat-file", "blob", blob],
                              capture_output=True, check=True).stdout
        yield json.loads(data)


def from_folder(folder: Path) -> Iterator[dict[str, Any]]:
    """Every S question among a folder's `<size>_<id>.json` files."""
    for path in sorted(folder.glob("*.json")):
        if _size(path.name) in S_SIZES:
            yield json.loads(path.read_text("utf-8"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="a git mirror of the repository, or a folder")
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    is_git = (args.source / "HEAD").is_file() or (args.source / ".git").exists()
    entries = from_git(args.source) if is_git else from_folder(args.source)
    seen: dict[str, dict[str, Any]] = {}
    for entry in entries:
        seen.setdefault(str(entry["question_id"]), entry)
    sessions = {s for e in seen.values() for s in e["haystack_session_ids"]}
    with gzip.open(args.out, "wt", encoding="utf-8") as fh:
        json.dump(list(seen.values()), fh)
    print(f"{len(seen)} questions, {len(sessions)} distinct sessions → {args.out}")


if __name__ == "__main__":
    main()
