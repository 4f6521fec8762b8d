"""The report says what an evaluated split shares with the splits training learned from."""

import html
import json

from conftest import REPO
from execrl.datasets import load_split
from execrl.report import splits
from execrl.report.html import skipped_rows_html
from execrl.report.summary import markdown
from execrl.report.tables import markdown_code

OPTIONS = {"n_warmup": 60, "n_train": 30, "n_test": 20}


def write_manifest(folder, result, split):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{split}.manifest.json"
    path.write_text(json.dumps(result.manifest))
    return path


def test_builtin_test_split_shares_shapes_and_no_task(tmp_path):
    test = load_split("builtin", "test", options=OPTIONS)
    path = write_manifest(tmp_path / "builtin-abc123", test, "test")
    [row] = splits.overlap_rows([path])
    warmup = load_split("builtin", "warmup", options=OPTIONS).problems
    train = load_split("builtin", "train", options=OPTIONS).problems
    seen = {p.metadata["template"] for p in warmup + train}
    expected = sum(p.metadata["template"] in seen for p in test.problems)
    assert row["dataset"] == "builtin" and row["split"] == "test" and row["problems"] == 20
    assert row["sharing_a_task"] == 0 and row["sharing_a_shape"] == expected
    assert row["templates_only_here"] == sorted({p.metadata["template"] for p in test.problems} - seen)
    assert row["other_splits"] == ["train", "warmup"]
    text = splits.sentence(row)
    assert f"{expected} ({expected / 20:.0%}) share a program shape" in text and "0 of them a task" in text


def test_a_dataset_without_overlap_records_gets_no_row(tmp_path):
    path = tmp_path / "mbpp-123456" / "test.manifest.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"adapter": "mbpp", "split": "test", "n_problems": 500}))
    assert splits.overlap_rows([path]) == []


def test_markdown_prints_the_overlap_line(tmp_path):
    test = load_split("builtin", "test", options=OPTIONS)
    [row] = splits.overlap_rows([write_manifest(tmp_path / "builtin-abc123", test, "test")])
    summary = json.loads((REPO / "docs" / "results" / "embedded-default.summary.json").read_text())
    assert splits.sentence(row, markdown_code) not in markdown(summary, [1])
    assert splits.sentence(row, markdown_code) in markdown({**summary, "split_overlap": [row]}, [1])


def write_split(folder, split, rows):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{split}.jsonl"
    path.write_text("".join(json.dumps({"test_type": "assert", "tests": ["assert f()"], **row}) + "\n" for row in rows))
    return path


def test_other_adapters_are_checked_for_problems_shared_between_splits(tmp_path):
    mine = tmp_path / "mine-0a1b2c"
    train = write_split(mine, "train", [{"id": "mine/1", "prompt": "Add."}, {"id": "mine/2", "prompt": "Sort. "},
                                        {"id": "mine/3", "prompt": "Count."}])  # fmt: skip
    # mine/9 is mine/2's prompt under another id; mine/3 is copied into both files
    test = write_split(mine, "test", [{"id": "mine/3", "prompt": "Count."}, {"id": "mine/9", "prompt": "Sort."},
                                      {"id": "mine/10", "prompt": "Reverse."}])  # fmt: skip
    rows = splits.shared_problem_rows([train, test], ["test"])
    assert rows == [{"kind": "shared_problems", "dataset": "mine", "split": "test", "problems": 3, "other_splits": ["train"],
                     "sharing_an_id": 1, "sharing_a_prompt": 2, "examples": ["mine/3", "mine/9"]}]  # fmt: skip
    assert splits.sentence(rows[0]) == (
        "mine test split: 3 problems; 1 share an id and 2 a prompt with the train split (e.g. mine/3, mine/9): "
        "where that split is trained on, they measure problems training saw."
    )
    clean = write_split(tmp_path / "other-3c4d5e", "test", [{"id": "o/1", "prompt": "Reverse."}])
    write_split(tmp_path / "other-3c4d5e", "train", [{"id": "o/2", "prompt": "Add."}])
    [row] = splits.shared_problem_rows([clean, tmp_path / "other-3c4d5e" / "train.jsonl"], ["test"])
    assert splits.sentence(row) == "other test split: 1 problems; none shares an id or a prompt with the train split."
    # a dataset its manifests describe (builtin) is not counted twice
    assert splits.shared_problem_rows([train, test], ["test"], covered={"mine"}) == []


