"""Importers that turn other trajectory formats into SPEC §2 cases, traces, tool registry and run manifest."""

from eval_pipeline.importers.bfcl import import_bfcl
from eval_pipeline.importers.common import ImporterError, ImportSummary
from eval_pipeline.importers.openai_messages import import_openai_messages
from eval_pipeline.importers.otlp import import_otlp
from eval_pipeline.importers.tau_bench import import_tau_bench

IMPORTERS = {"tau-bench": import_tau_bench, "openai-messages": import_openai_messages, "bfcl": import_bfcl}


def _later(module: str, name: str):
    import importlib

    def run(*args, **kwargs):
        return getattr(importlib.import_module(module), name)(*args, **kwargs)
    return run


# importers of RAG and agent traces: (sources, ImportRun, Matching, **options) -> ImportSummary
TRACE_IMPORTERS = {
    "otlp": import_otlp,
    "langfuse": _later("eval_pipeline.importers.langfuse", "import_langfuse"),
    "ragas": _later("eval_pipeline.importers.flat_rows", "import_ragas"),
    "deepeval": _later("eval_pipeline.importers.flat_rows", "import_deepeval"),
}

__all__ = ["IMPORTERS", "TRACE_IMPORTERS", "import_otlp", "ImportSummary", "ImporterError", "import_bfcl", "import_openai_messages", "import_tau_bench"]
