"""Remotes: where memories are pushed to and fetched from (docs/design.md §9, docs/format.md).

`base` defines the protocol and URL forms, `local` the directory remote (the reference
implementation), `hf` the Hugging Face Hub dataset remote, and `sync` push and fetch over
either. Merging what was fetched happens in the storage layer (funes.storage.transfer).
"""
