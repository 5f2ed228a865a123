"""Launch the specviz app: `python app.py [--host 127.0.0.1 --port 7860 ...]`, the same as
`specviz app` (see --help)."""

import sys

from specviz.cli import main

if __name__ == "__main__":
    sys.exit(main(["app", *sys.argv[1:]]))
