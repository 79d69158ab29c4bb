"""Layer 6: the `funes` command line (click). Commands parse, call funes.api once, render."""
