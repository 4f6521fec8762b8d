"""Records of ``stdio`` runs (the child writes them on its result fd), parsed strictly.

Values of ``assert`` and ``call`` runs travel between the run and the worker's judge process
(``_exchange._Side``); the executor never decodes a program's values.
"""

from __future__ import annotations

import json


class DecodeError(ValueError):
    """The child sent something that is not a valid record."""


def loads_record(line: bytes) -> list:
    """Parse one record line from the child; raises DecodeError on anything malformed."""
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError) as e:
        raise DecodeError(f"malformed record: {e}") from e
    if type(rec) is not list or not rec or type(rec[0]) is not str:
        raise DecodeError("record is not a tagged list")
    return rec
