"""One module per verb family; each exposes COMMANDS, loaded on use by funes.cli.app."""
