"""Sampling candidate programs from a model, behind one interface for every backend."""

from __future__ import annotations

from execrl.generation.base import GenerationBackend, GenerationSettings, candidate_records, get_backend

__all__ = ["GenerationBackend", "GenerationSettings", "candidate_records", "get_backend"]
