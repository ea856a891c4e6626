"""``python -m experiments.minigrid_claim --smoke | --full``."""

import sys

from .run import main

sys.exit(main())
