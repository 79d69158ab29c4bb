"""The old name of funes.gitlink.hookrun, kept because installed hooks call it by name.

Git hook scripts written by `funes hooks install` before the module was renamed run
`python -m funes.gitlink.hook post-commit|pre-push`; this forwards them, so those hooks keep
working until `funes hooks install` rewrites them. Nothing in funes imports this module.
"""

from __future__ import annotations

import sys

from funes.gitlink.hookrun import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
