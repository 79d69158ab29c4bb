"""The git note on each linked code commit, under `refs/notes/funes`.

The note is for people reading the code history (`git log --notes=funes`): it names the memory
commit and the sessions, so a reader knows the commit has agent reasoning behind it and where
to look. funes itself reads links from the memory, not from notes (notes do not travel with a
plain `git push`, and a memory clone has no code repository at all).

Written with dulwich plumbing and moved by compare-and-swap, so a note written at the same
moment by `git notes` (or a second hook) is never lost: the loser re-reads and retries.
"""

from __future__ import annotations

from funes.errors import FunesError
from funes.gitlink.coderepo import CodeRepo

NOTES_REF = "refs/notes/funes"
_ATTEMPTS = 5


class NoteWriteError(FunesError):
    """The note could not be written (the link itself is recorded)."""


def read_note(code: CodeRepo, sha: str) -> str | None:
    """The funes note on a commit, or None."""
    from dulwich.notes import Notes

    repo = code.open()
    try:
        raw = Notes(repo.object_store, repo.refs).get_note(sha.encode("ascii"), NOTES_REF.encode())
    finally:
        repo.close()
    return raw.decode("utf-8", errors="replace") if raw is not None else None


def write_note(code: CodeRepo, sha: str, text: str) -> str:
    """Set the funes note of commit `sha` (replacing an earlier one); returns the notes commit.

    The notes commit is made by the repository's git identity (user.name/user.email), as
    `git notes` would make it.

    Raises:
        NoteWriteError: The notes ref kept moving under us.
    """
    import time

    from dulwich.notes import NotesTree, create_notes_tree
    from dulwich.objects import Commit, ObjectID, Tree
    from dulwich.refs import Ref
    from dulwich.repo import get_user_identity

    ref = Ref(NOTES_REF.encode())

    repo = code.open()
    try:
        store = repo.object_store
        committer = get_user_identity(repo.get_config_stack(), kind="COMMITTER")
        for _ in range(_ATTEMPTS):
            old = repo.refs.read_ref(ref)
            tree: Tree | None = None
            if old is not None:
                parent = store[ObjectID(old)]
                candidate = store[parent.tree] if isinstance(parent, Commit) else None
                tree = candidate if isinstance(candidate, Tree) else None
            if tree is None:
                tree = create_notes_tree(store)
            new_tree = NotesTree(tree, store).set_note(sha.encode("ascii"), text.encode("utf-8"))
            commit = Commit()
            commit.tree = new_tree.id
            commit.author = commit.committer = committer
            commit.commit_time = commit.author_time = int(time.time())
            commit.commit_timezone = commit.author_timezone = 0
            commit.encoding = b"UTF-8"
            commit.message = f"funes: link {sha[:12]}\n".encode()
            commit.parents = [ObjectID(old)] if old is not None else []
            store.add_object(commit)
            if old is None:
                moved = repo.refs.add_if_new(ref, commit.id)
            else:
                moved = repo.refs.set_if_equals(ref, ObjectID(old), commit.id)
            if moved:
                return str(commit.id.decode("ascii"))
        raise NoteWriteError(
            f"{NOTES_REF} kept moving while funes wrote the note on {sha[:12]}",
            hint=f"run `funes link {sha[:12]}` again",
        )
    finally:
        repo.close()
