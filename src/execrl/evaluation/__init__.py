"""Evaluation and analysis: how good and how varied a model's programs are.

The unbiased pass@k estimator (`passk`), pass@k per problem and per run from execution
annotations (`scores`), the interval evaluation of a policy while it trains (`interval_eval`),
how different a model's candidates for one problem are (`diversity`), and SRRL's refinement
examples sampled from a trained model (`refinement_samples`).
"""
