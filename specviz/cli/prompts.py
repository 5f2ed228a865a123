"""The prompt of `specviz generate`: --prompt, or a UTF-8 file (--prompt-file), checked."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specviz.runtime import utf8_text


def read_prompt_file(path: str) -> str:
    """The text of a UTF-8 file, as is ('-': standard input); ValueError saying what to change
    when it cannot be read or is not UTF-8."""
    name = "standard input" if path == "-" else path
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as err:
        reason = err.strerror or str(err)
        raise ValueError(f"--prompt-file {name}: cannot read it ({reason})") from None
    try:
        return data.decode("utf-8").removeprefix("\ufeff")  # without a byte order mark
    except UnicodeDecodeError as err:
        raise ValueError(
            f"--prompt-file {name} is not UTF-8 text (byte 0x{data[err.start]:02x} at offset "
            f"{err.start}): save it as UTF-8"
        ) from None


def prompt_text(args: argparse.Namespace) -> str:
    """The prompt of --prompt or --prompt-file, checked to be non-empty UTF-8 text."""
    if args.prompt_file is not None:
        text, where = read_prompt_file(args.prompt_file), f"--prompt-file {args.prompt_file}"
    else:
        where, instead = "--prompt", ", or save it as UTF-8 and pass --prompt-file"
        text = utf8_text(args.prompt, where, instead=instead)
    if not text.strip():
        raise ValueError(f"{where} is empty: give some text to continue")
    return text
