"""The old name of funes.agents.turnhook, kept because installed hooks call it by name.

The `agent-turn-end` script `funes add` installed before the module was renamed runs
`python -m funes.agents.hook <agent> <event> …`; this forwards it, so wired agents keep being
indexed until `funes add` rewrites the script. Nothing in funes imports this module.
"""

from __future__ import annotations

import sys

from funes.agents.turnhook import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
