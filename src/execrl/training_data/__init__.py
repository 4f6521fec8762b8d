"""Training data: the datasets training reads, built from earlier stages' outputs.

RL datasets (n-best lists and DPO's preference pairs) ranked from annotated candidates
(`rl_data`). The warm start's examples, written in the formats of the methods trained after it,
are the supervised warm start's own (`execrl.training.warm_start`).
"""
