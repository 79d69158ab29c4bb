"""Seeded secrets and the leak test shared by the detector tests (the bench's same rule)."""

from __future__ import annotations

import random
import string

ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"
WINDOW = 16


def rnd(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def leaked(secret: str, out: str) -> bool:
    """The secret, or a 16-character piece of it, is still in `out`."""
    if len(secret) < WINDOW:
        return secret in out
    return any(secret[i : i + WINDOW] in out for i in range(len(secret) - WINDOW + 1))
