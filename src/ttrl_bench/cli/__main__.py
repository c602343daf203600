"""`python -m ttrl_bench.cli`, the command every Snakemake rule runs: the same as `ttrl-bench`."""

import sys

from . import main

sys.exit(main())
