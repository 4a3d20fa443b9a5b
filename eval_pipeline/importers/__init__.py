"""Importers that turn other trajectory formats into an evaluation run: the public functions and their tables.

Each writes the input contract's cases, traces, tool registry and run manifest (docs/importers.md).
"""

from eval_pipeline.importers.attempts import Matching
from eval_pipeline.importers.bfcl import import_bfcl
from eval_pipeline.importers.common import ImporterError, ImportSummary
from eval_pipeline.importers.flat_rows import import_deepeval, import_ragas
from eval_pipeline.importers.import_run import ImportRun
from eval_pipeline.importers.langfuse import import_langfuse
from eval_pipeline.importers.openai_messages import import_openai_messages
from eval_pipeline.importers.otlp import import_otlp
from eval_pipeline.importers.tau_bench import import_tau_bench

# importers of agent benchmark results and chat logs: (source, ImportRun, **options) -> ImportSummary
IMPORTERS = {"tau-bench": import_tau_bench, "openai-messages": import_openai_messages, "bfcl": import_bfcl}

# importers of RAG and agent traces: (sources, ImportRun, Matching, **options) -> ImportSummary
TRACE_IMPORTERS = {"otlp": import_otlp, "langfuse": import_langfuse, "ragas": import_ragas, "deepeval": import_deepeval}

__all__ = [
    "IMPORTERS",
    "TRACE_IMPORTERS",
    "ImportRun",
    "ImportSummary",
    "ImporterError",
    "Matching",
    "import_bfcl",
    "import_deepeval",
    "import_langfuse",
    "import_openai_messages",
    "import_otlp",
    "import_ragas",
    "import_tau_bench",
]
