"""The Dagster layer: definitions grouped by domain; each module owns its assets, checks and sensors."""

# The code location is assembled in defs/build.py from each domain package's `defs`.
__all__ = ["build"]
