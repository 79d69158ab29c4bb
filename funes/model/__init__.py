"""Layer 0: the data model. Standard library only; every other layer builds on it."""
