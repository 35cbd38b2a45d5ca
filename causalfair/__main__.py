import sys

from causalfair.cli import entry

sys.exit(entry())
