"""`python -m kraftlab.nemesis.diskfs`: see `kraftlab.nemesis.diskfs.mount`."""

import sys

from kraftlab.nemesis.diskfs.mount import main

sys.exit(main())
