import sys

from calbench.cli import main

sys.exit(main())
