"""The memory plan's terms against hand arithmetic, published model sizes, figures reported for
real jobs and DeepSpeed's own estimator."""

import dataclasses
import json

import pytest

from conftest import REPO
from execrl.planning.cluster import Gpu, Node
from execrl.planning.architecture import SHIPPED_SHAPES, Architecture, architecture
from execrl.planning.memory_plan import plan_training_layout, training_job_layout
from execrl.planning.training_plan import GB, DoesNotFit, TrainingJob, fit, plan_training
from execrl.planning.vllm_plan import GIB, fit_vllm_server, plan_vllm_server, vllm_server_kv_cache_bytes

# Published parameter counts of the Qwen2.5 Instruct models (billions, from their model cards' totals).
PUBLISHED_PARAMETERS_B = {
    "Qwen/Qwen2.5-0.5B-Instruct": 0.49,
    "Qwen/Qwen2.5-1.5B-Instruct": 1.54,
    "Qwen/Qwen2.5-3B-Instruct": 3.09,
    "Qwen/Qwen2.5-7B-Instruct": 7.61,
    "Qwen/Qwen2.5-14B-Instruct": 14.7,
    "Qwen/Qwen2.5-32B-Instruct": 32.5,
}
QWEN_32B = "Qwen/Qwen2.5-32B-Instruct"
A100_40GB = Gpu("a100_40gb", 40, 8.0)
A100_80GB = Gpu("a100_80gb", 80, 8.0)
H100 = Gpu("h100", 80, 9.0)
H100_REPORTED = Gpu("h100", 80, 9.0, memory_mib=81559)  # what nvidia-smi reports for an H100 80GB
H200 = Gpu("h200", 141, 9.0)
T4 = Gpu("t4", 16, 7.5)

# A shape small enough to count by hand: hidden 8, 2 layers, 2 heads of 4, 1 KV head, MLP 16, vocab 10.
TINY = Architecture(
    hidden_size=8,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    intermediate_size=16,
    vocab_size=10,
    tie_word_embeddings=True,
)


@pytest.mark.parametrize("source", sorted(PUBLISHED_PARAMETERS_B))
def test_parameter_count_matches_published_size(source):
    counted = architecture(source).parameters() / 1e9
    assert counted == pytest.approx(PUBLISHED_PARAMETERS_B[source], rel=0.02)
    # The base model shares the Instruct model's shape.
    assert architecture(source.removesuffix("-Instruct")) == architecture(source)


