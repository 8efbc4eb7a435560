"""`python3 -m sparsering_capture`: see cli.py."""
import sys

from .cli import main

sys.exit(main())
