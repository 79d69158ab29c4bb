"""The store's side of a push (funes.storage.publish): what leaves, its images, the plan.

The gate's verdict is given here by hand (a set of held ids), so these tests check only what
the store writes; tests/security/test_gate.py runs the whole push through the real scanners.
"""

from __future__ import annotations

from funes.model.ids import ObjectId
from funes.model.refs import branch_ref
from funes.storage import publish
from funes.storage.repo import Repository
from funes.storage.transfer import commits_between
from tests.builders import make_batch


def _outgoing(repo: Repository) -> tuple[ObjectId, publish.Outgoing]:
    tip = repo.refs.read(branch_ref("main"))
    assert tip is not None
    return tip, publish.outgoing(repo, list(commits_between(repo, tip, set())))


def test_outgoing_reads_every_chunk_row_and_its_place(repo: Repository) -> None:
    chunks = make_batch(0, 6)
    repo.commit_chunks(chunks[:4], "index: first")
    repo.commit_chunks(chunks[4:], "index: second")
    _, out = _outgoing(repo)
    assert len(out.commits) == 2
    assert out.commits[0][1].time <= out.commits[1][1].time  # parents first
    assert out.chunk_ids == {c.id for c in chunks}
    assert out.scannable() == {c.id: c.text for c in sorted(chunks, key=lambda c: c.id)}
    assert out.places[chunks[0].id] == (chunks[0].harness, chunks[0].session_id,
                                        chunks[0].turn_id)


def test_nothing_held_sends_the_commits_as_they_are(repo: Repository) -> None:
    repo.commit_chunks(make_batch(0, 5), "index: clean")
    tip, out = _outgoing(repo)
    before = sorted(p for p in repo.path.rglob("*") if p.is_file())
    result = publish.publish(repo, out, set(), tip, {})
    assert result.tip == tip and result.commits == [tip] and not result.images
    assert sorted(p for p in repo.path.rglob("*") if p.is_file()) == before


def test_held_rows_are_left_out_of_the_images_and_the_plan(repo: Repository) -> None:
    chunks = make_batch(0, 5)
    repo.commit_chunks(chunks[:3], "index: first")
    repo.commit_chunks(chunks[3:], "index: second")
    tip, out = _outgoing(repo)
    held = {chunks[1].id}
    result = publish.publish(repo, out, held, tip, {})
    assert result.tip != tip and result.tip == result.images[tip]
    assert len(result.images) == 2  # the second commit is rewritten onto the first's image
    image = repo.objects.commit(result.tip)
    assert image.parents == (result.commits[0],)
    assert image.chunk_count == repo.objects.commit(tip).chunk_count - 1
    plan = publish.transfer_plan(repo, result.commits)
    assert set(result.commits) <= set(plan.objects)
    sent_ids: set[str] = set()
    schema = repo.chunks.dataset().schema
    for record in plan.tables["chunks"]:
        rows = publish.read_record(repo.chunks.path, record, schema)
        sent_ids.update(rows.column("id").to_pylist())
    assert sent_ids == {c.id for c in chunks} - held
    # the local branch keeps its commits; the map leads the next push to the images
    assert repo.refs.read(branch_ref("main")) == tip
    publish.save_published(repo, "origin", result.images)
    assert publish.load_published(repo, "origin") == result.images
    assert publish.originals(result.images)[result.tip] == tip
