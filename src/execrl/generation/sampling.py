"""The one distribution every sampler draws from: GRPO's and SRRL's rollouts (TRL), the evaluation's
candidates (transformers or vLLM) and the policy samplers between training steps.

Each library fills what it is not told from somewhere else: transformers' `generate` from the
model's `generation_config.json` and then its own defaults (top-k 50), vLLM from the model's
generation config unless built with `generation_config="vllm"`, TRL from its own defaults (top-k
off). So every knob that shapes the distribution is passed explicitly, with the same values, to all
three; the model's generation config is read only when `use_model_generation_config` asks for it.

End of a completion: the tokenizer's end-of-sequence token and every one the model declares (its
generation config's `eos_token_id`, e.g. an end-of-turn token), TRL's rule for its rollouts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

SAMPLING_KEYS = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "use_model_generation_config")
"""The `generation` section's keys that are the sampling distribution (and GRPO's rollouts')."""

MODEL_CONFIG_KEYS = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty")
"""What `use_model_generation_config` takes from a model's generation config when it sets them."""

NEUTRAL_TRANSFORMERS_FIELDS = {
    "typical_p": 1.0,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
    "no_repeat_ngram_size": 0,
    "encoder_repetition_penalty": 1.0,
    "num_beams": 1,
}
"""transformers' other distribution-shaping fields, at the values that leave the distribution alone:
set explicitly, since a field left unset is filled from the model's generation config."""


