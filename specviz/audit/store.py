"""Saved samples, so that an audit resumes where it stopped: one JSON object a line.

Each line records the engine, the settings key, the prompt, the side, k (tokens asked), the
seed, whether logprobs were asked, and the sample. An audit reads the lines whose engine and
settings match its own and draws only the samples missing; each new sample is appended (and
flushed) as soon as it is drawn.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from specviz.audit.settings import Sample

SampleKey = tuple[str, str, int, int, bool]  # (prompt, side, k, seed, top)


@dataclass(frozen=True, kw_only=True)
class Store:
    """The samples file of one engine and setting (path None: nothing saved)."""

    path: Path | None
    engine: str
    setting: str

    def load(self) -> dict[SampleKey, Sample]:
        """The samples saved for this engine and setting (ValueError for a damaged file)."""
        if self.path is None or not self.path.is_file():
            return {}
        out: dict[SampleKey, Sample] = {}
        for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if record["engine"] == self.engine and record["setting"] == self.setting:
                    out[_key(record)] = Sample.from_json(record["sample"])
            except (ValueError, KeyError, TypeError):
                raise ValueError(
                    f"--samples {self.path}: line {number} is not a saved sample; give a new "
                    "file or remove the line"
                ) from None
        return out

    def append(self, key: SampleKey, sample: Sample) -> None:
        """Save one sample at the end of the file."""
        if self.path is None:
            return
        prompt, side, k, seed, top = key
        record: dict[str, object] = {"engine": self.engine, "setting": self.setting}
        record |= {"prompt": prompt, "side": side}
        record |= {"k": k, "seed": seed, "top": top, "sample": sample.to_json()}
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record) + "\n")


def _key(record: dict[str, object]) -> SampleKey:
    """The key of a saved record."""
    return (
        str(record["prompt"]),
        str(record["side"]),
        int(record["k"]),  # type: ignore[call-overload]
        int(record["seed"]),  # type: ignore[call-overload]
        bool(record["top"]),
    )
