"""Models: where the models every stage starts from come from.

A small causal LM built locally with its own tokenizer, for runs with no hub access
(`tiny_model`), and hub models staged on the machine that reaches the hub so that compute nodes
need not (`staging`).
"""
