"""Importers that turn other trajectory formats into SPEC §2 cases, traces, tool registry and run manifest."""

from eval_pipeline.importers.bfcl import import_bfcl
from eval_pipeline.importers.common import ImporterError, ImportSummary
from eval_pipeline.importers.openai_messages import import_openai_messages
from eval_pipeline.importers.tau_bench import import_tau_bench

IMPORTERS = {"tau-bench": import_tau_bench, "openai-messages": import_openai_messages, "bfcl": import_bfcl}

__all__ = ["IMPORTERS", "ImportSummary", "ImporterError", "import_bfcl", "import_openai_messages", "import_tau_bench"]
