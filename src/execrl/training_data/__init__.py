"""Training data: the datasets training reads, built from earlier stages' outputs.

RL datasets (n-best lists and DPO's preference pairs) ranked from annotated candidates
(`rl_data`), and warm-start examples in the formats of the methods trained after it
(`warm_start`).
"""