def test_hand_counted_tiny_shape():
    # Per layer: q 64 + k 32 + v 32 + o 64 + q/k/v biases 16 = 208; MLP 3 × 8 × 16 = 384; 2 norms 16.
    # 2 layers 1216 + tied embedding 80 + final norm 8.
    assert TINY.parameters() == 1304
    assert TINY.kv_dim == 4
    # LoRA rank 1 per layer: q 16, k 12, v 12, o 16, gate 24, up 24, down 24 = 128; 2 layers.
    assert TINY.lora_parameters(1) == 256
    assert TINY.lora_parameters(16) == 16 * 256
    # micro 1 × 4 tokens in bf16, LoRA without dropout, checkpointed, every position scored.
    # Saved: 3 checkpointed hidden states (2 layer inputs, the last output) 3 × 4 × 8 × 2 = 192;
    # the head's inputs: final norm's fp32 copy 4 × 8 × 4 = 128, hidden 4 × 8 × 2 = 64, 16 bytes
    # of per-token statistics 64.
    # Head: TRL's tile buffer, 4 rows × 32768 wide whatever the vocabulary, in bf16 262144; the
    # hidden gradient in fp32 and bf16 4 × 8 × 6 = 192.
    # Recompute, per token: norms 2 fp32 copies 64 + 2 outputs 32; attention q 16 + k, v 16 +
    # output and its copy 32 + 2 heads' fp32 log-sum-exp 8; MLP 4 × 2 × 16 = 128: 296 × 4 = 1184;
    # backward: two gradients of the MLP's width 4 × 2 × 2 × 16 = 256.
    assert TINY.activation_bytes(1, 4) == {
        "saved_activations": 448, "lm_head": 262336, "recompute": 1184 + 256, "embedding_gradient": 0
    }
    assert TINY.checkpointed_activation_bytes(1, 4) == 448 + 262336
    # LoRA dropout keeps a dropped copy and a mask of q, k, v, gate, up (8 each), o (8), down (16).
    dropout = TINY.activation_bytes(1, 4, lora_dropout=True)["recompute"] - 1440
    assert dropout == 4 * (6 * 8 + 16) * (2 + 1)
    # Training the head adds its whole fp32 gradient accumulator (10 × 8 × 4) and, in bf16, the
    # cast of it the backward returns while the accumulator is alive (10 × 8 × 2).
    assert TINY.activation_bytes(1, 4, trains_head=True)["lm_head"] == 262336 + 320 + 160
    # In fp32 the cast is the accumulator itself: no copy.
    fp32 = TINY.activation_bytes(1, 4, dtype_bytes=4, trains_head=True)
    assert fp32["lm_head"] == 4 * 32768 * 4 + 4 * 8 * 4 + 320
    # Recomputing a layer then keeps the norms' normalised copies (4 tokens × 2 norms × 8 × 2) and
    # the largest projection's weight gradient (the MLP's 8 × 16 in bf16) before it is accumulated.
    assert TINY.activation_bytes(1, 4, trains_head=True)["recompute"] - 1440 == 4 * 2 * 8 * 2 + 8 * 16 * 2
    # ...and the embedding's weight gradient at the end of the backward (10 × 8 × 2).
    assert TINY.activation_bytes(1, 4, trains_head=True)["embedding_gradient"] == 160
    # GRPO scores only the completion (here 2 of 4 positions) on the Triton path.
    assert TINY.activation_bytes(1, 4, scored_length=2)["lm_head"] == 2 * 32768 * 2 + 2 * 8 * 6
    # Without Triton (CPU) every position is scored, and torch's ops make seven fp32 copies of the
    # 4 × 10 logits and a 1-byte mask, plus the bf16 tile's fp32 copy: 4 × 10 × 33 beside the buffer
    # and the fp32 accumulator (the larger of that fold, the products' fp32 copies 4 × 10 × 4 +
    # 10 × 8 × 4, and the returned casts 4 × 8 × 2).
    assert TINY.activation_bytes(1, 4, scored_length=2, fused_kernel=False)["lm_head"] == 262144 + 128 + 4 * 10 * 33
    # A given parameter count wins over the derived one.
    assert dataclasses.replace(TINY, parameter_count=5000).parameters() == 5000


def test_hand_checked_terms_full_zero3_and_lora_ddp():
    params = TINY.parameters()
    largest = 8 * 16  # an MLP projection, larger than the 10 × 8 embedding
    full = plan_training(TINY, TrainingJob(finetune="full", zero_stage=3, processes=4, sequence_length=4))
    # ZeRO-3 as DeepSpeed 0.19.8 allocates it: before the first step the 16-bit partition, the fp32
    # master partition, the fp32 gradient partition and one reduce bucket of 5e8 16-bit elements.
    assert full.terms["weights"] * GB == pytest.approx(2 * params / 4)
    assert full.terms["master_weights"] * GB == pytest.approx(4 * params / 4)
    assert full.terms["gradients"] * GB == pytest.approx(4 * params / 4)
    assert full.terms["deepspeed_buffers"] == pytest.approx(5e8 * 2 / GB)
    # The first optimizer step adds Adam's two fp32 moments.
    assert full.terms["optimizer"] * GB == pytest.approx(8 * params / 4)
    # During the forward and backward: the largest layer gathered with its 16-bit gradient, and the prefetch bucket.
    assert full.terms["gathered"] * GB == pytest.approx(4 * largest + 5e7 * 2)
    terms = TINY.activation_bytes(1, 4, trains_head=True)
    backward = max(terms["lm_head"], terms["recompute"], terms["embedding_gradient"])
    assert full.activations_gb * GB == pytest.approx(terms["saved_activations"] + backward)
    assert full.terms["nccl"] > 0 and full.terms["cuda_context"] > 0
    groups = full.measured_groups()
    assert set(groups["weights"]) == {"weights", "master_weights", "gradients", "deepspeed_buffers", "frozen_copies",
                                      "opponent"}
    assert groups["optimizer_state"] == ("optimizer",)
    assert set(groups["activations"]) == {"gathered", "saved_activations", "backward_peak"}
    adapter = TINY.lora_parameters(16)
    lora = plan_training(TINY, TrainingJob(finetune="lora", zero_stage=0, processes=4, sequence_length=4))
    assert lora.terms["weights"] * GB == pytest.approx(2 * params)  # every process holds all
    assert lora.terms["master_weights"] * GB == pytest.approx(4 * adapter)  # the fp32 adapters themselves
    assert lora.terms["gradients"] * GB == pytest.approx(2 * adapter)
    assert lora.terms["optimizer"] * GB == pytest.approx(8 * adapter)
    assert lora.host_gb == 0
    assert lora.terms["deepspeed_buffers"] * GB == pytest.approx(2 * adapter)  # DDP's gradient buckets
    # Under DDP the gradients are made by each backward and freed at zero_grad: the update's.
    assert "gradients" in lora.measured_groups()["activations"]


