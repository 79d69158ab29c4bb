"""`funes ui`: a local web page where a person sees their memory (docs/ui.md).

Sits between the library (funes.api, the only layer it reads) and the CLI: `funes ui` makes
one call here (`serve_ui`).
"""
