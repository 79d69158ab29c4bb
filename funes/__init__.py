"""funes: a git-style, distributed memory for coding agents.

The package root stays import-light on purpose: `funes --help` and the agent hooks start from
here, so nothing heavy (lance, llama_cpp, huggingface_hub) may be imported at module level.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