def test_colocated_vllm_share_and_frozen_copies_are_budgeted():
    arch = architecture("Qwen/Qwen2.5-7B-Instruct")
    base = TrainingJob(processes=7, sequence_length=8192, gpu=H100_REPORTED)
    plain = plan_training(arch, base)
    colocated = plan_training(arch, dataclasses.replace(base, colocated_vllm_fraction=0.3))
    # The share is of the capacity the driver reports: 0.3 × 81559 MiB, not 0.3 × 80 GB.
    assert colocated.terms["colocated_vllm"] == pytest.approx(0.3 * 81559 * 2**20 / GB) == pytest.approx(25.66, abs=0.01)
    assert colocated.total_gb == pytest.approx(plain.total_gb + colocated.terms["colocated_vllm"])
    # A DPO reference under ZeRO-3 is sharded like the policy: 2 bytes per parameter over 7 processes.
    reference = plan_training(arch, dataclasses.replace(base, frozen_copies=1))
    assert reference.terms["frozen_copies"] == pytest.approx(2 * arch.parameters() / 7 / GB)
    # The share shrinks the micro-batch fit() can choose while the step's completions stay 56.
    alone = fit(arch, base, 56)
    shared = fit(arch, dataclasses.replace(base, colocated_vllm_fraction=0.3), 56)
    assert (alone.micro_batch, alone.accumulation) == (8, 1)
    assert (shared.micro_batch, shared.accumulation) == (4, 2)
    # code_game's opponent is loaded whole on every GPU: 2 bytes per parameter, not divided by 7.
    opponent = plan_training(arch, dataclasses.replace(base, whole_copies=1))
    assert opponent.terms["opponent"] == pytest.approx(2 * arch.parameters() / GB)


def test_reported_figure_32b_full_adam_on_7_processes_needs_offload():
    arch = architecture(QWEN_32B)
    assert arch.parameters() / 1e9 == pytest.approx(32.76, abs=0.01)
    job = TrainingJob(finetune="full", zero_stage=3, processes=7, sequence_length=8192)
    on_gpu = plan_training(arch, job)
    # Mixed-precision Adam state: 16 bytes per parameter over 7 processes ≈ 75 GB per GPU.
    assert sum(on_gpu.terms[t] for t in ("master_weights", "gradients", "optimizer")) == pytest.approx(74.9, abs=0.1)
    assert not on_gpu.fits
    chosen = fit(arch, job, completions_per_step=56)
    assert chosen.offload_optimizer and chosen.fits
    assert chosen.terms["optimizer"] == chosen.terms["gradients"] == chosen.terms["master_weights"] == 0
    # Host memory holds the offloaded state of all 7 processes: fp32 master weights, Adam's two
    # moments and the fp32 gradient partition, 16 bytes per parameter (524 GB), without a margin.
    assert chosen.host_gb == pytest.approx(16 * arch.parameters() / GB) == pytest.approx(524, abs=1)
    with pytest.raises(DoesNotFit):
        fit(arch, job, completions_per_step=56, allow_offload=False)


@pytest.mark.parametrize("size", ["0.5B", "1.5B", "3B", "7B", "14B", "32B"])
def test_seed_004_layout_fits_every_size(size):
    """Seed 004: full weights, ZeRO-3 on 7 processes, per-device batch 1 × accumulation 8, 8192 tokens."""
    arch = architecture(f"Qwen/Qwen2.5-{size}-Instruct")
    job = TrainingJob(finetune="full", zero_stage=3, processes=7, micro_batch=1, sequence_length=8192)
    needs_offload = size == "32B"
    assert plan_training(arch, job).fits is not needs_offload
    assert plan_training(arch, dataclasses.replace(job, offload_optimizer=True)).fits
    chosen = fit(arch, job, completions_per_step=7 * 8)
    assert chosen.micro_batch * chosen.accumulation == 8
    assert chosen.offload_optimizer is needs_offload


