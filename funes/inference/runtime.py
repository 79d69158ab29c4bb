"""The llama.cpp runtime the embedder and the reranker share: one model, one context.

Why the low-level API rather than `llama_cpp.Llama.embed()`: `embed()` truncates by cutting the
token list (dropping the final [SEP]), does not normalise by default, packs several sequences
into one decode (slower for BERT: attention then spans the whole batch) and does not stop the
inputs that abort the process. Here funes owns every step:

1. clean the text (lone surrogates → U+FFFD, NUL removed) so it always encodes as UTF-8;
2. do the parts of BERT's normaliser that llama.cpp gets wrong (control/format characters,
   accent stripping; see `Runtime.prepare`);
3. tokenise with the model's own tokenizer (llama.cpp's, so ids match what the model was
   converted with), never parsing special-token text: a transcript that quotes "[SEP]" is
   content, and content must not forge structure;
4. apply WordPiece's per-word cap (a word longer than 100 characters is one [UNK], as in the
   reference tokenizer; llama.cpp skips this rule);
5. truncate so that the framed input fits the model's cap, the closing special kept last;
6. decode one sequence per call (measured fastest for BERT on CPU) and read the pooled output.

llama.cpp aborts the process (a C `abort`, not an exception) on more tokens than the context or
the micro-batch holds, or on a context size that is not a multiple of 256; the checks here make
both impossible. What to feed and what to do with the output (normalise a vector, frame a
query–passage pair) is the embedder's and the reranker's business.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import os
import re
import sys
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from funes.inference.errors import ModelError, ModelLoadError

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["CONTEXT_QUANTUM", "Runtime", "clean_text", "default_threads", "threads_now"]

#: llama.cpp requires n_ctx and n_ubatch to be multiples of this (otherwise it aborts).
CONTEXT_QUANTUM = 256
#: Never give a model more positions than this without it saying it has them.
_HARD_MAX_TOKENS = 8192
_LLAMA_VOCAB_TYPE_WPM = 3
_POOLING = {"none": 0, "mean": 1, "cls": 2, "last": 3, "rank": 4}
_SURROGATES = re.compile("[\ud800-\udfff]")
_STRIP_ACCENTS_KEY = "tokenizer.ggml.normalizer.strip_accents"
#: Unicode categories BERT's normaliser deletes (measured against the reference tokenizer;
#: unassigned code points, Cn, are kept).
_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Co"})
_BREAKS = frozenset(" \t\n\r")
_ASCII_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
#: "1-min 5-min 15-min running/total last-pid": the running count is what `threads_now` reads.
_LOADAVG = "/proc/loadavg"
_BACKEND_LOCK = threading.Lock()
_BACKEND_READY = False
#: llama.cpp messages that report nothing wrong yet come at ERROR level on every load of a
#: SentencePiece Unigram model (its newline-token probe tokenises "\n", which the model's
#: normaliser turns into nothing).
_BENIGN_LOG = (b"model vocab missing newline token",)
_LOG_CALLBACK: Any = None  # kept referenced: llama.cpp holds only a C pointer to it
_MADV_DONTNEED = 4  # Linux
_MADVISE: list[Any] = []


def _madvise() -> Any:
    """The C library's madvise on Linux (None elsewhere: the pages then simply stay)."""
    if not _MADVISE:
        fn = None
        if sys.platform.startswith("linux"):
            try:
                fn = ctypes.CDLL(None, use_errno=True).madvise
                fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
                fn.restype = ctypes.c_int
            except (OSError, AttributeError):  # pragma: no cover - a libc without it
                fn = None
        _MADVISE.append(fn)
    return _MADVISE[0]


