"""Launch the specviz app: `python app.py [--host 127.0.0.1 --port 7860 ...]` (see --help)."""

import sys

from specviz.app.main import main

if __name__ == "__main__":
    sys.exit(main())
