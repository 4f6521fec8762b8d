"""A finished (reduced) embedded-default run with every method: its report renders offline in
headless Chromium with every figure loaded and shows summary.json's numbers; a change to one
method's settings reruns that method's chain and the report, nothing else."""

import html
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from conftest import EMBEDDED, REPO, copy_workflow, dpo_paths, run_snakemake, segments
from execrl.run_paths import readable
from test_training_resume import handmade_pairs
from test_workflow import REDUCED, deep_update

pytestmark = pytest.mark.slow

ARTIFACTS = REPO / "test-artifacts"
METHODS = ["base", "dpo", "grpo", "srrl"]
# The reduced tiny model passes nothing, so its own candidates give DPO no preference pairs: the
# run trains DPO on pairs made by hand. GRPO and SRRL train for a few steps.
REPORT_RUN = deep_update(
    json.loads(json.dumps(REDUCED)),
    {
        "experiment": {"name": "reduced-report", "methods": METHODS, "seeds": [0], "eval_splits": ["train", "test"]},
        "evaluation": {"max_problems": 32},
        "grpo": {
            "num_generations": 4, "prompts_per_step": 4, "max_steps": 4, "save_steps": 2,
            "eval_every": 2, "eval_problems": 8, "max_completion_length": 24,
        },
        "dpo": {"per_device_train_batch_size": 4, "max_length": 128},
        "report": {"title": "reduced report", "bootstrap_samples": 200, "refinement_prompts": 4},
    },
)
# Rules that summarize, plot or render every method's results: any method's change reruns them.
REPORTING_RULES = {
    "summarize_evaluations", "bootstrap_pass_at_k", "analyze_diversity", "summarize_cost", "plot_pass_at_k",
    "plot_per_problem", "plot_outcomes", "plot_training_curves", "plot_srrl_refinement", "plot_warm_start",
    "plot_diversity", "summarize_plus_tests", "plot_reward_hacking", "render_report",
}
REPORT_RULES = {"render_report"}
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-extensions", "--mute-audio",
    # No network: every name resolves to nothing and any proxy use fails.
    "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
]
# Runs after the page has loaded: records, into the DOM, whether every figure decoded.
CHECK_SCRIPT = """
<script>
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.querySelectorAll("img"));
  var out = document.createElement("pre");
  out.id = "figure-check";
  out.textContent = JSON.stringify({
    height: document.documentElement.scrollHeight,
    images: images.map(function (img) {
      return {id: img.id, complete: img.complete, width: img.naturalWidth, height: img.naturalHeight};
    })
  });
  document.body.appendChild(out);
});
</script>
"""


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("Chromium is not installed: install Debian's `chromium` package (apt-get install chromium); CI's .ci/run installs it")


@pytest.fixture(scope="module")
def chromium():
    """Checked before the run so that a missing browser fails at once."""
    return find_chromium()


def run_chromium(browser: str, *args: str, profile: Path, timeout: int = 180) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=timeout,
    )
    if result.returncode != 0:
        raise AssertionError(f"chromium failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return result


def planned_jobs(workdir: Path, overlay: dict | None = None) -> dict[str, int]:
    config = deep_update(json.loads(json.dumps(REPORT_RUN)), overlay or {})
    (workdir / "config" / "report-test.yaml").write_text(yaml.safe_dump(config))
    result = run_snakemake(workdir, "-n", "--configfile", EMBEDDED, "config/report-test.yaml")
    if "Nothing to be done" in result.stdout + result.stderr:
        return {}
    table = result.stdout.split("Job stats:")[1].split("total")[0]
    jobs = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}
    jobs.pop("all", None)  # the default target's own job
    return jobs


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    workdir = copy_workflow(tmp_path_factory.mktemp("report-run"))
    (workdir / "config" / "report-test.yaml").write_text(yaml.safe_dump(REPORT_RUN))
    PAIRS = dpo_paths(workdir, "config/report-test.yaml")["pairs"]
    run_snakemake(workdir, PAIRS, "--configfile", EMBEDDED, "config/report-test.yaml")
    (workdir / PAIRS).write_text("".join(json.dumps(p) + "\n" for p in handmade_pairs(24)))
    run_snakemake(workdir, "--configfile", EMBEDDED, "config/report-test.yaml")  # rule all: report, summary.json, summary.md
    return workdir


def planned_job_list(workdir: Path, overlay: dict) -> list[tuple[str, dict[str, str]]]:
    """(rule, wildcards) of every job a dry run plans with a config overlay."""
    config = deep_update(json.loads(json.dumps(REPORT_RUN)), overlay)
    (workdir / "config" / "report-test.yaml").write_text(yaml.safe_dump(config))
    result = run_snakemake(workdir, "-n", "--configfile", EMBEDDED, "config/report-test.yaml")
    jobs = []
    for block in re.split(r"^(?:local)?rule ", result.stdout, flags=re.MULTILINE)[1:]:
        rule = block.split(":", 1)[0].strip()
        found = re.search(r"^\s+wildcards: (.*)$", block, re.MULTILINE)
        # path segments carry a digest of their settings (execrl.run_paths): compared by name
        wildcards = {k: readable(v) for k, v in (i.split("=", 1) for i in found.group(1).split(", "))} if found else {}
        if rule != "all":
            jobs.append((rule, wildcards))
    return jobs


