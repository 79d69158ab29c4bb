"""CLI fixtures live in tests/conftest.py (shared with other suites)."""
