"""`python -m eval_pipeline.cli`: the `eval-pipeline` command."""

import sys

from eval_pipeline.cli import main

sys.exit(main())
