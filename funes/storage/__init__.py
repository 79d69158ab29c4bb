"""Layer 1: the `.funes` repository on disk (objects, refs, locks, Lance tables)."""
