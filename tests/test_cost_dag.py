"""The cost table counts every job that computes results, in every run: Snakemake's DAG makes
`summarize_cost` wait for each of them, so none can finish after the table is made."""

from __future__ import annotations

from conftest import copy_workflow, planned_jobs_of

from execrl.methods import rule_info


def test_the_cost_table_waits_for_every_job_that_computes_results(tmp_path):
    workdir = copy_workflow(tmp_path)
    everything = planned_jobs_of(workdir, ".test/config/config.yaml")
    before_cost = planned_jobs_of(workdir, ".test/config/config.yaml", target="results/tables/cost.tsv")
    computing = {path: job["rule"] for path, job in everything.items() if rule_info(job["rule"]).phase != "report"}
    rules = set(computing.values())
    # the chains that end in an evaluation: on the tests and on the held-out tests
    assert {"train", "annotate_candidates", "evaluate_pass_at_k", "annotate_plus_tests", "evaluate_pass_at_k_plus"} <= rules
    missing = sorted(f"{rule}: {path}" for path, rule in computing.items() if path not in before_cost)
    assert missing == [], "jobs that may finish after the cost table:\n" + "\n".join(missing)
