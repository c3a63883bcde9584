import os
import sys

from enginebuild.cli import main

sys.exit(main(sys.argv[1:], root=os.getcwd()))
