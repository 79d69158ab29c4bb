"""Redaction false positives (and the ingest text pipeline's throughput).

Run:
    python bench/redaction_fp.py                      # the real transcript fixtures
    python bench/redaction_fp.py --corpus DIR [DIR…]  # also every text file under DIR
    python bench/redaction_fp.py --code               # site-packages + the standard library
    python bench/redaction_fp.py --transcript-like    # SHAs, UUIDs, hashes, images, AWS tokens…
    python bench/redaction_fp.py --throughput [--scale 20]
    … --first-engine                                  # without Betterleaks (ingest runs both)
    … --json                                          # machine-readable

False positives. Every string value of every JSON line of ``../shared/fixtures/traces`` (and the
text files of any ``--corpus``) is judged as ingest judges it: every engine in order
(:func:`funes.ingest.engines.redact_texts`: funes's detectors and gitleaks, then Betterleaks).
The report gives findings per kind, and lists each one with its context and the secret masked
(first 4 characters and the length) so a person can review it. Reviewed findings are recorded in
``REVIEWED`` below, keyed by kind and a hash of the matched text (so no secret is written here);
the false-positive estimate counts reviewed false positives, plus every unreviewed finding as an
upper bound.

Throughput. The fixture transcripts are parsed into turns with the real parsers (falling back
to one text block per string if they are unavailable), replicated ``--scale`` times under new
session ids, and run through ``redact_turn`` and ``chunk_turn`` exactly as ingest does; CPU
time per chunk and chunks per second (one core) are reported, the word cache warm after a
first pass, as it is after the first few turns of any real run.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from funes.ingest import engines  # noqa: E402
from funes.ingest.redact import Finding, scan  # noqa: E402

TRACES = ROOT.parent / "shared" / "fixtures" / "traces"
TEXT_SUFFIXES = {".py", ".md", ".txt", ".rst", ".json", ".jsonl", ".yaml", ".yml", ".toml",
                 ".cfg", ".ini", ".sh", ".js", ".ts", ".go", ".rs", ".java", ".env"}

#: Manual review of findings: (kind, sha256(matched text)[:16]) -> (verdict, note).
#: "tp": a credential (real or an example written as one); "fp": not a credential.
#: The entries come from reviewing the 13 findings over this project's virtualenv and the
#: Python 3.11 standard library (80 MB of .py/.md/.json/... files, see SECURITY.md); the
#: transcript fixtures have no findings to review.
REVIEWED: dict[tuple[str, str], tuple[str, str]] = {}


def _review_key(kind: str, matched: str) -> tuple[str, str]:
    return kind, hashlib.sha256(matched.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _add_reviews(rows: list[tuple[str, str, str, str]]) -> None:
    for kind, digest, verdict, note in rows:
        REVIEWED[(kind, digest)] = (verdict, note)


_add_reviews(
    [
        # kind, sha256(matched)[:16], verdict, note
        ("url-password", "ffc9a6c1416c6489", "tp", "httpx docs: https://jo%40email.com:a%20secret@…"),
        ("url-password", "071ca22277547058", "fp", "fsspec URL syntax github://org:repo@sha"),
        ("generic-credential-uri", "ef4f8c6fad876c27", "fp",
         "pydantic docs: a multi-host URL's port list https://foo.com:123,foo.com:456@…"),
        ("password", "984ca5162200734c", "tp", "httpx docs: password=\"a secret\""),
        ("password", "0b14d501a594442a", "tp", "pydantic docs: password='password1'"),
        ("password", "5e6e45c8d3a5d85e", "tp", "pydantic docs: password='IAmSensitive'"),
        ("password", "1fec4e9dead2fb48", "tp", "urllib docs: passwd='geheim$parole'"),
        ("secret", "fde4fe76fd46eb8a", "tp", "pyarrow tests: secret_key='limited123'"),
        ("secret", "cdac0a6c84930371", "tp", "pyarrow tests: token = 'token1234'"),
    ]
)
# Reviewed after the gitleaks rules and the new syntaxes (issue #13): the code corpus is now
# this project's virtualenv site-packages plus the standard library's text files (97 MB).
_add_reviews(
    [
        ('password', '72879fba78af6373', 'tp', 'stdlib test_config.py: test credential'),
        ('netrc-password', 'ae00c331f17e2fa8', 'tp', 'stdlib test_netrc: test password'),
        ('netrc-password', '9a4043e2be0d7698', 'tp', 'stdlib test_netrc: test password'),
        ('netrc-password', '5fe02d78cb2478cb', 'tp', 'stdlib test_netrc: test password'),
        ('netrc-password', '84aa57d562f037ed', 'tp', 'stdlib test_netrc: test password'),
        ('password', '11a4a60b518bf249', 'tp', 'stdlib test_nntplib.py: test credential'),
        ('password', 'd04c2516ef4fe6d6', 'tp', 'stdlib test_smtplib.py: test credential'),
        ('password', '842643933c323aca', 'tp', 'stdlib test_ssl.py: test credential'),
        ('password', '4f630a1c0c7dd182', 'tp', 'stdlib test_ssl.py: test credential'),
        ('password', '9f094f11ab5c8d7f', 'tp', "urllib2 test: user, password = wile, coyote"),
        ('password', 'af0426e71dd57c0f', 'tp', 'stdlib test_urllib2_localnet.py: test credential'),
        ('password', 'a8a57dbc076774bf', 'tp', 'stdlib test_urllib2_localnet.py: test credential'),
        ('password', 'ecd71870d1963316', 'tp', 'stdlib test_urllib2_localnet.py: test credential'),
        ('password', '8b7df143d91c716e', 'tp', 'stdlib test_urllib2net.py: test credential'),
        ('url-password', '5de94d691ae3039a', 'tp', 'stdlib test_urllib2net.py: http://evil:thing@example.com'),
    ]
)
# Reviewed after the field's detectors (issue #28): --code, 96.1 MB (site-packages of this
# project's virtualenv + the standard library); the new detectors add no finding there.
_add_reviews(
    [
        ("password", "597e5db3932a94ec", "tp", "pydantic docs: password_bytes=b'IAmSensitive…'"),
        ("url-password", "51fb552dfad78676", "tp", "dotenvx docs in playwright: dotenv://:key_1234@…"),
    ]
)
# Reviewed after plain YAML and INI values became literals (issue #28): .pypirc examples.
_add_reviews(
    [
        ("password", "7e35aaaea6b83ab4", "tp", "distutils register docs: .pypirc password: sekrit"),
        ("password", "6116c09f89718e82", "tp", "distutils test_upload: a test .pypirc's password"),
        # `user, password = "wile", "coyote"`: the password now (the user was taken before)
        ("password", "4e629e9dbcc153d7", "tp", "urllib2 test: user, password = wile, coyote"),
    ]
)


def walk_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from walk_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from walk_strings(v)


def fixture_texts() -> Iterator[tuple[str, str]]:
    """(origin, text) for every string value of every fixture line."""
    for path in sorted(TRACES.rglob("*.jsonl")):
        rel = path.relative_to(TRACES)
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            for text in walk_strings(record):
                yield f"{rel}:{n}", text


def corpus_texts(roots: list[Path]) -> Iterator[tuple[str, str]]:
    """Every text file under each root; a `site-packages` inside a root is not walked (the
    standard library's directory holds the interpreter's own third-party packages)."""
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.suffix not in TEXT_SUFFIXES or not path.is_file():
                continue
            if "site-packages" in path.relative_to(root).parts:
                continue
            try:
                yield str(path), path.read_text("utf-8")
            except (OSError, UnicodeDecodeError):
                continue


def code_roots() -> list[Path]:
    """Third-party code funes did not write: the running interpreter's site-packages and its
    standard library."""
    import sysconfig

    paths = sysconfig.get_paths()
    return [Path(paths["purelib"]), Path(paths["stdlib"])]


def transcript_like(seed: int = 28, copies: int = 40) -> Iterator[tuple[str, str]]:
    """What tool output in transcripts is full of, none of it a credential.

    Generated (seeded) in the shapes real commands print: git logs, UUIDs, lockfile integrity
    hashes, base64 images, digests in test failures, AWS pagination and idempotency tokens,
    ARNs, checksum tables, man-page placeholders, container digests, pip hashes, pod names.
    """
    import base64
    import hashlib
    import random
    import uuid

    rng = random.Random(seed)

    def rb(n: int) -> bytes:
        return bytes(rng.randrange(256) for _ in range(n))

    def hx(n: int) -> str:
        return rb(n).hex()

    def b64(n: int) -> str:
        return base64.b64encode(rb(n)).decode()

    def word64(n: int) -> str:  # base64 without + and /: the alphabet of API object ids
        return b64(n).replace("+", "x").replace("/", "y")

    for k in range(copies):
        sha = [hashlib.sha1(rb(8)).hexdigest() for _ in range(6)]
        uid = [str(uuid.UUID(bytes=rb(16), version=4)) for _ in range(4)]
        texts = {
            "git-log": "\n".join(f"commit {h}\nAuthor: Dev <dev@example.com>\n\n    fix #{i}\n"
                                  for i, h in enumerate(sha))
            + f"\n{sha[0][:7]} Merge branch 'main'\n{sha[1][:12]} tests: more",
            "uuids": f"session {uid[0]} turn {uid[1]}\nrequest-id: {uid[2]}\n"
                     f'{{"traceId": "{uid[3]}", "ClientRequestToken": "{uid[0]}"}}',
            "lockfile": "\n".join(
                f'    "node_modules/pkg{i}": {{\n      "version": "1.{i}.0",\n      "resolved": '
                f'"https://registry.npmjs.org/pkg{i}/-/pkg{i}-1.{i}.0.tgz",\n      "integrity": '
                f'"sha512-{base64.b64encode(rb(64)).decode()}"\n    }},' for i in range(5)),
            "image": f"![chart](data:image/png;base64,{base64.b64encode(rb(600)).decode()})\n"
                     f'{{"type": "image", "source": {{"data": "{b64(900)}"}}}}',
            "test-output": f"E   AssertionError: assert '{hx(16)}' == '{hx(16)}'\n"
                           f"E     - {hashlib.sha256(rb(9)).hexdigest()}\n"
                           f"E     + {hashlib.sha256(rb(9)).hexdigest()}\n"
                           f"FAILED tests/test_hash.py::test_digest[{hx(4)}] - blake2b {hx(32)}",
            "aws": f'{{"NextToken": "{base64.b64encode(rb(96)).decode()}", '
                   f'"ClientToken": "{base64.urlsafe_b64encode(rb(24)).decode()}", '
                   f'"IdempotencyToken": "{uid[1]}",\n "Arn": "arn:aws:lambda:us-east-1:'
                   f'{rng.randrange(10**11, 10**12)}:function:deploy-{hx(4)}", '
                   f'"RoleArn": "arn:aws:iam::{rng.randrange(10**11, 10**12)}:role/svc-{hx(3)}", '
                   f'"ETag": "\\"{hx(16)}\\"", "VersionId": '
                   f'"{base64.urlsafe_b64encode(rb(24)).decode()}"}}\n'
                   f"aws s3api list-objects-v2 --bucket b --starting-token "
                   f"{base64.b64encode(rb(48)).decode()}",
            "digests": "\n".join(f"{hashlib.sha256(rb(5)).hexdigest()}  dist/pkg-{i}.tar.gz"
                                  for i in range(4))
            + "\n| file | sha256 |\n|---|---|\n"
            + "\n".join(f"| wheel{i}.whl | {hashlib.sha256(rb(5)).hexdigest()} |" for i in range(3))
            + f"\npkg==1.2.{k} --hash=sha256:{hashlib.sha256(rb(5)).hexdigest()}"
            + f"\nh1:{base64.b64encode(rb(32)).decode()}",
            "man-page": "SYNOPSIS\n  tool login [--token TOKEN] [--password PASSWORD] "
                        "[--api-key <API_KEY>]\n  export API_TOKEN=<your-token>\n"
                        "  curl -u USER:PASSWORD https://example.com\n"
                        "  password: ${DB_PASSWORD}\n  secret_key = os.environ['SECRET_KEY']",
            "containers": "image: registry.example.com/app@sha256:"
                          f"{hashlib.sha256(rb(5)).hexdigest()}\n"
                          f"web-{hx(5)}-{hx(3)[:5]}   1/1   Running   0   3d\n"
                          f"Digest: sha256:{hashlib.sha256(rb(5)).hexdigest()}\n"
                          f"container {hx(32)} exited",
            "ids": f"toolu_01{word64(18)} msg_01{word64(18)} req_011C{word64(15)}"
                   f"\nchatcmpl-{word64(21)}",
        }
        for name, text in texts.items():
            yield f"synthetic/{name}#{k}", text


#: Judge each text as ingest does (funes.ingest.engines: the first engine, then Betterleaks);
#: --first-engine measures funes's detectors and the gitleaks rules alone.
ALL_ENGINES = True


def mask(secret: str) -> str:
    return f"{secret[:4]}…({len(secret)} chars)"


def false_positives(texts: Iterator[tuple[str, str]], label: str) -> dict[str, Any]:
    chars = strings = 0
    per_kind: collections.Counter[str] = collections.Counter()
    listed: list[dict[str, str]] = []
    verdicts: collections.Counter[str] = collections.Counter()
    start = time.process_time()

    def judge(batch: list[tuple[str, str]]) -> None:
        found = (engines.redact_texts([t for _, t in batch]) if ALL_ENGINES
                 else [("", scan(t)) for _, t in batch])
        for (origin, text), (_out, findings) in zip(batch, found, strict=True):
            for f in findings:
                per_kind[f.kind] += 1
                listed.append(_describe(origin, text, f))
                verdicts[listed[-1]["verdict"]] += 1

    batch: list[tuple[str, str]] = []
    for origin, text in texts:
        strings += 1
        chars += len(text)
        batch.append((origin, text))
        if len(batch) >= 256:
            judge(batch)
            batch = []
    judge(batch)
    elapsed = time.process_time() - start
    mb = chars / 1e6
    fp_low = verdicts["fp"]
    fp_high = fp_low + verdicts["unreviewed"]
    return {
        "corpus": label,
        "strings": strings,
        "chars": chars,
        "scan_cpu_s": round(elapsed, 3),
        "scan_mb_per_s": round(mb / elapsed, 1) if elapsed else None,
        "findings": sum(per_kind.values()),
        "per_kind": dict(per_kind.most_common()),
        "reviewed_tp": verdicts["tp"],
        "reviewed_fp": fp_low,
        "unreviewed": verdicts["unreviewed"],
        "fp_per_mb": [round(fp_low / mb, 4), round(fp_high / mb, 4)] if mb else None,
        "listing": listed,
    }


def _describe(origin: str, text: str, f: Finding) -> dict[str, str]:
    matched = text[f.start : f.end]
    verdict, note = REVIEWED.get(_review_key(f.kind, matched), ("unreviewed", ""))
    return {
        "origin": origin,
        "kind": f.kind,
        "before": text[max(0, f.start - 50) : f.start],
        "secret": mask(matched),
        "after": text[f.end : f.end + 30],
        "review_key": _review_key(f.kind, matched)[1],
        "verdict": verdict,
        "note": note,
    }


def throughput(scale: int) -> dict[str, Any]:
    from funes.ingest.chunking import chunk_turn
    from funes.ingest.redact import redact_turn
    from funes.ingest.tokenizer import get_tokenizer
    from funes.model.turns import Block, Turn

    turns: list[Turn] = []
    source = "parsers"
    try:
        from funes.ingest.parsers import parse_file

        for path in sorted(TRACES.rglob("*.jsonl")):
            turns.extend(parse_file(path, None, final=True).turns)
    except Exception:  # the parsers are another module's: fall back rather than fail
        source = "string values"
        turns = [
            Turn("import", "s", f"t{i}", i, "", "user", (Block("text", text),))
            for i, (_, text) in enumerate(fixture_texts())
            if text.strip()
        ]
    corpus = [
        dataclasses.replace(t, session_id=f"{t.session_id}#{k}")
        for k in range(scale)
        for t in turns
    ]
    chars = sum(len(b.text) for t in corpus for b in t.blocks)
    get_tokenizer()
    for t in turns:  # warm the word cache once, as the first turns of a real run do
        chunk_turn(redact_turn(t)[0])

    start = time.process_time()
    redacted = [redact_turn(t)[0] for t in corpus]
    t_redact = time.process_time() - start
    start = time.process_time()
    n_chunks = sum(len(chunk_turn(t)) for t in redacted)
    t_chunk = time.process_time() - start
    total = t_redact + t_chunk
    return {
        "turns": len(corpus),
        "source": source,
        "scale": scale,
        "chars": chars,
        "chunks": n_chunks,
        "cpu_s": round(total, 3),
        "chunks_per_s_one_core": round(n_chunks / total),
        "us_per_chunk": round(total / n_chunks * 1e6, 1),
        "redact_us_per_chunk": round(t_redact / n_chunks * 1e6, 1),
        "tokenise_chunk_us_per_chunk": round(t_chunk / n_chunks * 1e6, 1),
        "mb_per_s": round(chars / 1e6 / total, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, nargs="*", default=[])
    parser.add_argument("--code", action="store_true",
                        help="also this interpreter's site-packages and standard library")
    parser.add_argument("--transcript-like", action="store_true",
                        help="also generated tool output: SHAs, UUIDs, integrity hashes, images…")
    parser.add_argument("--throughput", action="store_true")
    parser.add_argument("--scale", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--max-listed", type=int, default=20)
    parser.add_argument("--first-engine", action="store_true",
                        help="funes's detectors and gitleaks only (ingest runs Betterleaks too)")
    args = parser.parse_args()
    global ALL_ENGINES
    ALL_ENGINES = not args.first_engine

    reports = [false_positives(fixture_texts(), "fixtures/traces")]
    if args.transcript_like:
        reports.append(false_positives(transcript_like(), "transcript-like (generated)"))
    roots = list(args.corpus) + (code_roots() if args.code else [])
    if roots:
        reports.append(false_positives(corpus_texts(roots), " ".join(map(str, roots))))
    speed = throughput(args.scale) if args.throughput else None
    if args.json:
        print(json.dumps({"false_positives": reports, "throughput": speed}, indent=2))
        return
    for r in reports:
        print(f"== {r['corpus']}: {r['strings']} texts, {r['chars'] / 1e6:.2f} MB, "
              f"scanned at {r['scan_mb_per_s']} MB/s")
        print(f"   findings: {r['findings']} {r['per_kind']}")
        print(f"   reviewed: {r['reviewed_tp']} credentials, {r['reviewed_fp']} false positives, "
              f"{r['unreviewed']} unreviewed")
        if r["fp_per_mb"] is not None:
            low, high = r["fp_per_mb"]
            print(f"   false positives per MB: {low} (reviewed) to {high} (unreviewed counted)")
        for item in r["listing"][: args.max_listed]:
            print(f"   [{item['verdict']}] {item['kind']:<18} {item['origin']}  "
                  f"{item['before']!r} <<{item['secret']}>> {item['after']!r}  "
                  f"key={item['review_key']} {item['note']}")
    if speed:
        print(f"== throughput ({speed['source']}, x{speed['scale']}): {speed['turns']} turns, "
              f"{speed['chars'] / 1e6:.1f} MB -> {speed['chunks']} chunks in {speed['cpu_s']} s "
              f"CPU: {speed['chunks_per_s_one_core']} chunks/s on one core, "
              f"{speed['us_per_chunk']} us/chunk (redaction {speed['redact_us_per_chunk']}, "
              f"tokenise + chunk {speed['tokenise_chunk_us_per_chunk']}), {speed['mb_per_s']} MB/s")


if __name__ == "__main__":
    main()
