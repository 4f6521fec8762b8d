"""The report's provenance names the commit of the workflow's checkout, and the package's own where
the `execrl` package came from another checkout (a virtual environment shared between clones)."""

import json
import subprocess

from conftest import REPO
from execrl.report import html
from execrl.report.summary import markdown


def _commit_in(folder):
    run = lambda *args: subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, text=True)  # noqa: E731
    run("init", "-q")
    (folder / "Snakefile").write_text("# another checkout of the workflow\n")
    run("add", "Snakefile")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "another checkout")
    return run("describe", "--always", "--dirty", "--abbrev=10").stdout.strip()


def test_the_workflows_checkout_gives_the_commit(tmp_path):
    other = _commit_in(tmp_path)
    record = html.provenance(workflow_dir=tmp_path)
    assert record["git_commit"] == other
    assert record["package_git_commit"] == html.git_commit() != other
    page_line = html.package_commit(record)
    assert html.git_commit() in page_line and "another checkout" in page_line
    summary = json.loads((REPO / "docs" / "results" / "embedded-default.summary.json").read_text())
    shown = markdown({**summary, "provenance": record}, [1])
    assert f"git {other} (execrl package from another checkout, git {html.git_commit()})" in shown


def test_one_checkout_gives_one_commit():
    record = html.provenance(workflow_dir=REPO / "workflow" / "scripts")
    assert record["git_commit"] == html.git_commit() and "package_git_commit" not in record
    assert html.package_commit(record) == ""
