"""The configuration the report prints: what the experiment's jobs read, and a note naming the rest."""

from pathlib import Path

import pytest
import yaml

from execrl.config import left_out_of_report, merged_config, shown_in_report, without_runtime_settings
from execrl.report.html import left_out_note

REPO = Path(__file__).resolve().parents[1]
EMBEDDED = REPO / ".test" / "config" / "config.yaml"


def result_config(*overlays: Path) -> dict:
    return without_runtime_settings(merged_config([EMBEDDED, *overlays], base=REPO / "config" / "config.yaml"))


def test_the_embedded_default_leaves_out_the_sections_of_methods_it_does_not_run():
    config = result_config()
    assert left_out_of_report(config) == ["exec", "code_game", "spiral", "method_variants.srrl_separate",
                                          "generation.vllm", "grpo.vllm_*"]
    shown = shown_in_report(config)
    assert not {"exec", "code_game", "spiral"} & set(shown)
    # GRPO generates with transformers here: vLLM's keys of training are left out, use_vllm itself shown
    assert not [key for key in shown["grpo"] if key.startswith("vllm_")] and shown["grpo"]["use_vllm"] is False
    # a method that generates with vLLM keeps them, through its own override too
    overridden = {**config, "method_overrides": {"srrl": {"grpo": {"use_vllm": True}}}}
    assert "grpo.vllm_*" not in left_out_of_report(overridden)
    assert "grpo.vllm_*" not in left_out_of_report({**config, "grpo": {**config["grpo"], "use_vllm": True}})
    # what its methods read stays: DPO's, GRPO's and SRRL's sections, the rewards, the watch
    assert {"dpo", "grpo", "srrl", "rewards", "watch", "prompt", "execution", "tiny_model"} <= set(shown)
    assert set(shown["method_variants"]) == {"base_low_temp"}
    assert "vllm" not in shown["generation"] and shown["generation"]["backend"] == "transformers"


def test_a_section_the_warm_start_reads_stays_though_its_method_does_not_run(tmp_path):
    """Without SRRL in the grid, `srrl` is read only where the tiny model's warm start writes
    refinement examples (its prompt settings shape them)."""
    overlay = tmp_path / "no-srrl.yaml"
    overlay.write_text(yaml.safe_dump({"experiment": {"methods": ["base", "grpo"]}}))
    assert "srrl" not in left_out_of_report(result_config(overlay))  # refinement_share 0.1
    overlay.write_text(yaml.safe_dump({"experiment": {"methods": ["base", "grpo"]},
                                       "tiny_model": {"sft": {"refinement_share": 0.0}}}))
    left = left_out_of_report(result_config(overlay))
    assert "srrl" in left and "dpo" in left and "method_variants.base_low_temp" in left
    assert "srrl" not in shown_in_report(result_config(overlay))


def test_a_grid_of_the_base_model_only_shows_no_training_section(tmp_path):
    overlay = tmp_path / "base.yaml"
    overlay.write_text(yaml.safe_dump({"experiment": {"methods": ["base"]}}))
    shown = shown_in_report(result_config(overlay))
    assert not {"dpo", "grpo", "rewards", "watch", "exec", "code_game", "spiral"} & set(shown)
    assert "method_variants" not in shown  # its one variant is left out, and an empty section is not printed


@pytest.mark.parametrize("left", [[], ["exec", "generation.vllm"]])
def test_the_report_names_what_it_leaves_out(left):
    note = left_out_note(left)
    assert "cannot change a result" in note and "python -m execrl.config" in note
    assert ("Left out below" in note) is bool(left)
    if left:
        assert "<code>exec</code>, <code>generation.vllm</code>" in note


def test_sections_of_runtime_settings_only_are_not_printed_empty():
    config = result_config()
    assert config["wandb"] == {} and config["preflight"] == {}  # their keys cannot change a result
    shown = shown_in_report(config)
    assert not {"wandb", "preflight"} & set(shown)
    assert not [section for section, value in shown.items() if value == {}]