def test_a_split_that_left_malformed_rows_out_is_named_in_the_report(tmp_path):
    good = {"id": "t/1", "prompt": "Add.", "test_type": "assert", "tests": ["assert add(1, 2) == 3"]}
    source = tmp_path / "mine.jsonl"
    source.write_text(json.dumps(good) + "\n" + '{"id": "t/2", "prompt": "No tests."}\n' + "not json\n")
    test = load_split("jsonl", "test", source=str(source), on_malformed="skip")
    [row] = splits.skipped_rows([write_manifest(tmp_path / "mine-abc123", test, "test")])
    assert (row["dataset"], row["split"], row["problems"], row["skipped"]) == ("mine", "test", 1, 2)
    text = splits.skipped_sentence(row)
    assert text.startswith("mine test split: 2 malformed row(s) left out (on_malformed: skip), 1 problems kept")
    assert "line 2" in text and "line 3" in text, text
    summary = json.loads((REPO / "docs" / "results" / "embedded-default.summary.json").read_text())
    assert splits.skipped_sentence(row, markdown_code) not in markdown(summary, [1])
    assert splits.skipped_sentence(row, markdown_code) in markdown({**summary, "skipped_rows": [row]}, [1])
    assert html.escape(text) in skipped_rows_html([row])
    (tmp_path / "clean.jsonl").write_text(json.dumps(good) + "\n")
    clean = load_split("jsonl", "test", source=str(tmp_path / "clean.jsonl"), on_malformed="skip")
    assert splits.skipped_rows([write_manifest(tmp_path / "clean-abc123", clean, "test")]) == []
    assert skipped_rows_html([]) == ""


HOSTILE_IDS = ["z\n\n# Injected\n<img src=x onerror=alert(6)>", "a`b``c", "`", " ", " a ", "[x](https://example.org)",
               "**bold**\u2028- item"]


def test_data_set_text_in_summary_md_stays_text(tmp_path):
    """Problem ids and a malformed row's message come from the data set: in summary.md they are
    code spans, so none becomes a heading, a list item, a link, emphasis or HTML."""
    from markdown_it import MarkdownIt

    overlap = {"kind": "shared_problems", "dataset": "mine", "split": "test", "problems": 6, "other_splits": ["train"],
               "sharing_an_id": 6, "sharing_a_prompt": 0, "examples": HOSTILE_IDS}  # fmt: skip
    skipped = {"dataset": "mine", "split": "test", "problems": 1, "skipped": 2,
               "examples": [{"row": "line 2", "error": "metadata must be an object, got '<script>alert(5)</script>\\n# H1'"},
                            {"row": "line\n# 3", "error": "x"}]}  # fmt: skip
    summary = json.loads((REPO / "docs" / "results" / "embedded-default.summary.json").read_text())
    plain = MarkdownIt().parse(markdown(summary, [1]))
    page = markdown({**summary, "split_overlap": [overlap], "skipped_rows": [skipped]}, [1])
    tokens = MarkdownIt().parse(page)

    def kinds(tokens):
        return sorted({t.type for t in tokens} | {c.type for t in tokens for c in t.children or ()})

    assert kinds(tokens) == kinds(plain)  # no new kind of element: no html, image, link, em, strong
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings == [tokens[i + 1].content for i, t in enumerate(plain) if t.type == "heading_open"]
    spans = {c.content for t in tokens for c in t.children or () if c.type == "code_inline"}
    # each id reads back as itself, its line breaks as escapes
    assert {"z\\n\\n# Injected\\n<img src=x onerror=alert(6)>", "a`b``c", "`", " ", " a ", "[x](https://example.org)",
            "**bold**\\u2028- item"} <= spans  # fmt: skip
    for text in HOSTILE_IDS:
        assert "\n" not in markdown_code(text)
