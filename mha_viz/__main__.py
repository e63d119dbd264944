"""`python -m mha_viz …`: the command line (`mha_viz.cli`)."""

import sys

from mha_viz.cli import main

if __name__ == "__main__":
    sys.exit(main())
