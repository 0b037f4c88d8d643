import sys

from hweval.cli import main

sys.exit(main())
