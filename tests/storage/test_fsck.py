from __future__ import annotations

from pathlib import Path

from funes.storage.fsck import fsck
from funes.storage.repo import Repository
from tests.builders import make_batch


def _flip(path: Path, offset: int = 20) -> None:
    data = bytearray(path.read_bytes())
    data[min(offset, len(data) - 1)] ^= 0x40
    path.write_bytes(bytes(data))


def test_clean_repository_passes(repo: Repository) -> None:
    repo.commit_chunks(make_batch(0, 30), "one")
    repo.commit_chunks(make_batch(30, 30), "two")
    report = fsck(repo)
    assert report.ok and not report.warnings
    assert report.commits == 2 and report.rows == 60 and report.objects == 4 and report.files == 2


def test_flipped_byte_in_each_object_is_reported_with_its_id(repo: Repository) -> None:
    repo.commit_chunks(make_batch(0, 10), "one")
    repo.commit_chunks(make_batch(10, 10), "two")
    for oid in list(repo.objects):
        path = repo.objects.path_of(oid)
        original = path.read_bytes()
        _flip(path)
        report = fsck(repo)
        assert not report.ok
        assert any(p.name == oid for p in report.problems), [str(p) for p in report.problems]
        path.write_bytes(original)
    assert fsck(repo).ok


def test_flipped_byte_in_a_fragment_file_is_reported(repo: Repository) -> None:
    repo.commit_chunks(make_batch(0, 10), "one")
    manifest = repo.objects.manifest(repo.head_commit().manifests[0])  # type: ignore[union-attr]
    data_file = repo.chunks.path / manifest.fragments[0].files[0].path
    _flip(data_file, 100)
    report = fsck(repo)
    assert not report.ok
    assert any(str(data_file) == p.name for p in report.problems)


def test_damaged_ref_is_reported(repo: Repository) -> None:
    repo.commit_chunks(make_batch(0, 3), "one")
    (repo.path / "refs/heads/main").write_text("not a commit id\n")
    report = fsck(repo)
    assert not report.ok
    assert any("refs/heads/main" in str(p) for p in report.problems)


def test_missing_object_is_reported(repo: Repository) -> None:
    repo.commit_chunks(make_batch(0, 3), "one")
    head = repo.head_commit()
    assert head
    repo.objects.path_of(head.manifests[0]).unlink()
    report = fsck(repo)
    assert not report.ok
    assert any(head.manifests[0] in str(p) for p in report.problems)
