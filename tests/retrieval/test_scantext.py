"""The scan's text cache (funes.retrieval.scantext) on real Lance tables: one file pair per
fragment, built once, and scans exact whatever the cache holds."""

from __future__ import annotations

from pathlib import Path

from funes.api import browse
from funes.api.security import forget
from funes.ingest.chunking import split_text, stitch_texts
from funes.model.chunk import Chunk
from funes.storage.repo import Repository


def _chunk(session: str, seq: int, text: str, *, split: int = 0, day: int = 1) -> Chunk:
    return Chunk(text=text, harness="claude", session_id=session, turn_id=f"{session}-t{seq}",
                 seq=seq, ts=f"2026-03-{day:02d}T10:{seq % 60:02d}:00Z", role="tool",
                 block_type="tool_result", block_idx=0, split_idx=split, tool_name="Bash",
                 workdir="/src/app", project="github.com/acme/app")


def _files(repo: Repository) -> list[Path]:
    return sorted((repo.path / "index" / "scan").glob("*.arrow"))


def _windows() -> tuple[list[str], str]:
    """A block split in chunks, and a needle across the seam of windows 1 and 2 only."""
    text = " ".join(f"Sentence number {i} talks about the retry budget of worker {i}."
                    for i in range(60))
    windows = split_text(text, max_tokens=80)
    assert len(windows) > 3 and stitch_texts(windows) == text
    second = text.find(windows[2], len(windows[0]) // 2)
    end_of_second = text.find(windows[1]) + len(windows[1])
    needle = text[second - 4 : end_of_second + 4]
    assert needle not in windows[1] and needle not in windows[2]
    return windows, needle


def test_each_fragment_is_cached_once_and_a_commit_adds_one_file(repo: Repository) -> None:
    repo.commit_chunks([_chunk("a", 0, "The Flux capacitor needs 1.21 gigawatts.")], "one")
    assert browse.scan(repo, "flux CAPACITOR").total == 1
    first = _files(repo)
    assert len(first) == 1
    mtime = first[0].stat().st_mtime_ns
    repo.commit_chunks([_chunk("b", 0, "Another flux capacitor, in session b.", day=2)], "two")
    found = browse.scan(repo, "Flux Capacitor")
    assert found.total == 2 and [h.row["session_id"] for h in found.hits] == ["a", "b"]
    assert found.hits[1].found == "flux capacitor"  # the text's own case
    assert len(_files(repo)) == 2 and first[0].stat().st_mtime_ns == mtime  # not rebuilt
    # Forgetting hides without a rebuild: tombstones are applied to what the cache finds.
    forget(repo, session="a")
    assert browse.scan(repo, "flux capacitor").total == 1
    assert len(_files(repo)) == 2


def test_a_damaged_or_deleted_cache_is_built_again(repo: Repository) -> None:
    repo.commit_chunks([_chunk("a", 0, "ECONNRESET while pushing to the Hub.")], "one")
    assert browse.scan(repo, "econnreset").total == 1
    for path in (repo.path / "index" / "scan").glob("*.txt"):
        path.write_bytes(b"garbage")
    assert browse.scan(repo, "econnreset").total == 1
    for path in (repo.path / "index" / "scan").iterdir():
        path.unlink()
    assert browse.scan(repo, "ECONNRESET").total == 1 and _files(repo)


def test_a_block_completed_by_a_later_commit_is_found_across_the_seam(
        repo: Repository) -> None:
    windows, needle = _windows()
    chunks = [_chunk("long", 0, w, split=i) for i, w in enumerate(windows)]
    repo.commit_chunks(chunks[:2], "first half")  # splits 0 and 1
    repo.commit_chunks(chunks[2:], "second half")  # the rest: another fragment
    found = browse.scan(repo, needle.upper())
    assert found.total == 1 and found.hits[0].found.lower() == needle.lower()
    assert browse.scan(repo, needle + "not there").total == 0
    assert browse.scan(repo, needle, sessions=["long"]).total == 1
    assert browse.scan(repo, needle, sessions=["other"]).total == 0


def test_a_block_counts_once_and_session_scope_reads_only_its_blocks(
        repo: Repository) -> None:
    windows, _ = _windows()
    repo.commit_chunks([_chunk("long", 0, w, split=i) for i, w in enumerate(windows)]
                       + [_chunk("short", 1, "the retry budget, once more", day=2)], "seed")
    everywhere = browse.scan(repo, "retry budget")
    assert everywhere.total == 2 and everywhere.sessions == 2  # the split block once
    assert browse.scan(repo, "retry budget", sessions=["short"]).total == 1
    assert browse.scan(repo, "\x00").total == 0  # the cache's separator is no match


def test_case_changes_length_and_non_ascii_text(repo: Repository) -> None:
    repo.commit_chunks([_chunk("u", 0, "İstanbul and the Straße: café crème")], "seed")
    hit = browse.scan(repo, "CAFÉ CRÈME").hits[0]
    assert hit.found == "café crème" and hit.before.endswith("Straße: ")
    assert browse.scan(repo, "i̇stanbul").total == 1  # what "İ".lower() is
    assert browse.scan(repo, "strasse").total == 0  # lower case, not case folding


def test_a_pack_rebuilds_the_cache_and_scans_find_the_same(repo: Repository) -> None:
    from funes.storage import pack

    for i in range(6):
        repo.commit_chunks([_chunk(f"s{i}", 0, f"Commit {i}: the Flux capacitor again.",
                                   day=i + 1)], f"c{i}")
    before = browse.scan(repo, "flux capacitor")
    assert before.total == 6 and len(_files(repo)) == 6
    pack.pack(repo, force=True)
    assert len(repo.chunks.dataset().get_fragments()) < 6
    after = browse.scan(repo, "flux capacitor")
    assert [(h.row["id"], h.found, h.before) for h in after.hits] == \
        [(h.row["id"], h.found, h.before) for h in before.hits]
    assert len(_files(repo)) > 6  # the packed fragments' files, beside the old ones


def test_a_chunk_not_at_its_cached_address_is_read_by_id(repo: Repository) -> None:
    from funes.retrieval.browse import read_chunks

    repo.commit_chunks([_chunk("a", 0, "first"), _chunk("b", 1, "second")], "seed")
    ds = repo.chunks.dataset()
    ids = ds.to_table(columns=["id"], with_row_address=True).to_pylist()
    swapped = {ids[0]["id"]: ids[1]["_rowaddr"], ids[1]["id"]: 1 << 40}
    rows = read_chunks(ds, swapped, ["id", "text"])
    assert sorted(r["id"] for r in rows) == sorted(swapped)


def test_upkeep_caches_new_fragments_of_a_memory_scanned_before(repo: Repository) -> None:
    from funes.retrieval import indexes

    repo.commit_chunks([_chunk("a", 0, "first words")], "one")
    indexes.maintain(repo)
    assert not (repo.path / "index" / "scan").exists()  # never scanned: no cache
    browse.scan(repo, "words")
    repo.commit_chunks([_chunk("b", 0, "more words", day=2)], "two")
    assert len(_files(repo)) == 1
    indexes.maintain(repo)
    assert len(_files(repo)) == 2
