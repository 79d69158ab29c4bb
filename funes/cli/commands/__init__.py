"""One module per verb family; each exposes COMMANDS for funes.cli.main to register."""