@pytest.mark.parametrize(
    "sequence_length, micro_batch", [(1024, 8), (2048, 8), (4096, 8), (8192, 4), (16384, 2), (32768, 1)]
)
def test_micro_batch_shrinks_while_completions_per_step_stay_fixed(sequence_length, micro_batch):
    arch = architecture("Qwen/Qwen2.5-14B-Instruct")
    job = TrainingJob(finetune="full", zero_stage=3, processes=7, sequence_length=sequence_length)
    chosen = fit(arch, job, completions_per_step=56, allow_offload=False)
    assert (chosen.micro_batch, chosen.accumulation) == (micro_batch, 8 // micro_batch)
    assert chosen.micro_batch * chosen.accumulation * job.processes == 56
    assert chosen.fits
    # The next larger micro-batch would not fit: the choice is the largest that does.
    if micro_batch < 8:
        larger = plan_training(arch, dataclasses.replace(job, micro_batch=2 * micro_batch))
        assert not larger.fits


def test_seed_004_layout_on_a100_40_is_micro_1_times_8_with_offload():
    arch = architecture(QWEN_32B)
    job = TrainingJob(processes=7, sequence_length=8192, gpu=A100_40GB)
    chosen = fit(arch, job, completions_per_step=56)
    assert (chosen.micro_batch, chosen.accumulation, chosen.offload_optimizer) == (2, 4, True)


def test_refusal_names_the_numbers_and_what_would_help():
    arch = architecture(QWEN_32B)
    job = TrainingJob(finetune="full", zero_stage=3, processes=7, sequence_length=8192)
    with pytest.raises(DoesNotFit) as refused:
        fit(arch, job, completions_per_step=56, allow_offload=False, other_gpus=(A100_40GB, H100, H200))
    message = str(refused.value)
    assert "32.8B full training on 7 processes" in message
    assert "100.9 of 85.9 GB per GPU" in message  # an A100 80GB reports 81920 MiB
    assert "master_weights 18.7" in message and "optimizer 37.4" in message and "gradients 18.7" in message
    assert "models.NAME.finetuning: lora" in message
    assert "optimizer offload to the CPU" in message
    assert "a larger GPU (models.NAME.gpu_model: h200)" in message


def test_refusal_when_no_single_change_helps():
    arch = architecture(QWEN_32B)
    job = TrainingJob(finetune="full", zero_stage=0, processes=1, sequence_length=8192, gpu=T4)
    with pytest.raises(DoesNotFit, match=r"of 16.0 GB per GPU.*no single change"):
        fit(arch, job, completions_per_step=8, other_gpus=(A100_80GB,))


def test_more_processes_than_one_node_has_are_refused():
    with pytest.raises(DoesNotFit, match="9 training processes do not fit one node of 8 GPUs"):
        fit(TINY, TrainingJob(processes=9), completions_per_step=9)
    assert fit(TINY, TrainingJob(processes=9), completions_per_step=9, gpus_per_node=16).fits


def test_settings_are_validated():
    with pytest.raises(ValueError, match="offload_optimizer needs ZeRO-3"):
        TrainingJob(zero_stage=0, offload_optimizer=True)
    with pytest.raises(ValueError, match="finetune"):
        TrainingJob(finetune="qlora")
    with pytest.raises(ValueError, match=r"completions per step \(50\) do not split over 7"):
        fit(TINY, TrainingJob(processes=7), completions_per_step=50)


def test_32b_full_context_kv_cache_is_8_gib_per_sequence():
    arch = architecture(QWEN_32B)
    assert vllm_server_kv_cache_bytes(arch, max_model_len=32768, concurrent_sequences=1) == 8 * GIB
    # Halving max_model_len halves the cache the server must hold.
    assert vllm_server_kv_cache_bytes(arch, 16384, 1) == 4 * GIB


def test_vllm_server_32b_needs_two_gpus_for_its_full_context():
    arch = architecture(QWEN_32B)
    one = plan_vllm_server(arch, max_model_len=32768, concurrent_sequences=1, tensor_parallel=1, device=A100_80GB)
    # 65.5 GB of weights + 8.6 GB of cache + 2.0 GB of profiling peak + 0.5 of CUDA context exceed 0.9 × 80 GB.
    assert one.terms["weights"] == pytest.approx(65.5, abs=0.1)
    assert one.terms["kv_cache"] == pytest.approx(8 * GIB / GB)
    # vLLM's defaults off H100/H200: a profiling forward of 8192 tokens, sampling 256 sequences.
    assert one.terms["profile_peak"] == pytest.approx(
        (8192 * (5120 + 2 * 1024 + 3 * 27648 + 2 * 5120) * 2 + 256 * 152064 * 8) / GB
    )
    assert one.gpu_memory_gb == pytest.approx(72.0)
    assert not one.fits
    two = plan_vllm_server(arch, max_model_len=32768, concurrent_sequences=1, tensor_parallel=2, device=A100_80GB)
    assert two.terms["weights"] == pytest.approx(one.terms["weights"] / 2)
    assert two.fits
    # The 81920 MiB an A100 80GB reports hold it on one GPU, barely.
    reported = plan_vllm_server(arch, max_model_len=32768, concurrent_sequences=1, tensor_parallel=1)
    assert reported.fits and reported.gpu_memory_gb - reported.total_gb < 1.5
    # At 8192 tokens one GPU holds the weights and a few sequences' cache.
    assert plan_vllm_server(arch, max_model_len=8192, concurrent_sequences=2).fits


def test_local_config_json_wins_over_the_shipped_table(tmp_path):
    shipped = SHIPPED_SHAPES["Qwen/Qwen2.5-1.5B"]
    (tmp_path / "config.json").write_text(json.dumps({**shipped, "num_hidden_layers": 2}))
    assert architecture("Qwen/Qwen2.5-1.5B", tmp_path).num_hidden_layers == 2
    assert architecture("Qwen/Qwen2.5-1.5B", tmp_path / "absent").num_hidden_layers == 28
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 8}))
    with pytest.raises(ValueError, match="lacks 'num_hidden_layers'"):
        architecture("Qwen/Qwen2.5-1.5B", tmp_path)


