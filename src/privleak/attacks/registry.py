"""Every attack PrivLeak runs, by name: one line each.

The way Opacus's ``accountants/registry.py`` maps names to accountants, this
maps attack names to :class:`~.base.AttackSpec`. The config selects attacks
by name or family (``attacks.select``); the audit's plan runs the providers of
the inputs each one declares (``needs``, ``reads``: :mod:`.inputs` keys), and
the runner skips those whose ``needs`` an audit lacks; the guard arm runs the
``text_only`` ones through the guard. Order is the order of tables and of the
run within a family.
"""

from __future__ import annotations

from collections.abc import Iterable

from . import (
    exposure,
    extraction,
    forget,
    one_run_canaries,
    phi_extraction,
    pii_extraction,
    pii_inference,
    pii_reconstruction,
)
from .membership import attacks as mia
from .membership import calibrated as cal
from .membership import client as client_mia
from .base import FAMILIES, AttackResult, AttackSpec
from .inputs import AUDIT_CANARIES, CANARIES, CLIENTS, FORGET_SET, PII, POPULATION, REFERENCE, SAMPLES, SCORES, SHADOWS

_MIA = ("max_mia_records", "bootstrap")
#: The inputs a membership attack on the reference model's pass reads: there only where the model has one.
_REF = (REFERENCE, SCORES, SCORES.of("reference"))
#: A PII-extraction attack's samples: its own model's pool and the reference model's, with its emissions.
_PII_SAMPLES = (SAMPLES, SAMPLES.of("reference"), REFERENCE, pii_extraction.BASE_EMISSIONS, pii_extraction.ANALYZER)

ATTACKS: dict[str, AttackSpec] = {s.name: s for s in (
    AttackSpec("loss", "membership", mia.loss, mia.MembershipResult, "LOSS", "Yeom et al. 2018", _MIA, needs=(SCORES,)),
    AttackSpec("loss_group", "membership", mia.loss_group, mia.MembershipResult, "LOSS (person)",
               "Yeom et al. 2018, per person / group", _MIA, needs=(SCORES,)),
    AttackSpec("zlib", "membership", mia.zlib, mia.MembershipResult, "zlib", "Carlini et al. 2021", _MIA, needs=(SCORES,)),
    AttackSpec("min_k", "membership", mia.min_k, mia.MembershipResult, "min-k%", "Shi et al. 2024",
               _MIA + ("min_k_percent",), needs=(SCORES,)),
    AttackSpec("min_k_pp", "membership", mia.min_k_pp, mia.MembershipResult, "min-k%++", "Zhang et al. 2024",
               _MIA + ("min_k_percent",), needs=(SCORES,)),
    AttackSpec("recall", "membership", cal.recall, mia.MembershipResult, "ReCaLL", "Xie et al. 2024", _MIA,
               needs=(SCORES, cal.NON_MEMBER_PREFIX)),
    AttackSpec("con_recall", "membership", cal.con_recall, mia.MembershipResult, "Con-ReCall", "Wang et al. 2024",
               _MIA, needs=(SCORES, cal.NON_MEMBER_PREFIX, cal.MEMBER_PREFIX)),
    AttackSpec("dc_pdd", "membership", cal.dc_pdd, mia.MembershipResult, "DC-PDD", "Zhang et al. 2024", _MIA,
               needs=(SCORES, cal.REFERENCE_CORPUS), reads=(cal.TOKEN_FREQUENCIES,)),
    AttackSpec("neighbourhood", "membership", cal.neighbourhood, mia.MembershipResult, "neighbours",
               "Mattern et al. 2023", _MIA + ("neighbours",), needs=(SCORES, cal.NEIGHBOURS)),
    AttackSpec("reference", "membership", mia.reference, mia.MembershipResult, "ref", "Carlini et al. 2021", _MIA,
               needs=_REF),
    AttackSpec("rmia", "membership", mia.rmia, mia.MembershipResult, "RMIA", "Zarifzadeh et al. 2024",
               _MIA + ("rmia_a",), needs=_REF + (POPULATION,)),
    AttackSpec("lira_online", "membership", mia.lira_online, mia.MembershipResult, "LiRA", "Carlini et al. 2022",
               _MIA + ("global_variance", "rmia_a"), needs=(SHADOWS, SCORES), reads=(mia.SHADOW_SCORES,)),
    AttackSpec("lira_offline", "membership", mia.lira_offline, mia.MembershipResult, "LiRA off", "Carlini et al. 2022",
               _MIA + ("global_variance", "rmia_a"), needs=(SHADOWS, SCORES), reads=(mia.SHADOW_SCORES,)),
    AttackSpec("rmia_shadows", "membership", mia.rmia_shadows, mia.MembershipResult, "RMIA shadows",
               "Zarifzadeh et al. 2024", _MIA + ("global_variance", "rmia_a"), needs=(SHADOWS, POPULATION, SCORES),
               reads=(mia.SHADOW_SCORES,)),
    AttackSpec("client_membership", "membership", client_mia.run, client_mia.ClientMembershipResult, "client MIA",
               "per-client mean reference score; McMahan et al. 2018's unit", ("clients", "bootstrap"),
               needs=(CLIENTS, SCORES)),
    AttackSpec("forget_membership", "membership", forget.forget_membership, forget.ForgetMembershipResult,
               "forget-set MIA", "the forgotten persons vs held-out non-members; Shi et al. 2024 (MUSE)",
               _MIA + ("min_k_percent", "rmia_a"), needs=(FORGET_SET, SCORES),
               reads=forget.MEMBERSHIP_READS),
    AttackSpec("exposure", "canaries", exposure.exposure, exposure.ExposureResult, "exposure", "Carlini et al. 2019",
               ("canary_candidates",), needs=(CANARIES,)),
    AttackSpec("one_run_canaries", "canaries", one_run_canaries.run, one_run_canaries.OneRunCanaryResult,
               "one-run audit canaries", "Steinke et al. 2023; Panda et al. 2025", ("one_run_canaries",),
               needs=(AUDIT_CANARIES,)),
    AttackSpec("canary_extraction", "canaries", extraction.canaries, extraction.CanaryExtractionResult,
               "canary extraction", "Carlini et al. 2019", needs=(CANARIES,), text_only=True),
    AttackSpec("prefix_extraction", "extraction", extraction.prefix, extraction.PrefixExtractionResult,
               "prefix extraction", "Carlini et al. 2023", ("prefix_records",)),
    AttackSpec("sampling_extraction", "extraction", extraction.sampling, extraction.SamplingExtractionResult,
               "sampling extraction", "Carlini et al. 2021", ("extraction_samples",), text_only=True,
               reads=(SAMPLES, REFERENCE, extraction.VERBATIM_INDEXES), draws=extraction.sampling_draws),
    AttackSpec("phi_extraction", "extraction", phi_extraction.run, phi_extraction.PhiExtractionResult,
               "PHI prompts", "PrivAI-Leak, counted by exact value", ("phi_records",), needs=(PII,), text_only=True),
    AttackSpec("pii_extraction", "pii", pii_extraction.run, pii_extraction.PiiExtractionResult, "PII extraction",
               "Lukas et al. 2023", ("pii_sizes",), needs=(PII,), text_only=True, reads=_PII_SAMPLES,
               draws=pii_extraction.draws),
    AttackSpec("pii_reconstruction", "pii", pii_reconstruction.run, pii_reconstruction.PiiReconstructionResult,
               "PII reconstruction", "Lukas et al. 2023", ("pii_sizes",), needs=(PII,), reads=(pii_extraction.ANALYZER,)),
    AttackSpec("pii_inference", "pii", pii_inference.run, pii_inference.PiiInferenceResult, "PII inference",
               "Lukas et al. 2023", ("pii_sizes",), needs=(PII, POPULATION)),
    AttackSpec("forget_pii_extraction", "pii", forget.forget_pii, forget.ForgetPiiResult, "forget-set PII",
               "Lukas et al. 2023 on the forgotten persons' own values", ("pii_sizes",), needs=(PII, FORGET_SET),
               text_only=True, reads=_PII_SAMPLES, draws=pii_extraction.draws),
)}



