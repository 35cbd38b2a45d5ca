import sys

from causalfair.cli import main

sys.exit(main())