def test_unknown_model_names_the_shipped_ones():
    with pytest.raises(ValueError, match="Qwen/Qwen2.5-1.5B"):
        architecture("org/unknown-model")


def test_the_gpus_memory_and_dtype_reach_the_plan():
    assert plan_training(TINY, TrainingJob(gpu=T4)).dtype == "fp16"  # Turing: no bf16
    assert plan_training(TINY, TrainingJob(gpu=A100_40GB)).dtype == "bf16"
    assert plan_training(TINY, TrainingJob(gpu=H200)).gpu_memory_gb == 141
    assert plan_training(TINY, TrainingJob(gpu=H100)).gpu_memory_gb == 80  # no reported total: the nominal size
    assert plan_training(TINY, TrainingJob(gpu=H100_REPORTED)).gpu_memory_gb == pytest.approx(85.52, abs=0.01)
    assert plan_training(TINY, TrainingJob()).gpu_memory_gb == pytest.approx(81920 * 2**20 / GB)  # the default GPU


@pytest.mark.parametrize("offload", [False, True])
@pytest.mark.parametrize("size", ["1.5B", "32B"])
def test_model_states_match_deepspeeds_zero3_estimator(size, offload):
    stage3 = pytest.importorskip("deepspeed.runtime.zero.stage3")
    arch = architecture(f"Qwen/Qwen2.5-{size}-Instruct")
    processes = 7
    host, device, _ = stage3.estimate_zero3_model_states_mem_needs(
        total_params=arch.parameters(),
        largest_layer_params=arch.largest_layer_parameters(),
        num_gpus_per_node=processes,
        num_nodes=1,
        cpu_offload=offload,
        cpu_offload_params=False,
        zero_init=True,
    )
    plan = plan_training(arch, TrainingJob(processes=processes, offload_optimizer=offload))
    states = ("weights", "master_weights", "gradients", "optimizer")
    gathered = 4 * arch.largest_layer_parameters()  # the estimator's largest layer; the prefetch bucket is not in it
    states_gb = sum(plan.terms[term] for term in states) + gathered / GB
    assert states_gb * GB == pytest.approx(device, rel=1e-6)
    if offload:
        # The estimator's host figure carries a 1.5 safety factor (additional_buffer_factor); the
        # plan counts the state itself and the job's other host memory on its own.
        assert plan.host_gb * GB == pytest.approx(host / 1.5, rel=1e-6)


def test_reported_figure_3b_layer_inputs_for_one_unsplit_step():
    """A reported run's figure: one micro-batch of 168 sequences of 2048 tokens kept ~50 GB of layer
    inputs at 3B."""
    arch = architecture("Qwen/Qwen2.5-3B-Instruct")
    layer_inputs = 168 * 2048 * arch.hidden_size * 2 * arch.num_hidden_layers
    assert layer_inputs / GB == pytest.approx(50.7, rel=0.01)
    saved = arch.activation_bytes(168, 2048)["saved_activations"]
    assert saved > layer_inputs
    assert arch.activation_bytes(1, 4096)["saved_activations"] == 2 * arch.activation_bytes(1, 2048)["saved_activations"]
    # One process cannot hold the 168 sequences at once; over 7 processes its 24 fit unsplit.
    assert not plan_training(arch, TrainingJob(processes=1, micro_batch=168, sequence_length=2048)).fits
    chosen = fit(arch, TrainingJob(processes=7, sequence_length=2048), completions_per_step=168)
    assert (chosen.micro_batch, chosen.accumulation) == (24, 1)