@pytest.mark.parametrize(
    "overlay, method, chain",
    [
        ({"dpo": {"beta": 0.2}}, "dpo", {"train"}),
        ({"srrl": {"refine_share": 0.25}}, "srrl", {"train", "sample_refinements"}),
        ({"grpo": {"epsilon": 0.3}}, None, {"train", "sample_refinements"}),
        ({"method_overrides": {"grpo": {"grpo": {"epsilon": 0.3}}}}, "grpo", {"train"}),
    ],
    ids=["dpo-beta", "srrl-only-setting", "grpo-setting-shared-with-srrl", "grpo-setting-for-grpo-only"],
)
def test_method_setting_reruns_its_chain_and_the_report_only(finished_run, overlay, method, chain):
    jobs = planned_job_list(finished_run, overlay)
    rules = {rule for rule, _ in jobs}
    evaluation_chain = {"merge_adapter", "generate_candidates", "annotate_candidates", "evaluate_pass_at_k",
                        "annotate_plus_tests", "evaluate_pass_at_k_plus"}  # fmt: skip
    assert chain | evaluation_chain | {"render_report"} <= rules
    assert rules <= chain | evaluation_chain | REPORTING_RULES
    if method is not None:  # every planned job of a single method belongs to that method
        assert {w["method"] for _, w in jobs if "method" in w} == {method}
    # Its evaluation is rerun on every split, and no base-model or RL-data work is.
    assert sum(rule == "evaluate_pass_at_k" for rule, _ in jobs) == 2 * (1 if method else 2)


@pytest.mark.parametrize(
    "overlay",
    [
        {"wandb": {"mode": "offline"}},
        {"wandb": {"project": "another-project"}},
        {"execution": {"workers": 4}},
        {"grpo": {"vllm_server_timeout_s": 60}},
    ],
    ids=["wandb-mode", "wandb-project", "sandbox-workers", "vllm-server-timeout"],
)
def test_settings_that_cannot_change_a_result_rerun_nothing(finished_run, overlay):
    assert planned_jobs(finished_run, overlay) == {}


def test_requiring_the_preflight_reruns_no_result(finished_run):
    """`preflight.required` cannot change a result: switched on after a finished run, the dry run
    plans the preflight and the gate record training reads as `ancient`, and no training or
    anything after it (Snakemake's input trigger would rerun a job whose inputs gained a file)."""
    assert set(planned_jobs(finished_run, {"preflight": {"required": True}})) == {"preflight", "preflight_gate"}


