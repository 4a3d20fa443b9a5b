"""Exports of a scored run: warehouse tables as files, per-trace results to Langfuse or an OTLP endpoint."""

__all__ = ["http", "langfuse", "otel", "tables"]