def test_vllm_server_tensor_parallelism_is_the_smallest_that_fits():
    arch = architecture(QWEN_32B)
    nominal = {"device": A100_80GB}  # 80e9 bytes, as if the card reported no more than its name says
    assert fit_vllm_server(arch, max_model_len=8192, concurrent_sequences=1, **nominal)[0] == 1
    assert fit_vllm_server(arch, max_model_len=32768, concurrent_sequences=1, **nominal)[0] == 2
    # 56 sequences of 32768 tokens need 56 × 8 GiB of cache: 4 GPUs are not enough, 8 are.
    tensor_parallel, plan = fit_vllm_server(arch, max_model_len=32768, concurrent_sequences=56, **nominal)
    assert tensor_parallel == 8 and plan.fits
    assert not plan_vllm_server(arch, 32768, 56, tensor_parallel=4, **nominal).fits
    with pytest.raises(DoesNotFit, match=r"128 sequences of 32768 tokens does not fit even at tensor parallelism 8"):
        fit_vllm_server(arch, max_model_len=32768, concurrent_sequences=128, **nominal)
    # Beside its share: its CUDA graphs and the NCCL buffers that receive the trainer's weights (shown,
    # not checked: estimates).
    assert plan.parts == {"cuda_graphs": 1.0, "nccl": 3.6} and "beside it: cuda_graphs 1.0, nccl 3.6" in plan.describe()


# ---------------------------------------------------------------- the job's layout on one node


def test_layout_prefers_fewer_gpus_then_offload_on_the_most():
    arch = architecture("Qwen/Qwen2.5-32B-Instruct")
    job = TrainingJob(finetune="full", sequence_length=2048)
    layout = plan_training_layout(arch, job, lambda n: 8 * n, server_gpus=1, server_max_model_len=8192)
    # 16 bytes per parameter over 7 processes is 75 GB of state: nothing fits without offload
    assert (layout.processes, layout.server_gpus, layout.gpus) == (7, 1, 8)
    assert layout.offload_optimizer and layout.zero_stage == 3 and layout.plan.fits
    assert layout.plan.host_gb == pytest.approx(arch.parameters() * 16 / 1e9)
    # 72 GB of the server's GPU less 65.5 GB of weights: about 3 sequences of 8192 tokens at 0.26 MB a token
    # 77.3 GB of the server's GPU (0.9 × 81920 MiB) less 65.5 GB of weights, 2.0 of profiling peak and
    # 0.5 of CUDA context:
    # 4 sequences of 8192 tokens at 0.26 MB a token
    assert layout.server_sequences == 4 and "room for 4 such sequences" in layout.describe()
    small = plan_training_layout(architecture("Qwen/Qwen2.5-1.5B"), TrainingJob(finetune="lora"), lambda n: 16 * n)
    assert (small.processes, small.zero_stage, small.offload_optimizer) == (1, 0, False)


def test_layout_keeps_the_settings_accumulation_and_names_it_in_the_plan():
    arch = architecture("Qwen/Qwen2.5-7B")
    layout = plan_training_layout(
        arch, TrainingJob(finetune="lora", sequence_length=4096), lambda n: 128, processes=1, settings_accumulation=2
    )
    assert layout.micro_batch * layout.plan.accumulation == 128
    assert layout.accumulation == 2 * layout.plan.accumulation
    assert f"micro-batch {layout.micro_batch} x accumulation {layout.accumulation}" in layout.describe()


def test_layout_that_fits_no_node_names_its_numbers_and_remedies():
    arch = architecture("Qwen/Qwen2.5-32B-Instruct")
    job = TrainingJob(finetune="full")
    with pytest.raises(DoesNotFit, match=r"does not fit.*a larger GPU \(models.NAME.gpu_model: a100_80gb") as error:
        plan_training_layout(arch, job, lambda n: 8 * n, processes=1, node=Node(gpu=A100_40GB), other_gpus=(A100_80GB,))
    assert "GB per GPU" in str(error.value)


