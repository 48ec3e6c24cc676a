import sys

from gpuclaim.double.apiserver.__main__ import main

sys.exit(main(sys.argv[1:]))
