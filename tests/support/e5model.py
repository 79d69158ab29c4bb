"""A tiny model in intfloat/multilingual-e5-small's layout, made here: seeded BERT weights and
a SentencePiece Unigram tokenizer trained locally on multilingual text written for the project.

multilingual-e5-small's weights (471 MB) cannot be downloaded here, so its path through funes
(convert → llama.cpp's UGM tokenizer → mean pooling → install from the Hub → reindex) is
exercised with a model of its kind: `BertModel` + an XLM-R-shaped `tokenizer.json` (Unigram
pieces with log-probability scores; `<s>`, `<pad>`, `</s>`, `<unk>` first and `<mask>` last;
the normaliser `Precompiled` + `Replace(" {2,}", " ")`; a `Metaspace` pre-tokenizer; `<s> $A
</s>` framing), and a word-embedding matrix with more rows than pieces (e5's 250,037 rows
for 250,002 pieces). The Unigram model is trained with the `tokenizers` package; the
precompiled charsmap is SentencePiece's own `nmt_nfkc` rule (the one XLM-R's tokenizer
uses), taken from a model the `sentencepiece` package trains in memory, because only
SentencePiece can compile one. Both packages are test dependencies.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from tests.support.synthetic import write_safetensors

__all__ = ["CORPUS", "E5_SHAPE", "build", "nmt_nfkc_charsmap", "reference_tokenizer",
           "write_weights"]

#: Layers, width, heads, feed-forward width of the synthetic model (e5-small: 12, 384, 12,
#: 1536). Its width, heads and 512 positions are e5's, so its vectors share a table with
#: MiniLM's (a reindex keeps the width) and a Rust-funes memory's 384-d column fits; two
#: layers and a narrower feed-forward keep a forward pass at milliseconds.
E5_SHAPE = {"num_hidden_layers": 2, "hidden_size": 384, "num_attention_heads": 12,
            "intermediate_size": 512, "max_position_embeddings": 512}
#: Seed of the weights (the numpy reference forward pass reads the same file).
SEED = 20260905
#: Rows past the tokenizer's pieces, like e5's 35.
EXTRA_ROWS = 5
VOCAB_SIZE = 700

#: Written for these tests: each language's own script, accents and punctuation, a little
#: code, so the trained pieces cover what transcripts hold.
CORPUS: tuple[str, ...] = (
    "We decided to keep the parser streaming, because the files are large.",
    "The cache uses sqlite: one file, no server, and it survives a crash.",
    "Please run the tests again after the merge; two of them failed on CI.",
    "The embedding backlog is drained newest first, in bounded commits.",
    "Why did we drop the streaming parser? It leaked memory on long sessions.",
    "git rebase -i HEAD~3 then squash the fixups into the first commit",
    "def load(path: str) -> dict: return json.loads(open(path).read())",
    "我们决定继续使用流式解析器，因为文件很大。",
    "缓存使用 sqlite：一个文件，不需要服务器，崩溃后也能恢复。",
    "请在合并之后再运行一次测试，有两个在持续集成上失败了。",
    "为什么我们放弃了流式解析器？它在长会话中泄漏内存。",
    "向量索引按时间从新到旧填充，每次提交的数量有上限。",
    "数据库迁移失败了，需要回滚到上一个版本。",
    "ストリーミングパーサーを使い続けることにしました。ファイルが大きいからです。",
    "キャッシュは sqlite を使います。ファイルひとつで、サーバーは要りません。",
    "マージの後でもう一度テストを実行してください。二つが失敗しました。",
    "なぜストリーミングパーサーをやめたのですか？長いセッションでメモリが漏れました。",
    "東京の会議は来週の火曜日に延期されました。",
    "ログイン画面がサインインの後でループします。",
    "Nous avons décidé de garder l'analyseur en flux, car les fichiers sont énormes.",
    "Le cache utilise sqlite : un seul fichier, aucun serveur, et il résiste à une panne.",
    "Wir haben beschlossen, den Parser beizubehalten; die Dateien sind sehr groß.",
    "Die Größe der Datei überschreitet das Limit für Übertragungen.",
    "Decidimos mantener el analizador en streaming porque los archivos son enormes.",
    "¿Por qué abandonamos el analizador? Perdía memoria en sesiones largas.",
    "A migração do banco de dados falhou; é preciso voltar à versão anterior.",
    "Chúng tôi quyết định giữ trình phân tích cú pháp vì tệp rất lớn.",
    "Ο διακομιστής επανεκκινήθηκε μετά την ενημέρωση του πυρήνα.",
    "Мы решили оставить потоковый парсер, потому что файлы большие.",
)


def nmt_nfkc_charsmap() -> bytes:
    """SentencePiece's compiled `nmt_nfkc` normaliser, from a model trained in memory."""
    import sentencepiece as spm

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS * 4), model_writer=buf, vocab_size=400,
        model_type="unigram", normalization_rule_name="nmt_nfkc", hard_vocab_limit=False,
        minloglevel=2,
    )
    spec = _field(buf.getvalue(), 3)  # ModelProto.normalizer_spec
    charsmap = _field(spec, 2)  # NormalizerSpec.precompiled_charsmap
    if len(charsmap) < 1024:
        raise RuntimeError("sentencepiece produced no precompiled charsmap")
    return charsmap