def test_server_gets_the_tensor_parallelism_its_weights_need():
    arch = architecture("Qwen/Qwen2.5-32B-Instruct")
    layout = plan_training_layout(
        arch, TrainingJob(finetune="lora", gpu=A100_40GB), lambda n: 8 * n, server_gpus=1, server_max_model_len=8192,
        server_gpu_memory_utilization=0.85,
    )
    # 65.5 GB of weights do not fit 0.85 x 40 GB: the server spans 2 GPUs, or 4
    assert layout.server_gpus >= 2 and layout.server_plan.fits
    assert layout.gpus == layout.processes + layout.server_gpus <= 8


# ---------------------------------------------------------------- host memory and CPUs of the node


def test_layout_checks_the_nodes_host_memory_and_stops_naming_its_numbers():
    """A reported job: 32B all-weights GRPO on 8 GPUs offloads 524 GB of optimizer state; with the job's
    other host memory (16 GB per GPU, 4 GB per billion parameters) it needs 783 GB of the node."""
    arch = architecture(QWEN_32B)
    job = TrainingJob(finetune="full", sequence_length=8192)
    plan = lambda node: plan_training_layout(  # noqa: E731
        arch, job, lambda n: 8 * n, processes=7, server_gpus=1, server_max_model_len=8192, node=node, params_b=32.8
    )
    layout = plan(Node(memory_gb=1000, cpus=96, partition="gpu"))
    assert layout.offload_optimizer and layout.host_gb == pytest.approx(16 * 8 + 4 * 32.8 + 524.2, abs=0.5)
    assert "host memory 783 of 1000 GB, 64 of 96 CPUs (partition gpu)" in layout.describe()
    with pytest.raises(DoesNotFit) as refused:
        plan(Node(memory_gb=512, cpus=96, partition="gpu-small"))
    message = " ".join(str(refused.value).split())
    assert "needs 783 GB of host memory (259 GB for 8 GPUs and 32.8B of weights, 524 GB of offloaded optimizer state)" in message
    assert "of the node's 512 GB" in message and "partition gpu-small" in message and "models.NAME.finetuning: lora" in message
    # LoRA keeps the optimizer on the GPUs: the same node holds it.
    lora = TrainingJob(finetune="lora", sequence_length=8192)
    assert plan_training_layout(arch, lora, lambda n: 8 * n, node=Node(memory_gb=512)).host_gb < 512


def test_cpus_are_capped_at_the_nodes_and_the_sandbox_workers_follow():
    arch = architecture("Qwen/Qwen2.5-7B-Instruct")
    job = TrainingJob(finetune="full", sequence_length=4096)
    plan = lambda cpus: plan_training_layout(  # noqa: E731
        arch, job, lambda n: 8 * n, processes=7, server_gpus=1, node=Node(cpus=cpus), sandbox_workers=8
    )
    roomy = plan(256)
    assert (roomy.cpus, roomy.sandbox_workers) == (8 * 8 + 7 * 8, 8)  # 120: the reported 32B job's count
    smaller = plan(96)  # a 96-core node: all its CPUs, 2 per GPU kept, 80 left for 7 processes' workers
    assert (smaller.cpus, smaller.sandbox_workers) == (96, 8)
    tight = plan(40)
    assert (tight.cpus, tight.sandbox_workers) == (40, 3)
    with pytest.raises(DoesNotFit, match=r"at least 23 CPUs of its 20"):
        plan(20)


# ---------------------------------------------------------------- the workflow's settings reach the plan


@pytest.fixture
def shipped_config():
    from execrl.config import merged_config

    config = merged_config([], base=REPO / "config" / "config.yaml")
    config["cluster"]["partitions"] = str(REPO / config["cluster"]["partitions"])
    return config


def with_and_without_checkpointing(config: dict, method: str) -> tuple:
    """The 3B job's plan with its section's gradient checkpointing on, then off."""
    checkpointed = training_job_layout(config, "qwen2.5-3b-instruct", method)
    config[method]["gradient_checkpointing"] = False
    return checkpointed, training_job_layout(config, "qwen2.5-3b-instruct", method)


def saved_per_sequence(layout) -> float:
    return layout.plan.terms["saved_activations"] / layout.micro_batch


