"""What the Delta IO manager records on each materialization."""

import dagster as dg


def test_the_delta_version_is_recorded_as_text_not_as_a_metric(scored):
    records = (
        scored["instance"]
        .fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("retrieval_scores"), asset_partitions=["cand-42"]), limit=1
        )
        .records
    )
    metadata = records[0].asset_materialization.metadata
    version = metadata["delta_version"]
    # A number would be plotted across materializations as if it were a score.
    assert isinstance(version, dg.TextMetadataValue)
    assert version.value.isdigit() and int(version.value) == scored["warehouse"].version("retrieval_scores")
    assert metadata["delta_table"].value.endswith("/retrieval_scores")
