"""A tiny NLI classifier exported as ONNX Runtime reads it, built by the tests (nothing is downloaded).

Its logits are the sum of a per-token embedding over the (premise, hypothesis) pair, labels (contradiction,
entailment, neutral) as MNLI cross-encoders order them: `14` pushes towards entailment, `30` strongly towards
contradiction, every other token a little towards neutral. Enough to check the judge's plumbing exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

LABELS = {0: "contradiction", 1: "entailment", 2: "neutral"}
WORDS = [
    "refunds",
    "are",
    "issued",
    "within",
    "take",
    "14",
    "30",
    "days",
    "shipping",
    "is",
    "free",
    "gift",
    "cards",
    "expire",
    ".",
]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]


def embedding_table(vocab: dict[str, int]) -> np.ndarray:
    table = np.tile(np.array([0.0, 0.0, 0.2], dtype=np.float32), (len(vocab), 1))
    table[vocab["[PAD]"]] = 0.0
    table[vocab["14"]] = [0.0, 6.0, 0.0]
    table[vocab["30"]] = [20.0, 0.0, 0.0]
    return table


def build(folder: Path, labels: dict[int, str] | None = None) -> Path:
    """Write model.onnx, tokenizer.json and config.json of the tiny classifier into `folder`."""
    import onnx
    from onnx import TensorProto, helper
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordLevel

    folder.mkdir(parents=True, exist_ok=True)
    vocab = {token: index for index, token in enumerate(SPECIAL + WORDS)}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tokenizer.save(str(folder / "tokenizer.json"))

    table = embedding_table(vocab)
    nodes = [
        helper.make_node("Gather", ["embeddings", "input_ids"], ["embedded"], axis=0),
        helper.make_node("Cast", ["attention_mask"], ["mask_float"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask_float", "last_axis"], ["mask_3d"]),
        helper.make_node("Mul", ["embedded", "mask_3d"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "sequence_axis"], ["logits"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_nli",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"]),
        ],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 3])],
        initializer=[
            helper.make_tensor("embeddings", TensorProto.FLOAT, table.shape, table.flatten().tolist()),
            helper.make_tensor("last_axis", TensorProto.INT64, [1], [2]),
            helper.make_tensor("sequence_axis", TensorProto.INT64, [1], [1]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(folder / "model.onnx"))
    (folder / "config.json").write_text(json.dumps({"id2label": {str(k): v for k, v in (labels or LABELS).items()}}))
    return folder