class SummaryTable(HTMLParser):
    def __init__(self):
        super().__init__()
        self.inside, self.header, self.rows, self.cell = False, [], [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table" and attrs.get("id") == "summary-table":
            self.inside = True
        elif self.inside and tag == "tr" and "data-method" in attrs:
            self.rows.append((attrs, []))
        elif self.inside and tag in ("td", "th"):
            self.cell = ""

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False
        elif self.inside and tag in ("td", "th") and self.cell is not None:
            (self.rows[-1][1] if tag == "td" else self.header).append(self.cell.strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def summary_rows(page: str) -> tuple[list[str], list[tuple[dict, list[str]]]]:
    parser = SummaryTable()
    parser.feed(page)
    return parser.header, parser.rows


def test_report_renders_offline_in_headless_chromium(chromium, finished_run, tmp_path):
    report = finished_run / "results" / "report.html"
    page = report.read_text(encoding="utf-8")
    assert not re.search(r"https?://", page), "the report must not reference anything online"
    assert not re.search(r"""(src|href)\s*=\s*["'](?!data:|#)""", page), "every asset must be embedded"
    n_figures = page.count('class="figure"')
    assert n_figures >= 9  # pass@k, problems, outcomes, two training, SRRL, warm start, diversity, cost

    probe = tmp_path / "report-probe.html"
    probe.write_text(page.replace("</body>", CHECK_SCRIPT + "</body>"), encoding="utf-8")
    dom = run_chromium(chromium, "--virtual-time-budget=15000", "--dump-dom", probe.as_uri(), profile=tmp_path / "profile-dom").stdout
    match = re.search(r'<pre id="figure-check">(.*?)</pre>', dom, re.DOTALL)
    assert match, f"the page's load handler did not run:\n{dom[-2000:]}"
    check = json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    figures = [image for image in check["images"] if image["id"].startswith("fig-")]
    assert len(figures) == n_figures
    broken = [image for image in figures if not (image["complete"] and image["width"] > 0 and image["height"] > 0)]
    assert not broken, f"figures that did not load: {broken}"

    _, rows = summary_rows(dom)
    assert sorted(attrs["data-method"] for attrs, _ in rows) == sorted(METHODS)

    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copyfile(report, ARTIFACTS / "report.html")
    height = min(max(int(check["height"]), 800), 16000)
    screenshot = ARTIFACTS / "report.png"
    screenshot.unlink(missing_ok=True)
    run_chromium(
        chromium,
        f"--screenshot={screenshot}", f"--window-size=1280,{height}", "--hide-scrollbars", "--virtual-time-budget=15000",
        report.as_uri(), profile=tmp_path / "profile-shot",
    )
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_and_summary_json_agree(finished_run):
    results = finished_run / "results"
    page = (results / "report.html").read_text(encoding="utf-8")
    summary = json.loads((results / "summary.json").read_text())
    markdown = (results / "summary.md").read_text()
    assert summary["main_split"] == "test" and summary["title"] == "reduced report"
    header, rows = summary_rows(page)
    assert [attrs["data-method"] for attrs, _ in rows] == METHODS
    for attrs, cells in rows:
        shown = dict(zip(header, cells, strict=True))
        record = next(r for r in summary["summary"] if r["method"] == attrs["data-method"] and r["split"] == "test")
        run = segments(finished_run, EMBEDDED, "config/report-test.yaml").run("builtin", "tiny", attrs["data-method"])
        evaluation = json.loads((results / f"eval/{run}/0/test.json").read_text())
        assert record["n_problems"] == evaluation["n_problems"] and record["n_samples"] == evaluation["n_samples"]
        # evaluation.max_problems (32) cuts the 120 train problems and leaves the 24 test problems whole.
        train = json.loads((results / f"eval/{run}/0/train.json").read_text())
        assert (train["n_problems"], evaluation["n_problems"]) == (32, 24)
        for k, value in record["pass_at_k"].items():
            assert value["mean"] == pytest.approx(evaluation["pass_at_k"][k])
            assert shown[f"pass@{k}"] == f"{value['mean']:.3f}"  # one seed: no ± sd
            assert value["ci_low"] <= value["mean"] <= value["ci_high"]
        assert shown["seeds"] == "1"
        if attrs["data-method"] != "base":
            versus = record["vs_baseline"]
            assert shown["Δ pass@1 vs base"] == f"{versus['delta_pass_at_1']:+.3f}"
            assert shown["fixed / broke"] == f"{versus['fixed']} / {versus['broken']}"
        assert "| " + " | ".join(cells) + " |" in markdown
    for sentence in summary["findings"]:
        assert sentence in markdown
    assert {r["method"] for r in summary["refinements"]} == {"srrl", "base"}
    assert {r["method"] for r in summary["training"]} == {"dpo", "grpo", "srrl"}
    assert summary["cost"]["total"]["jobs"] > 20 and summary["cost"]["total"]["gpu_h"] == 0


def test_the_reports_configuration_leaves_out_what_no_job_reads(finished_run):
    page = (finished_run / "results" / "report.html").read_text(encoding="utf-8")
    section = page.split('id="configuration"', 1)[1].split("<h2>", 1)[0]
    printed = yaml.safe_load(html.unescape(section.split("<pre>", 1)[1].split("</pre>", 1)[0]))
    assert not {"exec", "code_game", "spiral"} & set(printed) and {"dpo", "grpo", "srrl"} <= set(printed)
    assert "<code>exec</code>, <code>code_game</code>, <code>spiral</code>" in section


def test_snakemake_report_has_the_figures_with_captions(finished_run):
    run_snakemake(finished_run, "--configfile", EMBEDDED, "config/report-test.yaml", "--report", "results/provenance.zip")
    import zipfile

    with zipfile.ZipFile(finished_run / "results" / "provenance.zip") as archive:
        names = archive.namelist()
    for figure in ("pass_at_k.png", "per_problem.png", "training_steps.png", "srrl_c1_c2.png", "cost.png", "summary.md"):
        assert any(name.endswith(figure) for name in names), figure


def test_rebuilding_the_report_touches_nothing_upstream(finished_run):
    assert planned_jobs(finished_run) == {}
    assert set(planned_jobs(finished_run, {"report": {"title": "another title"}})) == REPORT_RULES
    assert set(planned_jobs(finished_run, {"report": {"bootstrap_samples": 300}})) == {
        "bootstrap_pass_at_k", "plot_pass_at_k", "render_report",
    }
    assert set(planned_jobs(finished_run, {"report": {"refinement_prompts": 2}})) == {
        "sample_refinements", "render_report",
    }

    # Rebuild for real with a new title: only the report's own outputs change.
    results = finished_run / "results"
    before = {path: path.stat().st_mtime_ns for path in results.rglob("*") if path.is_file()}
    config = deep_update(json.loads(json.dumps(REPORT_RUN)), {"report": {"title": "another title"}})
    (finished_run / "config" / "report-test.yaml").write_text(yaml.safe_dump(config))
    run_snakemake(finished_run, "--configfile", EMBEDDED, "config/report-test.yaml")
    changed = {
        str(path.relative_to(results)) for path, mtime in before.items() if not path.exists() or path.stat().st_mtime_ns != mtime
    }
    assert changed == {"report.html", "summary.json", "summary.md"}
    assert "another title" in (results / "report.html").read_text(encoding="utf-8")
