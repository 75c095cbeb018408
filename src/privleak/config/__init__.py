"""The audit configuration: typed, validated, loadable from YAML or TOML.

Precedence: built-in defaults < profile (``quick``/``full``/``gpu``/``smoke``) < config file <
command-line flags. Every number has a range (:mod:`privleak.core.limits` says
where each bound comes from). Every validation failure becomes one ``UserError`` line
that names the field and the fix.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

import tomllib
import yaml
from pydantic import Field, ValidationError, field_validator

from ..attacks.settings import DERIVED, AttackSettings, PiiSizes
from ..core import limits as L
from ..core.errors import UserError
from ..core.jsonlimits import nesting_depth
from ..policy import PROFILES, default_profile
from .sections import (  # noqa: F401  (the sections, importable from privleak.config as before)
    BestConfig,
    CanaryConfig,
    ComputeConfig,
    DPConfig,
    DPWeightsConfig,
    DataConfig,
    DedupConfig,
    DefenceConfig,
    EmbeddedModelConfig,
    ExecutorConfig,
    FederatedConfig,
    MAX_SEED,
    ModelConfig,
    OneRunConfig,
    RecommendationConfig,
    ReleaseConfig,
    ScrubConfig,
    ShadowConfig,
    SisaConfig,
    SyntheticConfig,
    TrainConfig,
    UnlearnGAConfig,
    UnlearningConfig,
    _Strict,
)

__all__ = ["MAX_SEED", "AuditConfig", "build_config", "resolve_delta"]


class AuditConfig(_Strict):
    seed: int = 0
    profile: Literal["quick", "lite", "full", "gpu", "smoke", "smollm2"] = "quick"
    # auto: the first CUDA GPU when one is visible, else the CPU; or cpu, cuda, cuda:N, mps.
    device: str = "auto"
    compute: ComputeConfig = ComputeConfig()
    # None: the profile's arms (policy.default_arms). Names are checked and made canonical by
    # privleak.arms.resolve before any work: the kinds are plug-ins, registered above this layer.
    arms: tuple[str, ...] | None = None
    # Settings of plug-in arm kinds, by kind name (each kind validates its own; built-in kinds read their sections).
    arm_options: dict[str, dict[str, Any]] = {}
    data: DataConfig = DataConfig()
    canaries: CanaryConfig = CanaryConfig()
    model: ModelConfig = ModelConfig()
    train: TrainConfig = TrainConfig()
    best: BestConfig = BestConfig()
    dp: DPConfig = DPConfig()
    dp_weights: DPWeightsConfig = DPWeightsConfig()
    attacks: AttackSettings = AttackSettings()
    defences: DefenceConfig = DefenceConfig()
    shadows: ShadowConfig = ShadowConfig()
    release: ReleaseConfig = ReleaseConfig()
    one_run: OneRunConfig = OneRunConfig()
    federated: FederatedConfig = FederatedConfig()
    unlearning: UnlearningConfig = UnlearningConfig()
    recommendation: RecommendationConfig = RecommendationConfig()
    # excluded from every dump: config.json, results.json and the cache keys never depend on it
    executor: ExecutorConfig = Field(ExecutorConfig(), exclude=True)

    @field_validator("attacks")
    @classmethod
    def _attacks_known(cls, v: AttackSettings) -> AttackSettings:
        if v.select is not None:
            from ..attacks.registry import select

            try:
                select(v.select)
            except ValueError as exc:
                raise ValueError(f"attacks.select: {exc}") from None
        return v

    @field_validator("attacks", mode="before")
    @classmethod
    def _attacks_own_fields(cls, v: Any) -> Any:
        if isinstance(v, dict):
            given = sorted(set(v) & set(DERIVED))
            if given:
                raise ValueError(f"attacks.{given[0]} is set by its own section ({DERIVED[given[0]]}); set it there")
        return v

    @field_validator("seed")
    @classmethod
    def _seed_range(cls, v: int) -> int:
        if not 0 <= v <= MAX_SEED:
            raise ValueError(f"seed must be a whole number from 0 to {MAX_SEED}, got {v}; e.g. 0")
        return v

    @field_validator("device")
    @classmethod
    def _device_form(cls, v: str) -> str:
        import re

        v = str(v).strip().lower()
        if not re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", v):
            raise ValueError(f"unknown device '{v}'; use auto, cpu, cuda, cuda:N (e.g. cuda:0) or mps")
        return v

    @field_validator("arms")
    @classmethod
    def _arms_given(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is not None and not v:
            raise ValueError("give at least one arm, e.g. [baseline, dp-8, scrub]")
        return v

    def attack_settings(self) -> AttackSettings:
        """What the attacks read: the ``attacks`` section plus the settings that live in other sections
        (:data:`privleak.attacks.settings.DERIVED`)."""
        return self.attacks.model_copy(update=dict(
            global_variance=self.shadows.global_variance, clients=(self.federated.clients, self.data.client_field),
            canary_candidates=self.canaries.candidates,
            one_run_canaries=(self.one_run.canaries, self.one_run.prefix_words, self.one_run.secret_words,
                              self.one_run.query_words),
            pii_sizes=PiiSizes.for_profile(self.profile)))

    def selected_attacks(self) -> list[str]:
        """Names of the attacks this audit runs: ``attacks.select`` minus the families switched off."""
        from ..attacks.registry import select

        off: set[str] = set()
        if not self.attacks.extraction:  # every generation attack but the PII ones (canary extraction too)
            off |= {"extraction", "canary_extraction"}
        if not self.attacks.pii:
            off.add("pii")
        return [s.name for s in select(self.attacks.select) if s.family not in off and s.name not in off]

    def compute_policy(self):
        """The resolved :class:`privleak.models.device.ComputePolicy` (a device that is not here: ``UserError``)."""
        from ..models.device import make_policy

        c = self.compute
        return make_policy(self.device, c.precision, c.gradient_checkpointing, c.memory_fraction)

    def fingerprint(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True)


def _gpu_possible() -> bool:
    """Whether a GPU could be visible here, without importing torch (seconds): on Linux only with a GPU driver's
    device node (NVIDIA, WSL's dxg, ROCm's kfd); elsewhere torch must be asked."""
    import sys

    if not sys.platform.startswith("linux"):
        return True
    return any(Path(p).exists() for p in ("/dev/nvidiactl", "/dev/nvidia0", "/proc/driver/nvidia", "/dev/dxg",
                                          "/dev/kfd"))


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


class _DuplicateKey(Exception):
    def __init__(self, key: str, line: int) -> None:
        super().__init__(key)
        self.key, self.line = key, line


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader refusing a key given twice in one mapping: PyYAML keeps the last one without a word, so
    a setting written twice would silently not be the one the user reads first (TOML refuses this itself)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: keys it brings in may be overridden
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: the base constructor says what is wrong with it
                break
            if duplicate:
                raise _DuplicateKey(str(key)[:80], key_node.start_mark.line + 1)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_config_file(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise UserError(f"--config {p}: file does not exist; pass a YAML or TOML audit config")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"--config {p}: not UTF-8 text; save the config as UTF-8 YAML or TOML") from None
    # Both parsers recurse per level (in Python: seconds before the RecursionError): deep flow nesting is refused first.
    if text.count("[") + text.count("{") > L.MAX_CONFIG_DEPTH and nesting_depth(text, L.MAX_CONFIG_DEPTH) > L.MAX_CONFIG_DEPTH:
        raise UserError(f"--config {p}: nested too deeply to be an audit config (over {L.MAX_CONFIG_DEPTH} levels); "
                        "fix the file")
    try:
        data = tomllib.loads(text) if p.suffix.lower() == ".toml" else yaml.load(text, Loader=_UniqueKeyLoader)
    except _DuplicateKey as exc:
        raise UserError(f"--config {p}: line {exc.line}: '{exc.key}' is given twice in the same section (YAML keeps "
                        "only the last one, silently); keep one of them") from None
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" line {where.line + 1}" if where is not None else ""
        raise UserError(f"--config {p}:{line} cannot be parsed ({str(exc).splitlines()[0]}); fix the syntax") from None
    except RecursionError:  # both parsers recurse per nesting level; no config nests more than a few
        raise UserError(f"--config {p}: nested too deeply to be an audit config; fix the file") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts (sys.int_info)
        raise UserError(f"--config {p}: a value cannot be read ({type(exc).__name__}); numbers in a config have at "
                        "most a few digits — fix the file") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"--config {p}: top level must be a mapping of sections (data, model, train, dp, …)")
    return data


def _describe(err: ValidationError) -> str:
    e = err.errors()[0]
    loc = ".".join(str(x) for x in e["loc"]) or "config"
    msg = e["msg"].removeprefix("Value error, ")
    if e["type"] == "extra_forbidden":
        return f"config field '{loc}' is not a known option; check its spelling against docs/guide/config.md"
    return f"config field '{loc}': {msg}"


def build_config(file_data: dict[str, Any] | None = None, overrides: dict[str, Any] | None = None) -> AuditConfig:
    """Defaults < profile < file < overrides, validated into an ``AuditConfig``."""
    layered: dict[str, Any] = {}
    file_data = file_data or {}
    overrides = overrides or {}
    profile = overrides.get("profile") or file_data.get("profile")
    if isinstance(profile, str):  # a choice, matched without regard to case like every config choice
        profile = profile.lower()
    if profile is None:
        device = overrides.get("device") or file_data.get("device") or "auto"
        device = device.lower() if isinstance(device, str) else device
        if device == "cpu" or (device == "auto" and not _gpu_possible()):
            profile = "quick"
        else:
            from ..models.device import resolve_device  # imports torch: only when the device must be looked at

            profile = default_profile(resolve_device(str(device)))
        if profile != "quick":  # recorded, so the config a run writes names its profile
            overrides = {**overrides, "profile": profile}
    if profile not in PROFILES:
        raise UserError(f"--profile {profile}: unknown profile; use {', '.join(repr(p) for p in PROFILES)}")
    layered = _merge(layered, PROFILES[profile])
    layered = _merge(layered, file_data)
    layered = _merge(layered, overrides)
    base = (layered.get("model") or {}).get("base")
    if isinstance(base, str) and base == "smollm2":  # a model PrivLeak knows by name: its package file
        from ..models.smollm2 import locate

        layered["model"] = {**layered["model"], "base": locate()}
    try:
        return AuditConfig.model_validate(layered)
    except ValidationError as err:
        raise UserError(_describe(err)) from None


def resolve_delta(cfg: AuditConfig, n_members: int) -> tuple[float, str | None]:
    """δ for the DP arms and a warning when the user's δ is not below 1/n."""
    if cfg.dp.delta is None:
        return 1.0 / (10.0 * n_members), None
    if cfg.dp.delta >= 1.0 / n_members:
        return cfg.dp.delta, (
            f"δ = {cfg.dp.delta:g} is not below 1/n = {1.0 / n_members:.3g}: a mechanism that publishes one "
            "random record outright satisfies such a guarantee; choose δ well below 1/n"
        )
    return cfg.dp.delta, None