def default_threads() -> int:
    """Threads for llama.cpp: the CPUs this process may run on (cgroup/affinity aware)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def threads_now(limit: int) -> int:
    """Threads worth giving llama.cpp for the next decode: the CPUs other processes leave free.

    llama.cpp's threads meet at a barrier after every operation, so when one of them shares
    its core with another busy process all of them wait for it, a scheduler slice at a time:
    with the other core of 2 busy, 2 threads reranked 4 passages 7× slower than 1 thread did
    (bench/results/fast-path.md). /proc/loadavg counts the tasks on a CPU right now; this
    process's own (this thread, llama.cpp's workers still spinning after the last decode)
    are not others. `limit` stays the most ever used.
    """
    try:
        with open(_LOADAVG, "rb") as fh:
            running = int(fh.read().split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return limit
    others = max(0, running - _running_here())
    return max(1, min(limit, default_threads() - others))


def _running_here() -> int:
    """Threads of this process on a CPU now (state R in /proc/self/task/*/stat)."""
    count = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 1
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue  # the thread ended meanwhile
        count += stat[stat.rfind(b")") + 2:][:1] == b"R"
    return max(1, count)


def clean_text(text: str) -> str:
    """Text that always encodes as UTF-8 and means what the reference tokenizer sees.

    Lone surrogates (from lenient JSON decoders) become U+FFFD and NULs are removed; both
    tokenizers drop U+FFFD and NUL anyway, so this changes no token, it only makes the bytes
    valid.

    Raises:
        TypeError: `text` is not a str (bytes must be decoded by the caller, who knows how).
    """
    if not isinstance(text, str):
        raise TypeError(f"expected str, got {type(text).__name__}")
    if "\x00" in text:
        text = text.replace("\x00", "")
    return _SURROGATES.sub("\ufffd", text)


def _round_up(n: int, quantum: int) -> int:
    return max(quantum, -(-n // quantum) * quantum)


def _import_llama() -> Any:
    """Import llama_cpp once, quietly, with its backend initialised."""
    global _BACKEND_READY
    try:
        import llama_cpp
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ModelLoadError("llama_cpp", f"llama-cpp-python is not importable ({exc})") from exc
    with _BACKEND_LOCK:
        if not _BACKEND_READY:
            # llama-cpp-python routes llama.cpp's log through this logger; INFO would print
            # every tensor on load to stderr, which agents' hooks must not see.
            logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)
            _quiet_benign_logs(llama_cpp)
            llama_cpp.llama_backend_init()
            _BACKEND_READY = True
    return llama_cpp


def _quiet_benign_logs(llama_cpp: Any) -> None:
    """Print llama.cpp's errors to stderr as llama-cpp-python does, minus `_BENIGN_LOG`."""
    global _LOG_CALLBACK

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
    def callback(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        # ggml levels: 0 none, 1 info, 2 warn, 3 error, 4 debug, 5 continuation.
        if level in (0, 3) and text and not any(m in text for m in _BENIGN_LOG):
            sys.stderr.write(text.decode("utf-8", "replace"))
            sys.stderr.flush()

    _LOG_CALLBACK = callback
    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))


def _is_split_char(ch: str) -> bool:
    """Characters BERT's pre-tokenizer makes a word of their own (punctuation, CJK)."""
    code = ord(ch)
    if (33 <= code <= 47) or (58 <= code <= 64) or (91 <= code <= 96) or (123 <= code <= 126):
        return True
    if unicodedata.category(ch).startswith("P"):
        return True
    return (
        0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
        or 0x20000 <= code <= 0x2A6DF
        or 0x2A700 <= code <= 0x2CEAF
        or 0xF900 <= code <= 0xFAFF
        or 0x2F800 <= code <= 0x2FA1F
    )


def _normalized_len(word: str, lowercase: bool, strip_accents: bool) -> int:
    """Length of a word after BERT's normaliser (control chars gone, accents stripped)."""
    out = word
    if strip_accents:
        out = "".join(
            c for c in unicodedata.normalize("NFD", out) if unicodedata.category(c) != "Mn"
        )
    out = "".join(
        c for c in out if c in "\t\n\r" or unicodedata.category(c) not in _DROPPED_CATEGORIES
    )
    if lowercase:
        out = out.lower()
    return len(out)


@dataclass(frozen=True)
class _TokenizerRules:
    wordpiece: bool
    max_word_chars: int
    lowercase: bool
    strip_accents: bool


class Runtime:
    """One llama.cpp model and context with a reusable single-sequence batch.

    Shared by the embedder and the reranker. Not thread-safe by itself: callers hold `lock`
    around tokenisation and decoding (a llama context is single-threaded state).
    """

    def __init__(self, path: Path, *, kind: str, max_tokens: int | None, n_threads: int) -> None:
        """Load `path` and size a context for `kind` ("embed" or "rerank") inputs.

        The context is as small as the model's token cap allows, rounded up to a multiple of
        256: llama.cpp aborts on other sizes, and memory grows with the context.
        """
        if not path.is_file():
            raise ModelLoadError(str(path), "no such file")
        llama_cpp = _import_llama()
        self.llama = llama_cpp
        self.lock = threading.RLock()
        self.path = path
        mparams = llama_cpp.llama_model_default_params()
        # llama.cpp's accent stripping drops every combining mark (Mn, Mc, Me) and does not
        # decompose Hangul, while BERT's reference drops only Mn after a full NFD. So funes
        # strips accents itself (see `Runtime.prepare`) and turns llama.cpp's off; the file
        # is not changed, so the GGUF still works as a plain llama.cpp model.
        overrides = (llama_cpp.llama_model_kv_override * 2)()
        overrides[0].key = _STRIP_ACCENTS_KEY.encode()
        overrides[0].tag = llama_cpp.LLAMA_KV_OVERRIDE_TYPE_BOOL
        overrides[0].value.val_bool = False
        overrides[1].key = b"\0"
        mparams.kv_overrides = overrides
        model = llama_cpp.llama_model_load_from_file(os.fsencode(path), mparams)
        if not model:
            raise ModelLoadError(str(path), "llama.cpp could not read it as a GGUF model")
        self._model = model
        self._ctx: Any = None
        try:
            self._setup(kind, max_tokens, n_threads)
        except BaseException:
            if self._ctx is None:
                llama_cpp.llama_model_free(model)
            else:
                self.close()
            raise

    def _setup(self, kind: str, max_tokens: int | None, n_threads: int) -> None:
        llama_cpp = self.llama
        model = self._model
        self.metadata = self._read_metadata()
        meta = self.metadata
        arch = meta.get("general.architecture", "")
        pooling = {"0": "none", "1": "mean", "2": "cls", "3": "last", "4": "rank"}.get(
            meta.get(f"{arch}.pooling_type", "1"), "none"
        )
        if kind == "rerank" and pooling != "rank":
            raise ModelLoadError(str(self.path), "not a reranker (pooling type is not RANK)")
        if kind == "embed" and (
            pooling not in ("mean", "cls", "last") or meta.get("funes.kind") == "rerank"
        ):
            raise ModelLoadError(str(self.path), "not an embedding model (no mean/cls pooling)")
        self.pooling = pooling
        self.n_ctx_train = int(llama_cpp.llama_model_n_ctx_train(model))
        model_cap = int(meta.get("funes.max_tokens", self.n_ctx_train))
        cap = min(max_tokens or model_cap, model_cap, self.n_ctx_train, _HARD_MAX_TOKENS)
        if cap < 8:
            raise ValueError(f"max_tokens {cap} is too small to hold any text")
        n_ctx = _round_up(cap, CONTEXT_QUANTUM)
        if n_ctx % CONTEXT_QUANTUM:  # pragma: no cover - _round_up guarantees it
            raise ValueError(f"n_ctx must be a multiple of {CONTEXT_QUANTUM}")
        #: Most tokens one input may have, specials included.
        self.max_tokens = cap
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = n_ctx
        cparams.n_batch = n_ctx
        cparams.n_ubatch = n_ctx
        cparams.n_seq_max = 1
        cparams.n_threads = n_threads
        cparams.n_threads_batch = n_threads
        cparams.embeddings = True
        cparams.pooling_type = _POOLING[pooling]
        cparams.no_perf = True
        ctx = llama_cpp.llama_init_from_model(model, cparams)
        if not ctx:
            raise ModelLoadError(str(self.path), "llama.cpp could not create a context")
        self._ctx = ctx
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self._threads = n_threads  # what the context decodes with now (`threads_now`)
        self.vocab = llama_cpp.llama_model_get_vocab(model)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self.vocab))
        self.n_embd = int(llama_cpp.llama_model_n_embd(model))
        self.n_cls_out = int(llama_cpp.llama_model_n_cls_out(model))
        self._batch = llama_cpp.llama_batch_init(n_ctx, 0, 1)
        # Positions, sequence ids and output flags never change between calls: one sequence,
        # positions 0..n-1, every token an output (llama.cpp requires that for embeddings).
        for i in range(n_ctx):
            self._batch.pos[i] = i
            self._batch.n_seq_id[i] = 1
            self._batch.seq_id[i][0] = 0
            self._batch.logits[i] = 1
        self._memory = llama_cpp.llama_get_memory(ctx)
        self._tok_buf = (llama_cpp.llama_token * 4096)()
        wpm = int(llama_cpp.llama_vocab_type(self.vocab)) == _LLAMA_VOCAB_TYPE_WPM
        lower = meta.get("tokenizer.ggml.normalizer.lowercase", "true") == "true"
        self.rules = _TokenizerRules(
            wordpiece=wpm,
            max_word_chars=int(meta.get("funes.wordpiece_max_word_chars", "100")),
            lowercase=lower,
            strip_accents=meta.get(
                "tokenizer.ggml.normalizer.strip_accents", "true" if lower else "false"
            )
            == "true",
        )
        self.unk = int(meta.get("tokenizer.ggml.unknown_token_id", "100"))
        self.prefix, self.suffix = self._special_frame()

    # -- metadata and specials ------------------------------------------------------------

    def _read_metadata(self) -> dict[str, str]:
        llama_cpp = self.llama
        out: dict[str, str] = {}
        buf = ctypes.create_string_buffer(1024)
        n = int(llama_cpp.llama_model_meta_count(self._model))
        for i in range(n):
            k = llama_cpp.llama_model_meta_key_by_index(self._model, i, buf, len(buf))
            if k < 0:
                continue
            key = buf.value.decode("utf-8", "replace")
            v = llama_cpp.llama_model_meta_val_str_by_index(self._model, i, buf, len(buf))
            if v < 0:
                continue
            out[key] = buf.value.decode("utf-8", "replace")
        return out

    def _special_frame(self) -> tuple[list[int], list[int]]:
        """The special tokens llama.cpp puts around a text, split into before and after."""
        llama_cpp = self.llama
        vocab = self.vocab
        if self.rules.wordpiece:
            cls, sep = int(llama_cpp.llama_vocab_bos(vocab)), int(llama_cpp.llama_vocab_sep(vocab))
            if cls < 0 or sep < 0:
                raise ModelLoadError(str(self.path), "WordPiece vocabulary without [CLS]/[SEP]")
            return [cls], [sep]
        prefix: list[int] = []
        suffix: list[int] = []
        if llama_cpp.llama_vocab_get_add_bos(vocab):
            prefix.append(int(llama_cpp.llama_vocab_bos(vocab)))
        if llama_cpp.llama_vocab_get_add_eos(vocab):
            suffix.append(int(llama_cpp.llama_vocab_eos(vocab)))
        return [t for t in prefix if t >= 0], [t for t in suffix if t >= 0]

    # -- tokenisation ---------------------------------------------------------------------

    def _tokenize_raw(self, text: str) -> list[int]:
        """llama.cpp's tokens for already-clean text, no specials, special text not parsed."""
        if not text:
            return []
        data = text.encode("utf-8")
        llama_cpp = self.llama
        buf = self._tok_buf
        n = int(llama_cpp.llama_tokenize(self.vocab, data, len(data), buf, len(buf), False, False))
        if n < 0:
            buf = (llama_cpp.llama_token * (-n))()
            n = int(
                llama_cpp.llama_tokenize(self.vocab, data, len(data), buf, len(buf), False, False)
            )
            if n < 0:  # pragma: no cover - llama.cpp contract
                raise ModelError("llama.cpp could not tokenize the text")
        return list(buf[:n])

    def _overlong_words(self, text: str) -> list[tuple[int, int]]:
        """Spans of words WordPiece would turn into a single [UNK] (too many characters)."""
        limit = self.rules.max_word_chars
        spans: list[tuple[int, int]] = []
        for match in re.finditer(rf"\S{{{limit + 1},}}", text):
            run, base = match.group(), match.start()
            start: int | None = None
            for j in range(len(run) + 1):
                if j == len(run) or _is_split_char(run[j]):
                    if start is not None and j - start > limit:
                        word = run[start:j]
                        if (
                            _normalized_len(word, self.rules.lowercase, self.rules.strip_accents)
                            > limit
                        ):
                            spans.append((base + start, base + j))
                    start = None
                elif start is None:
                    start = j
        return spans

    def prepare(self, text: str) -> str:
        """`clean_text`, then BERT's normaliser steps that llama.cpp gets wrong.

        BERT's reference drops control, format and private-use characters (Cc, Cf, Co; tab,
        CR and LF count as spaces; llama.cpp treats some of them as whitespace, splitting
        words that BERT joins, and keeps others), and strips
        accents by a full NFD followed by dropping nonspacing marks (Mn). llama.cpp's own
        stripping also drops Mc/Me marks, which BERT keeps, and cannot decompose Hangul, so it
        is switched off at load and done here instead.
        """
        text = clean_text(text)
        if not self.rules.wordpiece:
            return text
        if text.isascii():
            return _ASCII_CONTROLS.sub("", text)
        if self.rules.strip_accents:
            text = unicodedata.normalize("NFD", text)
        strip = self.rules.strip_accents
        return "".join(
            c
            for c in text
            if not (
                (strip and unicodedata.category(c) == "Mn")
                or (unicodedata.category(c) in _DROPPED_CATEGORIES and c not in "\t\n\r")
            )
        )

    def tokenize(self, text: str) -> list[int]:
        """The model's token ids for `text`, without [CLS]/[SEP], exactly as the reference.

        Words WordPiece caps become `[UNK]`: the text is split at them (their neighbours are
        whitespace or punctuation, so tokenising the pieces apart changes nothing else).
        """
        text = self.prepare(text)
        if not self.rules.wordpiece:
            return self._tokenize_raw(text)
        spans = self._overlong_words(text)
        if not spans:
            return self._tokenize_raw(text)
        unk = self.unk
        out: list[int] = []
        pos = 0
        for begin, end in spans:
            out.extend(self._tokenize_raw(text[pos:begin]))
            out.append(unk)
            pos = end
        out.extend(self._tokenize_raw(text[pos:]))
        return out

    def tokenize_head(self, text: str, limit: int) -> list[int]:
        """The first `limit` tokens of `text`, without tokenising all of a huge text.

        Tokenises a prefix that ends at whitespace (so no word is cut and the prefix's tokens
        are the text's first tokens), doubling it until it yields enough tokens.
        """
        text = clean_text(text)
        budget = max(4096, limit * 16)
        while True:
            if budget >= len(text):
                return self.tokenize(text)[:limit]
            # Cut only at characters every tokenizer treats as a word break (Python's
            # isspace() also accepts \x1c-\x1f, which BERT deletes, joining words).
            cut = budget
            while cut < len(text) and text[cut] not in _BREAKS:
                cut += 1
                if cut - budget > 4096:  # one enormous word: look further back instead
                    cut = budget
                    while cut > 0 and text[cut - 1] not in _BREAKS:
                        cut -= 1
                    break
            if cut <= 0:
                budget *= 2
                continue
            tokens = self.tokenize(text[:cut])
            if len(tokens) >= limit:
                return tokens[:limit]
            budget *= 2

    # -- decoding -------------------------------------------------------------------------

    def run(self, ids: Sequence[int]) -> npt.NDArray[np.float32]:
        """Decode one sequence and return its pooled output (a copy, float32)."""
        n = len(ids)
        if not 0 < n <= self.n_ctx:
            raise ModelError(f"{n} tokens do not fit a context of {self.n_ctx}")
        arr = np.asarray(ids, dtype=np.int32)
        if int(arr.min()) < 0 or int(arr.max()) >= self.n_vocab:
            raise ModelError("token id outside the vocabulary")
        llama_cpp = self.llama
        ctypes.memmove(self._batch.token, arr.ctypes.data, n * 4)
        self._batch.n_tokens = n
        if self._memory:
            llama_cpp.llama_memory_clear(self._memory, True)
        threads = threads_now(self.n_threads)
        if threads != self._threads:
            llama_cpp.llama_set_n_threads(self._ctx, threads, threads)
            self._threads = threads
        rc = int(llama_cpp.llama_decode(self._ctx, self._batch))
        if rc != 0:
            raise ModelError(f"llama.cpp failed to evaluate the input (llama_decode {rc})")
        width = self.n_cls_out if self.pooling == "rank" else self.n_embd
        ptr = llama_cpp.llama_get_embeddings_seq(self._ctx, 0)
        if not ptr:
            raise ModelError("llama.cpp returned no pooled output")
        out = np.ctypeslib.as_array(ptr, shape=(width,)).astype(np.float32, copy=True)
        self._release_logits(n)
        return out

    def _release_logits(self, n_outputs: int) -> None:
        """Give back the pages of llama.cpp's logits buffer, which a pooled model never uses.

        llama.cpp reserves `n_vocab` floats of logits for every output token even when it
        computes pooled embeddings (and then every token is an output), and the pages are
        resident once the buffer has grown: 0.95 MB a token for multilingual-e5's 250,037
        pieces, 488 MB at its 512-token cap (measured), 0.12 MB a token for MiniLM. Nothing
        reads them, so the pages wholly inside the first `n_outputs` rows, which the buffer
        must hold, go back to the OS (MADV_DONTNEED: they read as zeros if touched again).
        """
        madvise = _madvise()
        if madvise is None:
            return
        base = ctypes.cast(self.llama.llama_get_logits(self._ctx), ctypes.c_void_p).value
        if not base:
            return
        start = -(-base // mmap.PAGESIZE) * mmap.PAGESIZE
        end = (base + self.n_vocab * n_outputs * 4) // mmap.PAGESIZE * mmap.PAGESIZE
        if end - start >= 16 * mmap.PAGESIZE:
            madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), _MADV_DONTNEED)

    def close(self) -> None:
        """Free the context and model (the process-wide cache normally keeps them)."""
        llama_cpp = self.llama
        with self.lock:
            if self._ctx is not None:
                if hasattr(self, "_batch"):
                    llama_cpp.llama_batch_free(self._batch)
                llama_cpp.llama_free(self._ctx)
                llama_cpp.llama_model_free(self._model)
                self._ctx = None
