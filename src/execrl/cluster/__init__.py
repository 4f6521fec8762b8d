"""Cluster-side planning: what a GPU job needs before it is submitted."""
