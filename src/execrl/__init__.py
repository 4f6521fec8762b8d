"""execrl: reinforcement learning for code-generating language models, rewarded by execution."""

__version__ = "0.1.0"
