"""`python -m pgrpo_sim.cli`: the `pgrpo-sim` program."""

import sys

from . import main

sys.exit(main())
