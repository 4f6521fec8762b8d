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
from execrl.datasets._common import (
    ON_MALFORMED,
    DatasetError,
    LoadResult,
    is_saved_dataset,
    looks_like_hub_id,
    resolve_options,
)

__all__ = ["ADAPTERS", "DatasetError", "LoadResult", "SettingError", "check_definition", "load_split", "source_files"]

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
    module, resolved = _checked_arguments(adapter, split, subset, options, on_malformed)
    source_text = None if source is None else str(source)

    result = module.load(split=split, source=source_text, subset=subset, options=resolved, on_malformed=on_malformed)
    # A file or hub split without one problem is a mistake found here, not when evaluation has nothing to
    # average (the builtin suite's sizes are asked for, and 0 is allowed).
    if not result.problems and adapter != "builtin":
        skipped = len(result.manifest.get("skipped", []))
        raise DatasetError(
            f"{adapter} {source_text or '(default source)'}: split {split!r} has no problems"
            + (f" ({skipped} malformed row(s) skipped)" if skipped else "")
        )
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


def _checked_arguments(adapter, split, subset, options, on_malformed):
    """The adapter's module and its resolved options, or DatasetError for an argument it refuses."""
    module = _adapter_module(adapter)
    _check_on_malformed(on_malformed)
    if not isinstance(split, str) or not split:
        raise DatasetError(f"split must be a non-empty string, got {split!r}")
    _check_split(adapter, split)
    _check_subset(adapter, subset)
    if options is not None and not isinstance(options, Mapping):
        raise DatasetError(f"options must be a mapping, got {type(options).__name__}")
    resolved = resolve_options(adapter, module.OPTIONS, dict(options or {}))
    return module, resolved


def _adapter_module(adapter):
    module = ADAPTERS.get(adapter)
    if module is None:
        raise DatasetError(f"unknown adapter {adapter!r} (known: {', '.join(sorted(ADAPTERS))})")
    return module


def _check_on_malformed(on_malformed):
    if on_malformed not in ON_MALFORMED:
        raise DatasetError(f"on_malformed must be one of {ON_MALFORMED}, got {on_malformed!r}")


def _check_split(adapter, split):
    splits = ADAPTERS[adapter].SPLITS
    if splits is not None and split not in splits:
        raise DatasetError(f"unknown split {split!r} for adapter {adapter!r} (known: {', '.join(splits)})")


def _check_subset(adapter, subset):
    subsets = ADAPTERS[adapter].SUBSETS
    if subset is None:
        return
    if not subsets:
        raise DatasetError(f"adapter {adapter!r} takes no subset, got {subset!r}")
    if subset not in subsets:
        raise DatasetError(f"unknown subset {subset!r} for adapter {adapter!r} (known: {', '.join(subsets)})")


class SettingError(DatasetError):
    """A value of a dataset's config entry that its adapter refuses; `key` names it in the entry."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


def check_definition(dataset: Mapping[str, Any]) -> None:
    """What `load_split` would refuse in a dataset's config entry whatever the split (adapter,
    subset, options, on_malformed, a local source that is not there), raised before any job as
    SettingError naming the entry's key. Split names are checked per split by `source_files`."""
    adapter, source = dataset["adapter"], dataset.get("source")
    for key, check in (
        ("adapter", lambda: _adapter_module(adapter)),
        ("subset", lambda: _check_subset(adapter, dataset.get("subset"))),
        ("options", lambda: resolve_options(adapter, ADAPTERS[adapter].OPTIONS, dict(dataset.get("options") or {}))),
        ("on_malformed", lambda: _check_on_malformed(dataset.get("on_malformed", "error"))),
    ):
        try:
            check()
        except DatasetError as error:
            raise SettingError(key, str(error)) from None
    if adapter == "builtin":
        if source is not None:
            raise SettingError("source", f"the builtin adapter generates its problems and takes no source (got {source!r})")
        return
    if adapter == "jsonl" and not source:
        raise SettingError("source", "the jsonl adapter needs a source (a .jsonl file or a folder of {split}.jsonl files)")
    if source and not Path(source).exists() and (adapter == "jsonl" or not looks_like_hub_id(source)):
        what = "file or folder" if adapter == "jsonl" else "path, and not a hub dataset id (organization/name)"
        raise SettingError("source", f"{source!r} does not exist (a local {what}; relative to {str(Path.cwd())!r})")


def check_splits_apart(dataset: Mapping[str, Any]) -> None:
    """Refuse a definition under which training would learn the problems evaluation scores: a
    train or warm-start split that is the test split, or a single .jsonl file (every split at
    once: its split names only label the manifest). Raised as SettingError naming the key, for
    experiments that train (RL methods, or a tiny model's warm start)."""
    test = dataset["test_split"]
    for key in ("train_split", "warmup_split"):
        if dataset.get(key) is not None and dataset[key] == test:
            raise SettingError(
                key, f"{dataset[key]!r} is also the test split: training would learn the problems it is scored on; "
                "give training and evaluation different splits"
            )
    source = dataset.get("source")
    if dataset["adapter"] == "jsonl" and source and Path(source).is_file():
        raise SettingError(
            "source", f"{source!r} is one .jsonl file, which is every split at once (split names only label the "
            "manifest), so training would learn the problems it is scored on: give a folder with train.jsonl and "
            "test.jsonl (one file serves an experiment that only evaluates, experiment.methods: [base])"
        )


def source_files(dataset: Mapping[str, Any], split_key: str) -> list[str]:
    """The local files `prepare_dataset` reads for the split `dataset[split_key]` names: none for a
    hub dataset or the builtin suite. Declared as the job's input, so that a missing file fails
    the plan and an edited one reruns the job. A split the adapter does not have, or that a jsonl
    folder has no file for, raises SettingError naming `split_key`."""
    adapter, source, split = dataset["adapter"], dataset.get("source"), dataset[split_key]
    try:
        _check_split(adapter, split)
    except DatasetError as error:
        raise SettingError(split_key, str(error)) from None
    if not source or not Path(source).exists():
        return []  # a hub id (check_definition refused any other missing source)
    path = Path(source)
    if not path.is_dir() or is_saved_dataset(path):
        return [source]
    if adapter == "jsonl":
        if not (path / f"{split}.jsonl").is_file():
            available = ", ".join(sorted(p.stem for p in path.glob("*.jsonl"))) or "none"
            raise SettingError(split_key, f"{source!r} has no {split}.jsonl (splits there: {available})")
        return [str(path / f"{split}.jsonl")]
    if adapter == "mbpp":
        name = mbpp.UPSTREAM_FILES[dataset.get("subset") or "full"]
        if (path / name).is_file():
            return [str(path / name)]
    return [source]
