"""`python -m tools.report [--check] [--results DIR] [FILE ...]`: re-render the marked tables."""

import sys

from tools.report.documents import main

if __name__ == "__main__":
    sys.exit(main())
