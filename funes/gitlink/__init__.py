"""Git integration: commit links between code commits and the agent turns behind them.

- `coderepo`: the code repository (found from a directory, worktrees included) read with
  dulwich: revisions, commit details, changed paths, blame.
- `links`: which turns a code commit gets, recording the link, and finding links again.
- `notes`: the `refs/notes/funes` note on each linked code commit.
- `hookinstall`: installing, chaining and removing the git hook scripts
  (`funes/hooks/git-*`).
- `hookrun`: what those scripts run. It imports only the standard library, so a hook adds
  milliseconds to `git commit`; the real work runs in a detached `funes link` process.
  (`hook` forwards to it: the name scripts installed by earlier versions call.)

Nothing here imports dulwich at module level: `funes --help` and the hooks start without it.
"""