def test_grpo_without_gradient_checkpointing_keeps_every_layers_activations(shipped_config):
    """`grpo.gradient_checkpointing: false` is allowed and must be planned as such."""
    checkpointed, kept = with_and_without_checkpointing(shipped_config, "grpo")
    # Every layer's activations instead of 37 hidden states: over 10 times as much per sequence, so
    # the plan takes a smaller micro-batch.
    assert saved_per_sequence(kept) > 10 * saved_per_sequence(checkpointed)
    assert (kept.micro_batch, checkpointed.micro_batch) == (2, 8)
    arch = architecture("Qwen/Qwen2.5-3B-Instruct")
    eight = TrainingJob(finetune="lora", zero_stage=0, micro_batch=8, sequence_length=2048, scored_length=1024,
                        row_chunks=4, lora_dropout=0.05)
    without = plan_training(arch, dataclasses.replace(eight, gradient_checkpointing=False))
    # a reported estimate said ~130 GB more at micro-batch 8 than the checkpointed plan; this count says 112
    assert without.activations_gb - plan_training(arch, eight).activations_gb == pytest.approx(112, abs=2)


def test_a_grpo_round_no_process_count_splits_names_the_setting(shipped_config):
    shipped_config["grpo"].update(num_generations=7, prompts_per_step=3, steps_per_generation=8)
    with pytest.raises(ValueError, match=r"split over none of \[1, .*\] training processes \(with 1: "
                                         r"grpo.steps_per_generation \(8\) must divide .* \(21 = "):
        training_job_layout(shipped_config, "qwen2.5-3b-instruct", "grpo")


def test_dpo_without_gradient_checkpointing_is_planned_with_every_layers_activations(shipped_config):
    """`dpo.gradient_checkpointing` reaches DPO's plan as GRPO's setting reaches GRPO's."""
    checkpointed, kept = with_and_without_checkpointing(shipped_config, "dpo")
    assert saved_per_sequence(kept) > 10 * saved_per_sequence(checkpointed)


def test_code_games_opponent_is_counted_whole_on_every_gpu(shipped_config):
    shipped_config["models"]["qwen2.5-3b-instruct"]["training_processes"] = 2
    shipped_config["code_game"]["opponent"] = "base"
    grpo = training_job_layout(shipped_config, "qwen2.5-3b-instruct", "grpo")
    game = training_job_layout(shipped_config, "qwen2.5-3b-instruct", "code_game")
    params = architecture("Qwen/Qwen2.5-3B-Instruct").parameters()
    assert grpo.processes == game.processes == 2 and grpo.zero_stage == game.zero_stage == 3
    assert "opponent" not in grpo.describe().split("colocated vLLM")[0].replace("opponent 0.0", "")
    assert game.plan.terms["opponent"] == pytest.approx(2 * params / GB)  # not divided by the 2 processes
    assert f"opponent {2 * params / GB:.1f}" in game.describe()


def test_colocated_vllm_that_cannot_hold_the_weights_is_refused_naming_the_job_and_term(shipped_config):
    """14B full weights with colocated vLLM at 0.3 of each GPU: 29.5 GB of bf16 weights
    alone exceed the 25.8 GB share; tensor parallelism 2 over the training processes would hold them."""
    model = shipped_config["models"]["qwen2.5-3b-instruct"]
    model.update(source="Qwen/Qwen2.5-14B-Instruct", params_b=14.7, training_processes=8)
    shipped_config["grpo"].update(prompts_per_step=8, num_generations=8, steps_per_generation=8)
    with pytest.raises(DoesNotFit) as refused:
        training_job_layout(shipped_config, "qwen2.5-3b-instruct", "grpo")
    message = str(refused.value)
    assert "train qwen2.5-3b-instruct/grpo: colocated vLLM does not fit" in message
    assert "(term colocated_vllm)" in message and "weights 29.5" in message
    assert "grpo.vllm_tensor_parallel_size: 2" in message and "grpo.vllm_mode: server" in message
    shipped_config["grpo"]["vllm_tensor_parallel_size"] = 2
    layout = training_job_layout(shipped_config, "qwen2.5-3b-instruct", "grpo")
    assert layout.colocated_plan.fits and layout.colocated_plan.terms["weights"] == pytest.approx(29.5 / 2, abs=0.1)
    assert "; colocated vLLM in its share: " in layout.describe()


def test_dry_run_line_names_every_term():
    arch = architecture("Qwen/Qwen2.5-7B-Instruct")
    layout = plan_training_layout(arch, TrainingJob(finetune="full"), lambda n: 8 * n, processes=7, server_gpus=1,
                                  server_max_model_len=8192)
    line = layout.describe()
    for term in ("weights", "gradients", "optimizer", "saved_activations", "backward_peak", "lm_head", "recompute",
                 "deepspeed_buffers", "cuda_context", "nccl", "kv_cache", "profile_peak", "cuda_graphs"):
        assert f"{term} " in line, term
