"""The Dagster layer: definitions grouped by domain; each module owns its assets, checks and sensors."""
