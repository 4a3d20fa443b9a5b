"""The model judge: a sequence-classification (NLI) model from a local folder, run with ONNX Runtime; never downloads.

The folder (EVAL_PIPELINE_JUDGE_MODEL_DIR) holds what an ONNX export of a Hugging Face classifier writes — HHEM,
MiniCheck or any MNLI cross-encoder:
- `model.onnx`: inputs `input_ids` and `attention_mask` (and `token_type_ids` if the model has them), output the
  logits, shape (batch, labels); a single logit is read as a sigmoid;
- `tokenizer.json`: the fast tokenizer (the `tokenizers` library reads it);
- `config.json`: `id2label`. The supported label is the one whose name holds entail, support, consistent or
  faithful; the contradicted label holds contradict or refute. `eval_pipeline_labels: {supported: NAME,
  contradicted: NAME}` in config.json names them when the model uses other names.

Each evidence chunk is cut into passages of whole sentences of at most `passage_chars` characters; the model reads
(passage, claim) with the passage truncated to `max_length` tokens. Score = the highest probability of the
supported label over the claim's passages. Verdict: SUPPORTED when score ≥ the profile's `support` threshold;
else CONTRADICTED when the contradicted label is the most likely one on the passage where it is strongest; else
NOT_IN_EVIDENCE. The quote is the deciding passage's sentences joined by " … ". The version names the folder,
a digest of model.onnx and the profile digest, so two models or two profiles never share verdicts.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import polars as pl

from eval_pipeline.judge.base import Judge, JudgeConfigError, evidence_sets
from eval_pipeline.judge.profile import JudgeProfile, default_profile
from eval_pipeline.judge.text import sentence_rows, strip_doc_markers

MODEL_FILE, TOKENIZER_FILE, CONFIG_FILE = "model.onnx", "tokenizer.json", "config.json"
SUPPORTED_NAMES = ("entail", "support", "consistent", "faithful")
CONTRADICTED_NAMES = ("contradict", "refute")
QUOTE_JOINER = " … "


def _label_index(labels: dict[int, str], wanted: str | None, hints: tuple[str, ...]) -> int | None:
    for index, name in labels.items():
        if (wanted is not None and name == wanted) or (wanted is None and any(h in name.lower() for h in hints)):
            return index
    return None


class ModelJudge(Judge):
    """NLI classifier judge (module docstring)."""

    deterministic = True

    def __init__(
        self,
        model_dir: str = "",
        profile: JudgeProfile | None = None,
        max_length: int = 512,
        batch_size: int = 16,
        passage_chars: int = 1500,
    ) -> None:
        if not model_dir:
            raise JudgeConfigError("the model judge needs a model folder (EVAL_PIPELINE_JUDGE_MODEL_DIR)")
        folder = Path(model_dir)
        missing = [name for name in (MODEL_FILE, TOKENIZER_FILE, CONFIG_FILE) if not (folder / name).is_file()]
        if missing:
            raise JudgeConfigError(
                f"model folder {model_dir} lacks {', '.join(missing)} (an ONNX export of a classifier)"
            )
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise JudgeConfigError(
                "the model judge needs the optional extra: pip install 'eval_pipeline[model]'"
            ) from exc
        config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
        labels = {int(k): str(v) for k, v in (config.get("id2label") or {}).items()}
        named = config.get("eval_pipeline_labels") or {}
        self.supported = _label_index(labels, named.get("supported"), SUPPORTED_NAMES)
        self.contradicted = _label_index(labels, named.get("contradicted"), CONTRADICTED_NAMES)
        self.n_labels = max(len(labels), 1)
        if self.n_labels > 1 and self.supported is None:
            raise JudgeConfigError(
                f"{folder / CONFIG_FILE}: no id2label entry reads as entailment/support; "
                "name it with eval_pipeline_labels: {{supported: LABEL}}"
            )
        self.session = onnxruntime.InferenceSession(str(folder / MODEL_FILE), providers=["CPUExecutionProvider"])
        self.input_names = {i.name for i in self.session.get_inputs()}
        self.tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
        self.tokenizer.enable_truncation(max_length=max_length, strategy="only_first")
        self.tokenizer.enable_padding()
        self.batch_size = batch_size
        self.passage_chars = passage_chars
        self.profile = profile or default_profile("model")
        digest = hashlib.sha256((folder / MODEL_FILE).read_bytes()).hexdigest()[:8]
        self.model = f"{folder.name}@{digest}"
        self.version = f"model:{self.model}+{self.profile.digest}"

    def _probabilities(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        """Label probabilities for (premise, hypothesis) pairs, shape (pairs, labels)."""
        out = []
        for start in range(0, len(pairs), self.batch_size):
            encodings = self.tokenizer.encode_batch(pairs[start : start + self.batch_size])
            feeds = {
                "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            }
            if "token_type_ids" in self.input_names:
                feeds["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
            logits = np.asarray(
                self.session.run(None, {k: v for k, v in feeds.items() if k in self.input_names})[0], dtype=np.float64
            )
            if logits.ndim == 1 or logits.shape[-1] == 1:
                positive = 1.0 / (1.0 + np.exp(-logits.reshape(-1)))
                out.append(np.stack([1.0 - positive, positive], axis=1))
            else:
                shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
                out.append(shifted / shifted.sum(axis=1, keepdims=True))
        return np.vstack(out) if out else np.zeros((0, max(self.n_labels, 2)))

    def _passages(self, requests: pl.DataFrame) -> pl.DataFrame:
        """evidence_key, passage (sentences joined by QUOTE_JOINER), doc_id, ev_pos, part: whole sentences per chunk."""
        chunks = evidence_sets(requests).with_row_index("chunk")
        sentences = sentence_rows(chunks.select("chunk", "text"), ["chunk"], "text")
        length = pl.col("sentence").str.len_chars() + 1
        # A new passage starts where the running length of the chunk's sentences passes a multiple of passage_chars.
        sentences = sentences.with_columns(
            part=((length.cum_sum() - length).over("chunk") // self.passage_chars).cast(pl.Int64)
        )
        return (
            sentences.group_by("chunk", "part", maintain_order=True)
            .agg(pl.col("sentence").str.join(QUOTE_JOINER).alias("passage"))
            .join(chunks.select("chunk", "evidence_key", "doc_id", "ev_pos"), on="chunk")
        )

    def _judge_claims(self, requests: pl.DataFrame) -> pl.DataFrame:
        claims = requests.select(
            "request_key", "evidence_key", strip_doc_markers(pl.col("claim").fill_null("")).alias("claim")
        )
        pairs = claims.join(self._passages(requests), on="evidence_key").sort("request_key", "ev_pos", "part")
        if pairs.height:
            probabilities = self._probabilities(
                list(
                    zip(
                        pairs["passage"].str.replace_all(QUOTE_JOINER, " ", literal=True).to_list(),
                        pairs["claim"].to_list(),
                        strict=True,
                    )
                )
            )
            supported_index = self.supported if self.supported is not None else 1
            columns = {"p_supported": probabilities[:, supported_index]}
            if self.contradicted is not None:
                columns["p_contradicted"] = probabilities[:, self.contradicted]
                columns["contradicted_top"] = probabilities.argmax(axis=1) == self.contradicted
            pairs = pairs.with_columns(**{k: pl.Series(k, v) for k, v in columns.items()})
        for name, default in (
            ("p_supported", pl.lit(None, pl.Float64)),
            ("p_contradicted", pl.lit(None, pl.Float64)),
            ("contradicted_top", pl.lit(False)),
        ):
            if name not in pairs.columns:
                pairs = pairs.with_columns(default.alias(name))
        best = pairs.sort("p_supported", descending=True).unique("request_key", keep="first")
        strongest = (
            pairs.filter(pl.col("p_contradicted").is_not_null())
            .sort("p_contradicted", descending=True)
            .unique("request_key", keep="first")
            .select(
                "request_key",
                pl.col("passage").alias("_c_passage"),
                pl.col("doc_id").alias("_c_doc"),
                "contradicted_top",
                pl.col("p_contradicted").alias("_p_c"),
            )
        )
        threshold = self.profile.support_threshold
        decided = (
            claims.select("request_key")
            .join(best.select("request_key", "passage", "doc_id", "p_supported"), on="request_key", how="left")
            .join(strongest, on="request_key", how="left")
            .with_columns(score=pl.col("p_supported").round(4))
        )
        supported = pl.col("score") >= threshold
        contradicted = ~supported & pl.col("contradicted_top").fill_null(False)
        return decided.select(
            "request_key",
            pl.when(pl.col("score").is_null())
            .then(pl.lit("NOT_IN_EVIDENCE"))
            .when(supported)
            .then(pl.lit("SUPPORTED"))
            .when(contradicted)
            .then(pl.lit("CONTRADICTED"))
            .otherwise(pl.lit("NOT_IN_EVIDENCE"))
            .alias("verdict"),
            pl.col("score").fill_null(0.0),
            pl.when(contradicted).then(pl.col("_c_passage")).otherwise(pl.col("passage")).alias("evidence_quote"),
            pl.when(contradicted).then(pl.col("_c_doc")).otherwise(pl.col("doc_id")).alias("evidence_doc_id"),
            pl.lit("ok").alias("status"),
            pl.when(pl.col("score").is_null())
            .then(pl.lit("no evidence"))
            .when(contradicted)
            .then(
                pl.format(
                    "model: contradiction most likely ({}) on the quoted passage; support {} < {}",
                    pl.col("_p_c").round(4),
                    "score",
                    pl.lit(f"{threshold:g}"),
                )
            )
            .when(supported)
            .then(pl.format("model: support {} >= {} on the quoted passage", "score", pl.lit(f"{threshold:g}")))
            .otherwise(pl.format("model: support {} < {} on its best passage", "score", pl.lit(f"{threshold:g}")))
            .alias("reason"),
            pl.lit(0.0).alias("cost_usd"),
            pl.lit(False).alias("cached"),
        )

    def _judge_pairs(self, requests: pl.DataFrame) -> pl.DataFrame:
        from eval_pipeline.judge.pairwise import prefer_by_claims

        return prefer_by_claims(self, requests)
