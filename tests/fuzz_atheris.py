"""Coverage-guided fuzzing of every extractor with atheris (a script, not a test): see docs/contributing.md "Fuzzing".

    uv run --locked python -m tests.fuzz_atheris -atheris_runs=20000            # every format
    FUZZ_FORMAT=gemini-json uv run --locked python -m tests.fuzz_atheris corpus/  # one format, a corpus folder

Each input picks a format and either replaces one field of the format's valid session (with the rest of the
input as raw JSON text) or is the target file's bytes whole; `tests.fuzz_support.check_case` then asserts the
outcome is classified, memory stays bounded and the good session beside it loads. Any exception is a finding
(atheris stops and writes the input to crash-<sha1>); set FUZZ_SKIP_KNOWN=1 to pass over the known open bugs.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from tests import fuzz_support as fs

NAMES = sorted(fs.FORMATS)
ONLY = os.environ.get("FUZZ_FORMAT")
SKIP_KNOWN = os.environ.get("FUZZ_SKIP_KNOWN") == "1"


def one_input(data: bytes) -> None:
    provider = atheris.FuzzedDataProvider(data)
    name = ONLY or NAMES[provider.ConsumeIntInRange(0, len(NAMES) - 1)]
    fmt = fs.FORMATS[name]
    docs = fmt.docs()
    doc = sorted(docs)[provider.ConsumeIntInRange(0, len(docs) - 1)]
    field = provider.ConsumeBool()
    if field:
        paths = [p for p in fs.paths_of(docs[doc].value) if p and docs[doc].mutable(p)]
        path = paths[provider.ConsumeIntInRange(0, len(paths) - 1)]
        files = fs.with_field(name, doc, path, provider.ConsumeBytes(provider.remaining_bytes()))
    else:
        files = fs.with_bytes(name, doc, provider.ConsumeBytes(provider.remaining_bytes()))
    with tempfile.TemporaryDirectory() as tmp:
        case = fs.build(fmt, Path(tmp), files, field=field)
        try:
            fs.check_case(case)
        except Exception as exc:
            if SKIP_KNOWN and fs.known_open(exc) is not None:
                return
            raise


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
