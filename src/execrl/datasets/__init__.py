"""Dataset adapters: turn a source (hub id, local file, or generator) into normalized problems.

::

    from execrl.datasets import load_split

    result = load_split(adapter="mbpp", split="test", source="/data/mbpp/mbpp.jsonl")
    result.problems   # list[execrl.problems.Problem]
    result.manifest   # what was read, from where, and which rows were skipped

Adapters (one module each): ``mbpp``, ``humaneval``, ``taco``, ``jsonl``, ``builtin``. See ``docs/datasets.md``
for their source forms and split rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from execrl.datasets import builtin, humaneval, jsonl, mbpp, taco
from execrl.datasets._common import ON_MALFORMED, DatasetError, LoadResult, resolve_options

__all__ = ["ADAPTERS", "DatasetError", "LoadResult", "load_split"]

ADAPTERS = {
    "mbpp": mbpp,
    "humaneval": humaneval,
    "taco": taco,
    "jsonl": jsonl,
    "builtin": builtin,
}

_MANIFEST_ORDER = (
    "adapter",
    "source",
    "subset",
    "split",
    "options",
    "on_malformed",
    "source_path",
    "source_digest",
    "n_rows_read",
    "n_rows_in_split",
    "n_problems",
    "n_skipped",
    "skipped",
)


def load_split(
    adapter: str,
    split: str,
    source: str | Path | None = None,
    subset: str | None = None,
    options: Mapping[str, Any] | None = None,
    on_malformed: str = "error",
) -> LoadResult:
    """Load one split of a dataset as normalized problems plus a manifest.

    Arguments are checked before any data is read: an unknown adapter, split, subset or
    option, or a bad ``on_malformed``, raises :class:`DatasetError` at once. A malformed row
    raises :class:`DatasetError` naming the file (or hub id) and the row, unless
    ``on_malformed="skip"``, in which case the row is left out and listed in
    ``manifest["skipped"]`` as ``{"row": ..., "error": ...}``.
    """
    module = ADAPTERS.get(adapter)
    if module is None:
        raise DatasetError(f"unknown adapter {adapter!r} (known: {', '.join(sorted(ADAPTERS))})")
    if on_malformed not in ON_MALFORMED:
        raise DatasetError(f"on_malformed must be one of {ON_MALFORMED}, got {on_malformed!r}")
    if not isinstance(split, str) or not split:
        raise DatasetError(f"split must be a non-empty string, got {split!r}")
    if module.SPLITS is not None and split not in module.SPLITS:
        raise DatasetError(f"unknown split {split!r} for adapter {adapter!r} (known: {', '.join(module.SPLITS)})")
    if subset is not None:
        if not module.SUBSETS:
            raise DatasetError(f"adapter {adapter!r} takes no subset, got {subset!r}")
        if subset not in module.SUBSETS:
            raise DatasetError(
                f"unknown subset {subset!r} for adapter {adapter!r} (known: {', '.join(module.SUBSETS)})"
            )
    if options is not None and not isinstance(options, Mapping):
        raise DatasetError(f"options must be a mapping, got {type(options).__name__}")
    resolved = resolve_options(adapter, module.OPTIONS, dict(options or {}))
    source_text = None if source is None else str(source)

    result = module.load(split=split, source=source_text, subset=subset, options=resolved, on_malformed=on_malformed)
    manifest = {
        "adapter": adapter,
        "source": source_text,
        "subset": subset,
        "split": split,
        "options": resolved,
        "on_malformed": on_malformed,
        "source_path": None,
        "source_digest": None,
        **result.manifest,
    }
    manifest["n_problems"] = len(result.problems)
    manifest.setdefault("skipped", [])
    manifest["n_skipped"] = len(manifest["skipped"])
    ordered = {key: manifest[key] for key in _MANIFEST_ORDER if key in manifest}
    ordered.update({key: value for key, value in manifest.items() if key not in ordered})
    return LoadResult(problems=result.problems, manifest=ordered)
