"""`python -m funes` runs the CLI."""

from funes.cli.main import main

main()
