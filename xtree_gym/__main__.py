"""``python -m xtree_gym`` is the ``xtree`` command (works even where the script is not on PATH)."""

import sys

from .cli import main

sys.exit(main())
