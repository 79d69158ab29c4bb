"""Project identity on real repositories built with git: remotes, worktrees, clones."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from funes.ingest import project
from funes.ingest.project import (
    clear_cache,
    normalise_remote_url,
    parse_remotes,
    project_identity,
)

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git binary not installed")


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    clear_cache()


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "init.defaultBranch=main", "-c", "user.name=t", "-c", "user.email=t@t",
         *args],
        cwd=cwd, check=True, capture_output=True,
    )


def make_repo(path: Path, remote: str | None = None) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    (path / "README").write_text("hi\n")
    git(path, "add", "README")
    git(path, "commit", "-q", "-m", "init")
    if remote:
        git(path, "remote", "add", "origin", remote)
    return path


@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:a/b.git",
        "https://github.com/a/b",
        "https://github.com/a/b.git",
        "https://github.com/a/b/",
        "ssh://git@github.com/a/b.git",
        "ssh://git@github.com:22/a/b.git",
        "https://user:token@github.com/a/b.git",
        "git://github.com/a/b.git",
        "HTTPS://GitHub.com/a/b",
    ],
)
def test_normalise_remote_url(url: str) -> None:
    assert normalise_remote_url(url) == "github.com/a/b"


def test_normalise_other_hosts() -> None:
    assert normalise_remote_url("git@gitlab.example.org:group/sub/proj.git") == (
        "gitlab.example.org/group/sub/proj"
    )
    assert normalise_remote_url("https://huggingface.co/spaces/acme/demo") == (
        "huggingface.co/spaces/acme/demo"
    )
    assert normalise_remote_url("") is None


def test_parse_remotes_config_syntax() -> None:
    text = (
        "[core]\n\tbare = false\n"
        '[remote "upstream"]\n\tURL = https://github.com/up/stream.git ; comment\n'
        "[remote.origin]\n\turl = \"git@github.com:me/fork.git\"\n\tfetch = +refs/*:refs/*\n"
        '[remote "spaced name"]\n\turl=https://x.org/y # trailing\n'
        "# [remote \"commented\"]\n"
    )
    assert parse_remotes(text) == {
        "upstream": "https://github.com/up/stream.git",
        "origin": "git@github.com:me/fork.git",
        "spaced name": "https://x.org/y",
    }


@needs_git
def test_origin_remote_identity_from_any_subdirectory(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "widget", "git@github.com:acme/widget.git")
    (repo / "src" / "deep").mkdir(parents=True)
    assert project_identity(str(repo)) == "github.com/acme/widget"
    assert project_identity(str(repo / "src" / "deep")) == "github.com/acme/widget"
    assert project_identity(str(repo / "README")) == "github.com/acme/widget"


@needs_git
def test_origin_wins_over_other_remotes(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", "https://github.com/me/fork")
    git(repo, "remote", "add", "aaa", "https://github.com/up/stream")
    assert project_identity(str(repo)) == "github.com/me/fork"
    other = make_repo(tmp_path / "o")
    git(other, "remote", "add", "zeta", "https://example.org/z/z")
    git(other, "remote", "add", "alpha", "https://example.org/a/a")
    assert project_identity(str(other)) == "example.org/a/a"


@needs_git
def test_worktrees_share_identity(tmp_path: Path) -> None:
    with_remote = make_repo(tmp_path / "main", "ssh://git@github.com/acme/app.git")
    git(with_remote, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "feature")
    assert (tmp_path / "wt" / ".git").is_file()  # a gitdir: file, not a directory
    assert project_identity(str(tmp_path / "wt")) == "github.com/acme/app"

    local = make_repo(tmp_path / "local")
    git(local, "worktree", "add", "-q", str(tmp_path / "local-wt"), "-b", "other")
    common = str((tmp_path / "local" / ".git").resolve())
    assert project_identity(str(local)) == common
    assert project_identity(str(tmp_path / "local-wt")) == common


@needs_git
def test_clones_share_identity(tmp_path: Path) -> None:
    origin = make_repo(tmp_path / "origin")  # no remote: named by its git dir
    subprocess.run(["git", "clone", "-q", str(origin), str(tmp_path / "clone")], check=True,
                   capture_output=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(origin), str(tmp_path / "bare.git")],
                   check=True, capture_output=True)
    subprocess.run(["git", "clone", "-q", str(tmp_path / "bare.git"), str(tmp_path / "c2")],
                   check=True, capture_output=True)
    ident = project_identity(str(origin))
    assert ident == str((origin / ".git").resolve())
    assert project_identity(str(tmp_path / "clone")) == ident
    assert project_identity(str(tmp_path / "c2")) == ident  # via the bare repo's origin

    hub = make_repo(tmp_path / "hub", "git@github.com:acme/hub.git")
    subprocess.run(["git", "clone", "-q", str(hub), str(tmp_path / "hub-clone")], check=True,
                   capture_output=True)
    assert project_identity(str(tmp_path / "hub-clone")) == "github.com/acme/hub"


def test_gitdir_file_with_relative_path(tmp_path: Path) -> None:
    """A submodule-style `.git` file pointing (relatively) at a git dir elsewhere."""
    real = tmp_path / "store" / "modules" / "lib"
    real.mkdir(parents=True)
    (real / "HEAD").write_text("ref: refs/heads/main\n")
    (real / "config").write_text('[remote "origin"]\n\turl = https://github.com/acme/lib\n')
    work = tmp_path / "work" / "lib"
    work.mkdir(parents=True)
    (work / ".git").write_text("gitdir: ../../store/modules/lib\n")
    assert project_identity(str(work)) == "github.com/acme/lib"


def test_none_outside_a_repository(tmp_path: Path) -> None:
    assert project_identity(str(tmp_path / "does-not-exist")) is None
    plain = tmp_path / "plain"
    plain.mkdir()
    if project.find_git_dir(plain) is None:
        assert project_identity(str(plain)) is None
    assert project_identity(None) is None
    assert project_identity("") is None
    assert project_identity("relative/path") is None
    assert project_identity("D:\\physics\\earth") is None


def test_cached_per_directory(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / ".git" / "config").write_text("[core]\n")
    first = project_identity(str(repo))
    assert first == str((repo / ".git").resolve())
    (repo / ".git" / "config").write_text('[remote "origin"]\n\turl = git@h.org:a/b\n')
    assert project_identity(str(repo)) == first  # cached
    clear_cache()
    assert project_identity(str(repo)) == "h.org/a/b"
