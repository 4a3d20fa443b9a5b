"""`python -m eval_pipeline_harness.sample_data`: write the committed sample data, or a large synthetic batch.

The synthetic batch is for benchmarks.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from eval_pipeline.contracts.identifiers import identifier_arg


def parser() -> argparse.ArgumentParser:
    """The command-line interface."""
    p = argparse.ArgumentParser(
        prog="python -m eval_pipeline_harness.sample_data",
        description=(
            "Without --traces: write the committed sample data (corpus, tools, cases, a baseline and a candidate run "
            "with planted failures, labels, gates, planted.json, README.md) under --out. With --traces N: write a "
            "synthetic batch of N traces (RAG and agent cases, 3 attempts per agent case) with its own corpus, tools, "
            "cases, qrels and grounding labels, for benchmarks. Output is deterministic for a given seed."
        ),
    )
    p.add_argument("--out", required=True, help="data root to write into (created if missing)")
    p.add_argument(
        "--traces",
        type=int,
        default=None,
        metavar="N",
        help="write a synthetic batch of N traces instead of the sample",
    )
    p.add_argument("--seed", type=int, default=None, help="random seed of the synthetic batch (default 7)")
    p.add_argument(
        "--run-id",
        default=None,
        type=identifier_arg("run id"),
        help="run id of the synthetic batch (default synth-<N>)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = parser().parse_args(argv)
    if args.traces is None:
        if args.seed is not None or args.run_id is not None:
            parser().error("--seed and --run-id apply to synthetic batches (--traces N)")
        from eval_pipeline_harness.sample_data.generator import write_sample

        written = write_sample(args.out)
        print(f"wrote {len(written)} files under {args.out}", file=sys.stderr)
        return 0
    if args.traces < 1:
        parser().error("--traces must be at least 1")
    from eval_pipeline_harness.sample_data.synthetic import write_synthetic

    summary = write_synthetic(
        args.out,
        args.traces,
        seed=7 if args.seed is None else args.seed,
        run_id=args.run_id,
        progress=None if args.quiet else sys.stderr,
    )
    print(
        f"wrote {summary.traces} traces of {summary.cases} cases to {args.out} (run {summary.run_id}) "
        f"in {summary.seconds:.1f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