@dataclass(frozen=True)
class SamplingSettings:
    """How one token is drawn from the model's next-token distribution."""

    temperature: float = 0.8
    """Logits divided by this before sampling (0: greedy; GRPO's rollouts need more than 0)."""
    top_k: int = 0
    """Sample among the k most likely tokens only (0: no top-k cut)."""
    top_p: float = 1.0
    """Sample among the most likely tokens whose probabilities sum to this (1.0: no nucleus cut)."""
    min_p: float = 0.0
    """Drop tokens less likely than this times the most likely token's probability (0: none)."""
    repetition_penalty: float = 1.0
    """Logits of tokens already in the prompt or completion divided by this when positive, multiplied
    when negative (1.0: none)."""
    use_model_generation_config: bool = False
    """True: the model's generation config replaces the settings above that it sets."""

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"generation.temperature must be at least 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"generation.top_k must be at least 0 (0: off), got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"generation.top_p must be in (0, 1], got {self.top_p}")
        if not 0 <= self.min_p <= 1:
            raise ValueError(f"generation.min_p must be in [0, 1], got {self.min_p}")
        if self.repetition_penalty <= 0:
            raise ValueError(f"generation.repetition_penalty must be above 0, got {self.repetition_penalty}")

    @classmethod
    def of(cls, section: dict) -> SamplingSettings:
        """The sampling keys of a settings object or section holding them (other keys ignored)."""
        return cls(**{key: section[key] for key in SAMPLING_KEYS if key in section})

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def at_temperature(self, temperature: float) -> SamplingSettings:
        """The same cuts at another temperature (the interval evaluation's own)."""
        return replace(self, temperature=temperature)

    def for_model(self, model_path: str) -> SamplingSettings:
        """These settings as they apply to the model at `model_path`: unchanged unless
        `use_model_generation_config`, else with what its generation config sets in their place."""
        if not self.use_model_generation_config:
            return self
        from transformers import GenerationConfig

        try:
            model_config = GenerationConfig.from_pretrained(model_path)
        except OSError:  # the model ships no generation config: nothing replaces these settings
            return self
        return self.with_model_config(model_config)

    def with_model_config(self, model_config) -> SamplingSettings:
        """These settings with the values a transformers GenerationConfig sets in their place."""
        taken = {key: getattr(model_config, key, None) for key in MODEL_CONFIG_KEYS}
        if getattr(model_config, "do_sample", None) is False:
            taken["temperature"] = 0.0
        return replace(self, **{key: value for key, value in taken.items() if value is not None})

    def trl_args(self) -> dict:
        """GRPOConfig's sampling arguments. min_p is passed as a number: TRL's None would let
        transformers fill it from the model's generation config."""
        return self._distribution()

    def transformers_kwargs(self) -> dict:
        """Every distribution-shaping field of transformers' GenerationConfig, none left unset."""
        kwargs = {
            "do_sample": not self.greedy,
            "temperature": self.temperature,
            "top_k": self.top_k,
            "top_p": self.top_p,
            "min_p": self.min_p,
            "repetition_penalty": self.repetition_penalty,
            **NEUTRAL_TRANSFORMERS_FIELDS,
        }
        if self.greedy:
            # Greedy decoding applies no sampling cut (transformers warns when one is set); the
            # repetition penalty still applies.
            for cut in ("temperature", "top_k", "top_p", "min_p", "typical_p", "epsilon_cutoff", "eta_cutoff"):
                kwargs[cut] = None
        return kwargs

    def generation_config(self, *, max_new_tokens: int, eos_token_ids: list[int], pad_token_id: int | None,
                          bos_token_id: int | None = None, num_return_sequences: int = 1):
        """A transformers GenerationConfig built from these settings alone (not from the model's)."""
        from transformers import GenerationConfig

        return GenerationConfig(
            **self.transformers_kwargs(),
            max_new_tokens=max_new_tokens,
            num_return_sequences=num_return_sequences,
            eos_token_id=list(eos_token_ids),
            pad_token_id=pad_token_id,
            bos_token_id=bos_token_id,
        )

    def vllm_kwargs(self) -> dict:
        """vLLM SamplingParams' sampling arguments (vLLM's top_k 0 is off, as here)."""
        return self._distribution()

    def _distribution(self) -> dict:
        """The five settings that define the sampling distribution, under the names TRL and vLLM share."""
        return {
            "temperature": self.temperature,
            "top_k": self.top_k,
            "top_p": self.top_p,
            "min_p": self.min_p,
            "repetition_penalty": self.repetition_penalty,
        }

    def describe(self) -> str:
        """One line for the report."""
        cuts = [
            f"temperature {self.temperature:g}" + (" (greedy)" if self.greedy else ""),
            f"top-k {self.top_k}" if self.top_k else "top-k off",
            f"top-p {self.top_p:g}" if self.top_p < 1 else "top-p off (1.0)",
            f"min-p {self.min_p:g}" if self.min_p else "min-p off",
            f"repetition penalty {self.repetition_penalty:g}" if self.repetition_penalty != 1 else "no repetition penalty",
        ]
        source = ("the model's generation config replaces what it sets" if self.use_model_generation_config
                  else "the model's generation config is not used")
        return (f"{', '.join(cuts)}; a completion ends at the tokenizer's or the model's end-of-sequence tokens; "
                f"{source}")


def eos_token_ids(tokenizer_eos: int | None, declared) -> list[int]:
    """The tokens that end a completion: the tokenizer's end-of-sequence token, then every one the
    model declares (`declared`: its generation config's `eos_token_id`, an int, a list or None)."""
    declared = [] if declared is None else [declared] if isinstance(declared, int) else list(declared)
    return declared if tokenizer_eos is None or tokenizer_eos in declared else [tokenizer_eos, *declared]


def model_eos_token_ids(model_path: str, tokenizer) -> list[int]:
    """`eos_token_ids` for the model at `model_path`, read as transformers would load it (its
    generation config, else its model config)."""
    from transformers import AutoConfig, GenerationConfig

    try:
        declared = GenerationConfig.from_pretrained(model_path).eos_token_id
    except OSError:
        declared = GenerationConfig.from_model_config(AutoConfig.from_pretrained(model_path)).eos_token_id
    return eos_token_ids(tokenizer.eos_token_id, declared)