def register(spec: AttackSpec) -> AttackSpec:
    """Add an attack (a plug-in, or a test's toy attack); its name must be new. Its result type joins the
    types ``results.json`` accepts (by the result's ``kind``)."""
    if spec.name in ATTACKS and ATTACKS[spec.name] is not spec:
        raise ValueError(f"attack {spec.name!r} is registered twice")
    if spec.family not in FAMILIES:
        raise ValueError(f"attack {spec.name!r}: unknown family {spec.family!r}; use one of {', '.join(FAMILIES)}")
    ATTACKS[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    ATTACKS.pop(name, None)


def result_types() -> tuple[type[AttackResult], ...]:
    """Every registered attack's result type, once each, in registry order."""
    return tuple(dict.fromkeys(s.result for s in ATTACKS.values()))


def result_type(kind: str | None) -> type[AttackResult] | None:
    """The result type whose ``kind`` is ``kind`` (how results.json is read back)."""
    for cls in result_types():
        if cls.model_fields["kind"].default == kind:
            return cls
    return None


def select(names: Iterable[str] | None) -> list[AttackSpec]:
    """The attacks named, or of the families named, in registry order (None = all).

    Raises ValueError naming the unknown entry and the known ones.
    """
    if names is None:
        return list(ATTACKS.values())
    wanted = set()
    for n in names:
        if n in ATTACKS:
            wanted.add(n)
        elif n in FAMILIES:
            wanted.update(s.name for s in ATTACKS.values() if s.family == n)
        else:
            raise ValueError(f"unknown attack or family '{n}'; known: {', '.join(FAMILIES)}, {', '.join(ATTACKS)}")
    return [s for s in ATTACKS.values() if s.name in wanted]


def family(name: str) -> list[AttackSpec]:
    return [s for s in ATTACKS.values() if s.family == name]
