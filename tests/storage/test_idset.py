"""The compact id set behind the trust marks answers exactly like a frozenset of the ids."""

from __future__ import annotations

import hashlib
import json

import pytest

from funes.storage.idset import IdSet


def ids(n: int, salt: str = "") -> list[str]:
    return [hashlib.sha256(f"{salt}{i}".encode()).hexdigest() for i in range(n)]


def test_membership_len_and_iteration_match_a_frozenset() -> None:
    some = ids(5000)
    compact, plain = IdSet(some), frozenset(some)
    assert len(compact) == len(plain) == 5000
    assert set(compact) == plain and compact == plain and plain == compact
    assert all(i in compact for i in some)
    assert not any(i in compact for i in ids(2000, salt="other"))
    assert IdSet() == frozenset() and not IdSet() and len(IdSet(some + some)) == 5000


def test_ids_that_are_not_canonical_are_kept_as_themselves() -> None:
    canonical = ids(3)
    odd = ["f" * 63, canonical[0].upper(), "zz" * 32, "", " ".join([canonical[1][:2]] * 32)]
    compact = IdSet([*canonical, *odd])
    assert compact == frozenset([*canonical, *odd])
    for text in odd:
        assert text in compact
    assert canonical[1].upper() not in compact  # the digest's own id only, in its one spelling
    assert canonical[1][:2] * 32 not in compact
    assert 42 not in compact


def test_a_needle_straddling_two_neighbours_is_not_a_member() -> None:
    # Two digests side by side in one bucket, and a string made of the end of the first and
    # the start of the second, in that bucket too: bytes.find sees it, the set must not.
    first = bytes.fromhex("1234" + "00" * 14 + "1235" + "00" * 14)
    second = bytes.fromhex("1236" + "11" * 15 + "22" * 15)
    straddle = (first[16:] + second[:16]).hex()
    compact = IdSet([first.hex(), second.hex()])
    assert first.hex() in compact and second.hex() in compact
    assert straddle not in compact


def test_union_and_difference_give_the_sets_a_rebuild_gives() -> None:
    base, more = ids(3000), ids(500, salt="more")
    compact = IdSet(base)
    grown = compact.union([*more, *base[:10], "odd"])
    assert grown == frozenset([*base, *more, "odd"]) == IdSet([*base, *more, "odd"])
    assert all(i in grown for i in more)
    shrunk = grown.difference([*more[:100], *base[:100], "odd", "never there"])
    assert shrunk == frozenset([*base[100:], *more[100:]])
    assert not any(i in shrunk for i in [*more[:100], *base[:100], "odd"])
    assert compact.union(base[:5]) is compact and compact.difference(more) is compact


def test_dump_and_load_round_trip_through_json() -> None:
    compact = IdSet([*ids(1000), "odd"])
    loaded = IdSet.load(json.loads(json.dumps(compact.dump())))
    assert loaded == compact and loaded is not None and "odd" in loaded
    assert all(i in loaded for i in ids(1000))


@pytest.mark.parametrize("damaged", [
    None, [], {"digests": "abc", "other": []}, {"digests": "zz" * 32, "other": []},
    {"digests": "", "other": [1]}, {"other": []},
])
def test_a_damaged_stored_form_reads_as_none(damaged: object) -> None:
    assert IdSet.load(damaged) is None