def _field(message: bytes, number: int) -> bytes:
    """The first length-delimited field `number` of a protobuf message (wire format)."""
    pos = 0

    def varint() -> int:
        nonlocal pos
        shift = value = 0
        while True:
            byte = message[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    while pos < len(message):
        key = varint()
        wire, field_no = key & 7, key >> 3
        if wire == 0:
            varint()
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            size = varint()
            if field_no == number:
                return message[pos:pos + size]
            pos += size
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
    raise KeyError(number)


def _tokenizer_json(charsmap: bytes) -> dict[str, Any]:
    from tokenizers import (
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )

    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence(
        [normalizers.Precompiled(charsmap), normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(
        vocab_size=VOCAB_SIZE, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
        unk_token="<unk>", max_piece_length=8, shrinking_factor=0.75, n_sub_iterations=2)
    tok.train_from_iterator(list(CORPUS), trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", 0), ("</s>", 2)])
    data: dict[str, Any] = json.loads(tok.to_str())
    # XLM-R keeps <mask> as the last piece of the model's own vocabulary (fairseq's order).
    vocab = data["model"]["vocab"]
    vocab.append(["<mask>", 0.0])
    data["added_tokens"].append({
        "id": len(vocab) - 1, "content": "<mask>", "single_word": False, "lstrip": True,
        "rstrip": False, "normalized": False, "special": True})
    return data


def reference_tokenizer(model_dir: Path) -> Any:
    """The `tokenizers` reference for `model_dir`; special-token text is plain text, as in
    funes (which never parses it)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    tok.encode_special_tokens = True
    return tok


def build(out: Path, seed: int = SEED) -> Path:
    """Write config.json, tokenizer.json and model.safetensors of the synthetic e5 in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    data = _tokenizer_json(nmt_nfkc_charsmap())
    (out / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    write_weights(out, E5_SHAPE, len(data["model"]["vocab"]) + EXTRA_ROWS, seed)
    return out


def write_weights(out: Path, shape: dict[str, int], rows: int, seed: int = SEED) -> None:
    """config.json and seeded model.safetensors of a BertModel of `shape` with `rows` words."""
    config = {
        "architectures": ["BertModel"], "model_type": "bert", "hidden_act": "gelu",
        "position_embedding_type": "absolute", "layer_norm_eps": 1e-12, "type_vocab_size": 2,
        "pad_token_id": 0, "tokenizer_class": "XLMRobertaTokenizer", "vocab_size": rows,
        **shape,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    rng = np.random.default_rng(seed)
    h, ff = shape["hidden_size"], shape["intermediate_size"]

    def lin(n_out: int, n_in: int, prefix: str) -> dict[str, Any]:
        return {f"{prefix}.weight": rng.normal(0, 1.5 / np.sqrt(n_in), (n_out, n_in)),
                f"{prefix}.bias": rng.normal(0, 0.02, (n_out,))}

    def norm(prefix: str) -> dict[str, Any]:
        return {f"{prefix}.weight": 1 + rng.normal(0, 0.05, (h,)),
                f"{prefix}.bias": rng.normal(0, 0.02, (h,))}

    tensors: dict[str, Any] = {
        "embeddings.word_embeddings.weight": rng.normal(0, 0.5, (rows, h)),
        "embeddings.position_embeddings.weight": rng.normal(
            0, 0.1, (shape["max_position_embeddings"], h)),
        "embeddings.token_type_embeddings.weight": rng.normal(0, 0.1, (2, h)),
        **norm("embeddings.LayerNorm"),
    }
    for layer in range(shape["num_hidden_layers"]):
        p = f"encoder.layer.{layer}"
        for part in ("query", "key", "value"):
            tensors.update(lin(h, h, f"{p}.attention.self.{part}"))
        tensors.update(lin(h, h, f"{p}.attention.output.dense"))
        tensors.update(norm(f"{p}.attention.output.LayerNorm"))
        tensors.update(lin(ff, h, f"{p}.intermediate.dense"))
        tensors.update(lin(h, ff, f"{p}.output.dense"))
        tensors.update(norm(f"{p}.output.LayerNorm"))
    write_safetensors(out / "model.safetensors", tensors)
