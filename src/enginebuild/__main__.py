import os
import sys

from enginebuild.fastpath import answer_noop  # a no-op `image` answers before the CLI loads

if answer_noop(sys.argv[1:], os.getcwd()):
    sys.exit(0)

from enginebuild.cli import main  # noqa: E402

sys.exit(main(sys.argv[1:], root=os.getcwd()))
