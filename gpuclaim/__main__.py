import sys

from gpuclaim.cli import main

sys.exit(main())
