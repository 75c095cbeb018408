"""The HTML report of a run (``report.html``): one self-contained file from the typed results.

Inline CSS, inline SVG figures (matplotlib, Agg), no scripts and a
Content-Security-Policy that forbids every request, so it reads offline and
prints. Every section is a designed table or figure built from the fields of
:class:`privleak.results.AuditResults`; an attack the report has no special
layout for is still shown, from its result model's headline figures (each
beside its chance level and non-member floor).

PII is masked by default: every ground-truth value of the run's splits and
canaries, and SSN/e-mail/phone/MRN-shaped strings, wherever text from the
results is shown; ``show_pii=True`` reveals it under a warning banner.
"""

from __future__ import annotations

import hashlib
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from markupsafe import Markup

from ..attacks.base import FAMILIES, FAMILY_TITLES, AttackResult
from ..attacks.exposure import ExposureResult
from ..attacks.extraction import PrefixExtractionResult, SamplingExtractionResult
from ..attacks.phi_extraction import PhiExtractionResult
from ..attacks.pii_extraction import PiiExtractionResult
from ..attacks.pii_reconstruction import PiiReconstructionResult
from ..attacks.registry import ATTACKS
from ..core.errors import UserError
from ..core.io import write_text
from ..core.masking import PiiMasker
from ..core.terminal import escape_control
from ..data.canaries import Canary, known_pii, load_canaries
from ..data.records import read_jsonl
from ..results import CONTROL, ArmResult, AuditResults
from . import fmt, plots
from .console import guard_rows
from .schema import load_results

Masker = Callable[[str], str]
Block = dict[str, Any]
Section = dict[str, Any]


def _n(x: Any, spec: str = ".3f", title: str | None = None) -> dict[str, Any]:
    return {"text": fmt.num(x, spec), "cls": "num", "title": title}


def _t(text: str, title: str | None = None) -> dict[str, Any]:
    return {"text": text, "cls": "num", "title": title}


def table(columns: list[str], rows: list[list[Any]], caption: str | None = None, id: str | None = None) -> Block:
    return {"kind": "table", "columns": columns, "rows": rows, "caption": caption, "id": id}


def note(text: str) -> Block:
    return {"kind": "p", "cls": "note", "text": text}


def figure(svg: str, caption: str) -> Block:
    return {"kind": "figure", "svg": Markup(svg), "caption": caption}


def _attack_names(results: AuditResults, family: str) -> list[str]:
    present = {a for _, m in results.models() for a in m.attacks}
    return [s.name for s in ATTACKS.values() if s.family == family and s.name in present]


def _title(attack: str) -> str:
    spec = ATTACKS.get(attack)
    return f"{spec.title} ({spec.cite})" if spec and spec.cite else attack


def _with(results: AuditResults, attack: str, kind: type[AttackResult]) -> list[tuple[str, Any]]:
    return [(n, m.attacks[attack]) for n, m in results.models() if isinstance(m.attacks.get(attack), kind)]


# --------------------------------------------------------------------------- sections

def section_summary(results: AuditResults) -> Section:
    blocks: list[Block] = []
    b = results.blind_baseline
    if b is not None and b.shifted:
        # Here, not only under Warnings: every membership figure below must be read with it.
        blocks.append({"kind": "recommend", "cls": "none", "text": (
            f"Distribution shift: a classifier that never sees the model tells the evaluated members from non-members "
            f"(blind baseline AUC {b.auc:.3f} [{fmt.interval(b.auc_ci95)}]). Membership-inference AUCs here are not "
            "evidence of leakage or memorisation, and no claim that a DP guarantee is violated can rest on them; "
            "canary exposure and extraction counts do not depend on the split.")})
    rec = results.recommendation
    if rec is not None:
        blocks.append({"kind": "recommend", "cls": "" if rec.arm else "none", "text": f"{rec.text} {rec.policy}"})
    models = [(n, m) for n, m in results.models() if m.verdict is not None]
    if results.base_model is not None:
        models = [*models[1:], *models[:1]]  # the arms, then the control
    for name, m in models:
        v = m.verdict
        blocks.append({"kind": "verdict", "arm": name, "level": v.level, "label": v.label, "text": v.text,
                       "figures": "; ".join(v.figures)})
    return {"id": "summary", "title": "Summary", "blocks": blocks}


def _eps_cell(name: str, m: ArmResult) -> dict[str, Any]:
    p = m.privacy
    if m.weight_noise is not None:
        return _t(m.weight_noise.guarantee, title="DP-Weights: noise after training bounds nothing, since one record can "
                                                  "move the trained weights arbitrarily far; judge it by the attacks")
    if p is None:
        return _t("—" if name == CONTROL else "∞ (no DP)")
    if p.unit == "client":
        return _t(f"{p.epsilon:.3f} ({p.accountant}) per client; per record ≤ {fmt.num(p.epsilon_record, '.2f')}",
                  title=f"client-level ε (add/remove one client): {p.accountant.upper()}; RDP {fmt.num(p.epsilon_rdp)}, "
                        f"PLD {fmt.num(p.epsilon_pld)}, PRV {fmt.num(p.epsilon_prv)}. One record inside a client is a "
                        "replacement of that client: group privacy gives the record-level ε the audits are checked against")
    return _t(f"{p.epsilon:.3f} ({p.accountant})", title=f"{p.accountant.upper()} accountant; RDP {fmt.num(p.epsilon_rdp)}, "
                                                        f"PLD {fmt.num(p.epsilon_pld)}, PRV {fmt.num(p.epsilon_prv)}")


def _weight_scale(w: Any) -> str:
    upd = f", fine-tuning update RMS {w.update_rms:.3g} (σ/update {w.sigma / w.update_rms:.2g})" if w.update_rms else ""
    return f"weight RMS {w.weight_rms:.3g}{upd}; {w.n_parameters:,} parameters noised"


def section_arms(results: AuditResults) -> Section:
    cols = ["arm", "kind", "ε target", "ε accountant", "ε one-run (lower bound)", "ε empirical (lower bound)", "σ", "q",
            "steps", "δ", "L held-out (nats)", "ppl held-out", "ppl generic", "G (utility recovered)", "best MIA attack",
            "AUC [95% CI]", "TPR@1%FPR", "mean exposure (bits)", "secrets ranked first"]
    rows = []
    for name, m in results.models():
        p, emp, one = m.privacy, m.empirical_epsilon, m.one_run_epsilon
        att, best = m.best_membership()
        exp = m.attacks.get("exposure")
        exp = exp if isinstance(exp, ExposureResult) and exp.canaries else None
        steps = p.steps if p else (m.training.steps if m.training else None)
        one_cell = (_n(one.epsilon_steinke, ".2f", title=f"Steinke et al. 2023, {one.m} audit canaries, 95%")
                    if one is not None and one.available else _t("—"))
        rows.append([name, m.kind, _n(p.target_epsilon if p else None, "g"), _eps_cell(name, m), one_cell,
                     _n(emp.epsilon_lb if emp else None, title=f"from {emp.attack}" if emp else None),
                     _n(p.sigma if p else None) if not m.weight_noise else
                     _t(f"{m.weight_noise.sigma:g} (on weights)", title=_weight_scale(m.weight_noise)),
                     _n(p.sample_rate if p else None, ".4f"), _n(steps, "d"),
                     _n(p.delta if p else None, ".1e"), _n(m.utility.nll_non_members, ".3f"),
                     _n(m.utility.ppl_non_members, ".2f"), _n(m.utility.ppl_public, ".2f"),
                     _n(m.utility.gain_recovered, ".2f"),
                     ATTACKS[att].title if att in ATTACKS else (att or "—"),
                     _t(f"{best.auc:.3f} [{fmt.interval(best.auc_ci95)}]" if best else "—"),
                     _n(best.tpr_at_1pct_fpr if best else None),
                     _n(exp.mean_exposure if exp else None, ".2f"),
                     _t(f"{exp.n_ranked_first}/{len(exp.canaries)}" if exp else "—")])
    d = results.data
    data = (f"Data: {d.source}; {d.n_members:,} members ({d.n_canary_records} canary copies), {d.n_non_members:,} "
            f"non-members, {d.n_population:,} population, {d.n_public:,} public records; membership attacks compare "
            f"{d.mia_records_per_side} members with as many non-members.")
    if d.membership_design is not None:
        md = d.membership_design
        data += (f" Membership unit: the {md.unit} — one record per {md.unit} ({md.units[0]} member and {md.units[1]} "
                 f"non-member units), near-duplicate clusters spanning both sides dropped "
                 f"({md.near_duplicate_clusters_dropped}), sides matched by records per unit.")
        if not md.available:
            data += f" Empirical ε unavailable: {md.reason}."
    return {"id": "arms", "title": "Arms", "blocks": [table(cols, rows, id="arms-table"), note(data)]}


def section_tradeoff(results: AuditResults) -> Section | None:
    arms = {n: m for n, m in results.arms.items() if m.kind != "guard"}
    # G where the audit has a best reference (the utility measure that compares arms); perplexity otherwise.
    by_g = any(m.utility.gain_recovered is not None for m in arms.values())

    def utility(m: ArmResult) -> float | None:
        return m.utility.gain_recovered if by_g else m.utility.ppl_non_members

    pts = []
    for name, m in arms.items():
        _, best = m.best_membership()
        exp = m.attacks.get("exposure")
        pts.append({"name": name, "epsilon": m.epsilon, "auc": best.auc if best else None,
                    "auc_ci": best.auc_ci95 if best else None,
                    "exposure": exp.mean_exposure if isinstance(exp, ExposureResult) else None,
                    "utility": utility(m),
                    "one_run": m.one_run_epsilon.epsilon_steinke if m.one_run_epsilon and m.one_run_epsilon.available
                    else None, "federated": m.federation is not None})
    if not any(fmt.finite(p["auc"]) or fmt.finite(p["utility"]) for p in pts):
        return None
    control = results.base_model
    _, cbest = control.best_membership() if control else (None, None)
    cexp = control.attacks.get("exposure") if control else None
    ctrl = {"auc": cbest.auc if cbest else None, "utility": utility(control) if control else None,
            "exposure": cexp.mean_exposure if isinstance(cexp, ExposureResult) else None}
    label = "utility recovered G" if by_g else "held-out perplexity"
    what = ("utility recovered G = (L_base − L_arm)/(L_base − L_best) on held-out private text (1: the best "
            "non-private fine-tune's gain; 0: none)") if by_g else "held-out perplexity"
    return {"id": "tradeoff", "title": "Privacy–utility trade-off", "blocks": [figure(
        plots.privacy_utility(pts, ctrl, utility_label=label),
        "ε spent (accountant) on a log axis; arms without DP at ∞ on the right. Leakage (best MIA AUC with 95% CI, mean "
        f"canary exposure) and {what}; dotted lines: the base control (never saw the members). "
        "'ε ≥' beside a point: the arm's one-run lower bound (95%)."
        + (" Squares: federated arms (Flower); a fed-dp arm sits at its client-level ε." if any(p["federated"] for p in pts)
           else ""))] + federated_notes(results)}


def federated_notes(results: AuditResults) -> list[Block]:
    """What a federated arm protects and what it does not, in words, with its clients and rounds."""
    fed = {n: m for n, m in results.arms.items() if m.federation is not None}
    if not fed:
        return []
    parts = []
    for n, m in fed.items():
        f = m.federation
        sizes = sorted(f.client_sizes.values())
        line = (f"{n}: {f.strategy}, {f.clients} clients ({sizes[0]}–{sizes[-1]} records each), {f.rounds} rounds, "
                f"{f.sampling} sampling at {f.sample_rate:g}, {f.local_steps} local steps, {f.failures} failed replies")
        if m.privacy is not None:
            line += (f"; ε = {m.privacy.epsilon:.2f} per client, ≤ {fmt.num(m.privacy.epsilon_record, '.2f')} per record, "
                     f"σ = {m.privacy.sigma:.3f}, clip C = {m.privacy.max_grad_norm:g}")
        parts.append(line + ".")
    text = (" ".join(parts) + " What is protected: FedAvg alone protects nothing formally — the raw records stay at the "
            "clinics, but the final model is attacked here exactly like a centrally trained one, and every round's "
            "client updates (seen by the server) carry at least as much. DP-FedAvg bounds what the released model and "
            "the noised aggregates reveal about a whole clinic (client-level ε), hence about any patient in it. What is "
            "not: the server here is trusted — it sees each clinic's clipped but un-noised update before adding the "
            "noise (central DP), so an honest-but-curious server can still invert updates (Geiping et al. 2020); "
            "training-loss metrics the clients report are outside the ε. Secure aggregation (Bonawitz et al. 2017), "
            "out of scope here, would let the server see only the sum of the updates, removing per-clinic updates "
            "from its view; it adds no noise, so the released model's guarantee is unchanged, and distributed noise "
            "(each client adding its share) would be needed to keep the ε without trusting the server.")
    return [note(text)]


def section_membership(results: AuditResults) -> Section | None:
    names = _attack_names(results, "membership")
    if not names:
        return None
    rows = []
    b = results.blind_baseline
    for name, m in results.models():
        for att, r in m.membership().items():
            rows.append([name, _title(att), _n(r.auc), _t(fmt.interval(r.auc_ci95)), _n(r.tpr_at_1pct_fpr),
                         _t(fmt.interval(r.tpr_at_1pct_fpr_ci95)), _n(r.tpr_at_0_1pct_fpr), _n(r.n_members, "d")])
        if b is not None and m.membership():
            rows.append([name, _t("blind baseline (no model)" + (" — RIVALS THE ATTACKS" if name in b.rivalled else "")),
                         _n(b.auc), _t(fmt.interval(b.auc_ci95)), _n(b.tpr_at_1pct_fpr),
                         _t(fmt.interval(b.tpr_at_1pct_fpr_ci95)), _t("—"), _n(b.n_members, "d")])
    curves = {name: {ATTACKS[a].title: (r.roc.fpr, r.roc.tpr) for a, r in m.membership().items()}
              for name, m in results.models() if m.membership()}
    return {"id": "membership", "title": "Membership inference", "blocks": [
        table(["arm", "attack", "AUC", "AUC 95% CI", "TPR@1%FPR", "95% CI", "TPR@0.1%FPR", "members (= non-members)"], rows,
              caption="Every membership attack on every model; TPR at a fixed FPR is strict (< 1 %, < 0.1 %)."),
        figure(plots.roc_curves(curves), "True against false positive rate on log axes, which magnifies the low-FPR region "
                                         "that matters for privacy; the dashed diagonal is chance. One panel per model, one "
                                         "curve per attack (legend below the panels).")]
        + ([headline_table(results, "client_membership")]
           if any("client_membership" in m.attacks for _, m in results.models()) else [])}


def headline_table(results: AuditResults, attack: str) -> Block:
    """Any attack's table from its result model: one row per model, one column per headline figure."""
    cols: list[str] = []
    by_model: list[tuple[str, dict[str, str]]] = []
    for name, m in results.models():
        r = m.attacks.get(attack)
        if r is None:
            continue
        cells = {}
        for f in r.headline():
            if f.label not in cols:
                cols.append(f.label)
            cells[f.label] = fmt.figure(f, with_ci=True)
        by_model.append((name, cells))
    rows = [[name, *[_t(c.get(label, "—")) for label in cols]] for name, c in by_model]
    return table(["model", *cols], rows, caption=_title(attack) + " — each figure beside its chance level and non-member floor")


def section_canaries(results: AuditResults) -> Section | None:
    exps = [(n, e) for n, e in _with(results, "exposure", ExposureResult) if e.canaries]
    blocks: list[Block] = []
    if exps:
        reps = sorted({c.repeats for _, e in exps for c in e.canaries})
        first = exps[0][1]
        size = first.canaries[0].n_candidates
        blocks.append(figure(plots.canary_exposure({n: [(c.repeats, c.exposure) for c in e.canaries] for n, e in exps},
                                                   first.canaries[0].max_exposure, first.chance_exposure),
                             f"Exposure = log2(candidates) − log2(rank of the true secret among {size:,}). At the red line "
                             "the secret is the model's top guess among the candidates; the dotted line is what a model "
                             "that never saw it scores on average."))
        rows = [[n, *[_n(e.by_repeats().get(r), ".2f") for r in reps], _t(f"{e.n_ranked_first}/{len(e.canaries)}"),
                 _n(max(c.exposure_extrapolated for c in e.canaries), ".1f")] for n, e in exps]
        blocks.append(table(["model", *[f"{r}×" for r in reps], f"ranked first of {size:,}",
                             "max extrapolated exposure (bits)"], rows,
                            caption="Mean exposure (bits) by repetition count. Extrapolated exposure: the skew-normal tail "
                                    "beyond the candidates (Carlini et al. 2019 §4.3), capped at the secret space."))
    if "canary_extraction" in _attack_names(results, "canaries"):
        blocks.append(headline_table(results, "canary_extraction"))
    if not blocks:
        return None
    return {"id": "canaries", "title": "Canaries", "blocks": blocks}


def _phi_details(results: AuditResults) -> list[Block]:
    phis = _with(results, "phi_extraction", PhiExtractionResult)
    if not phis:
        return []
    cats = list(dict.fromkeys(c.label for _, r in phis for c in r.categories))
    counts = {n: {c.label: float(c.member_leaked) for c in r.categories} for n, r in phis}
    rows = [[n, *[_t(f"{r.category(c).member_leaked}/{r.category(c).n_member_values} vs "
                     f"{r.category(c).non_member_leaked}/{r.category(c).n_non_member_values}") if c in
                  {x.label for x in r.categories} else "—" for c in cats]] for n, r in phis]
    return [figure(plots.grouped_bars(counts, "member values leaked", "PHI values leaked by category"),
                   "Distinct identifying member values generated exactly (normalised full values, never single tokens), by "
                   "category."),
            table(["model", *cats], rows, caption="PHI prompts by category: member values leaked vs non-member values "
                                                  "\"leaked\" (the floor: same generator, never trained on)")]


def _detail_tables(results: AuditResults, attack: str) -> list[Block]:
    if attack == "phi_extraction":
        return _phi_details(results)
    if attack == "prefix_extraction":
        runs = _with(results, attack, PrefixExtractionResult)
        cells = list(dict.fromkeys((c.k, c.m) for _, r in runs for c in r.cells))
        rows = [[n, *[_t(f"{r.cell(k, m).members_extracted}/{r.cell(k, m).n_members} vs "
                         f"{r.cell(k, m).non_members_extracted}/{r.cell(k, m).n_non_members}") for k, m in cells]]
                for n, r in runs]
        return [table(["model", *[f"k={k}→{m}" for k, m in cells]], rows,
                      caption="Prefix extraction: members reproduced verbatim vs non-members (greedy, k prompt tokens → m)")]
    if attack == "sampling_extraction":
        runs = _with(results, attack, SamplingExtractionResult)
        metrics = list(dict.fromkeys(x.metric for _, r in runs for x in r.rankings))
        rows = []
        for n, r in runs:
            by = {x.metric: x for x in r.rankings}
            rows.append([n, _t(f"{r.n_unique}/{r.n_samples}"),
                         *[_t(f"{by[x].member_only_hits} vs {by[x].non_member_only_hits}") if x in by else "—"
                           for x in metrics]])
        return [table(["model", "unique samples", *[f"top-100 by {x}" for x in metrics]], rows,
                      caption="Sampling extraction (Carlini et al. 2021): samples with a member-only ≥ 50-character window "
                              "vs the floor (non-member-only windows), per ranking")]
    if attack == "pii_extraction":
        runs = _with(results, attack, PiiExtractionResult)
        buckets = list(dict.fromkeys(b.bucket for _, r in runs for b in r.by_duplicates))
        rows = []
        for n, r in runs:
            by = {b.bucket: b for b in r.by_duplicates}
            rows.append([n, *[_t(f"{by[b].extracted}/{by[b].n_values}") if b in by else "—" for b in buckets]])
        return [table(["model", *[f"seen {b}×" for b in buckets]], rows,
                      caption="PII extraction by the number of training records carrying the value (Lukas et al. §VI-B: "
                              "duplicated PII leaks more)")]
    if attack == "pii_reconstruction":
        runs = _with(results, attack, PiiReconstructionResult)
        labels = list(dict.fromkeys(c.label for _, r in runs for c in r.categories))
        rows = [[n, *[_t(f"{fmt.pct(r.category(lab).accuracy)} (floor {fmt.pct(r.category(lab).non_member_accuracy)})")
                      if lab in {c.label for c in r.categories} else "—" for lab in labels]] for n, r in runs]
        return [table(["model", *labels], rows, caption="PII reconstruction accuracy by type")]
    return []


def section_family(results: AuditResults, family: str) -> Section | None:
    names = _attack_names(results, family)
    if not names:
        return None
    blocks: list[Block] = []
    for a in names:
        blocks.append({"kind": "h3", "text": _title(a)})
        blocks.append(headline_table(results, a))
        blocks += _detail_tables(results, a)
    return {"id": family, "title": FAMILY_TITLES[family], "blocks": blocks}


def section_defences(results: AuditResults) -> Section | None:
    rows = []
    for n, arm in results.arms.items():
        d = arm.defences
        if d is None:
            continue
        q = d.scrub.quality.overall if d.scrub and d.scrub.quality else None
        left = d.scrub.left_in_training() if d.scrub else None
        copies = (d.dedup.canary_copies or {}) if d.dedup else {}
        rows.append([n, _n(q.recall if q else None), _n(q.precision if q else None),
                     _t(f"{left[0]} of {left[1]}" if left else "—"),
                     _t(f"{d.dedup.n_removed} of {d.dedup.n_in}" if d.dedup else "—"),
                     _t(f"{sum(c.after for c in copies.values())} of {sum(c.before for c in copies.values())}" if copies else "—"),
                     _n(arm.n_train_records, "d")])
    if not rows:
        return None
    blocks = [table(["arm", "scrubber recall", "scrubber precision", "identifying PII left in training",
                     "records removed by dedup", "canary copies after dedup", "records trained on"], rows,
                    caption="Span-level recall/precision of the scrubber on the members' ground-truth PII; values still "
                            "present in the text the arm was trained on.")]
    scrub = next((a.defences.scrub for a in results.arms.values() if a.defences and a.defences.scrub
                  and a.defences.scrub.quality), None)
    if scrub is not None:
        rows = [[lab, _n(q.support, "d"), _n(q.recall), _n(q.precision), _n(q.n_residual, "d")]
                for lab, q in scrub.quality.per_type.items()]
        blocks.append(table(["type", "ground-truth spans", "recall", "precision", "values left after scrubbing"], rows,
                            caption=f"Scrubber quality per type (mode {scrub.mode})"))
    return {"id": "defences", "title": "Data defences", "blocks": blocks}


def section_guard(results: AuditResults) -> Section | None:
    name = next((n for n, a in results.arms.items() if a.kind == "guard" and a.guard), None)
    if name is None:
        return None
    arm = results.arms[name]
    rows = []
    for attack, unit, before, after, stopped in guard_rows(results, name):
        iv = arm.guard.interventions.get(attack)
        rows.append([_title(attack), unit, _n(before, "d"), _n(after, "d"), _t(fmt.pct(stopped)),
                     _t(f"{iv.outputs_intervened}/{iv.outputs_checked} ({iv.outputs_blocked} blocked)" if iv else "—")])
    fp = arm.guard.false_positives

    def rate_row(label: str, r: Any) -> list[Any]:
        ci = f"{fmt.pct(r.ci95[0])}–{fmt.pct(r.ci95[1])}" if r.ci95 else "—"
        return [label, _t(f"{r.k}/{r.n}"), _t(fmt.pct(r.rate)), _t(ci)]

    fprows = [rate_row("any intervention", fp.overall), rate_row("blocked", fp.blocked)]
    fprows += [rate_row(f"by reason: {k}", v) for k, v in fp.by_reason.items()]
    fprows += [rate_row(f"from {k} prompts", v) for k, v in fp.by_source.items()]
    g = arm.guard.guard
    desc = (f"Guard: blocks ≥ {g.get('threshold', '?')}-character verbatim training windows, redacts PII "
            f"({', '.join(g.get('pii_labels', []))}), never lets a canary secret or a listed member value out; "
            f"blocked outputs reach the attacker redacted. Benign output: {fp.n_benign} of {fp.n_generated} sampled "
            f"continuations of non-member and public prefixes ({fp.excluded_member_pii} excluded for holding a member "
            f"value, {fp.excluded_member_window} for a member window).")
    examples = [[", ".join(e.reasons), "yes" if e.allowed else "no", {"text": e.text, "cls": "example"}]
                for e in arm.guard.false_positive_examples]
    blocks = [note(desc),
              table(["attack", "leaked item", "without guard", "with guard", "stopped", "outputs changed"], rows,
                    caption=f"The {arm.serves} model's extraction leaks with and without the guard"),
              table(["false positives on benign output", "k/n", "rate", "95% CI (Clopper–Pearson)"], fprows)]
    if examples:
        blocks.append(table(["reasons", "allowed (redacted)", "benign output the guard changed (masked)"], examples))
    return {"id": "guard", "title": "Output guard", "blocks": blocks}


def section_empirical(results: AuditResults) -> Section | None:
    rows, plot_rows = [], []
    for name, m in results.arms.items():
        emp = m.empirical_epsilon
        if emp is None:
            continue
        acc = m.epsilon
        if m.weight_noise is not None:
            check = f"no DP claim to check ({m.weight_noise.guarantee})"
        elif acc is None:
            check = "no DP claim to check"
        elif emp.exceeds_accountant or emp.epsilon_lb > acc + 1e-9:
            check = "VIOLATION: lower bound above the accountant's ε — the DP guarantee does not hold; check the implementation"
        else:
            check = "ok: below the accountant's ε"
        if emp.dp_bound is not None:
            check += ("; operating points within TPR ≤ e^ε·FPR + δ" if emp.dp_bound.ok
                      else f"; VIOLATION of TPR ≤ e^ε·FPR + δ (max excess {emp.dp_bound.max_excess:.3g})")
        b = emp.by_attack[emp.attack]
        acc_cell = _t(f"{acc:.3f}") if acc is not None else _eps_cell(name, m)
        rows.append([name, acc_cell, _n(emp.epsilon_lb),
                     ATTACKS[emp.attack].title if emp.attack in ATTACKS else emp.attack,
                     _t(f"TPR ≥ {b.tpr_lo:.3f}, FPR ≤ {b.fpr_hi:.3f} ({b.n_pos_eval} + {b.n_neg_eval} held out)"),
                     _n(emp.alpha, "g"), _n(emp.delta, ".1e"), check])
        plot_rows.append((name, acc, emp.epsilon_lb, None))
    if not rows:
        return None
    procedure = next(m.empirical_epsilon.procedure for m in results.arms.values() if m.empirical_epsilon)
    return {"id": "empirical-epsilon", "title": "Empirical ε vs accountant ε", "blocks": [
        figure(plots.epsilon_compare(plot_rows), "The accountant's ε is a proven upper bound; the empirical ε, from an "
                                                 "attack's TPR/FPR with confidence bounds, is a lower bound. A lower bound "
                                                 "above the upper bound means a bug."),
        table(["arm", "accountant ε", "empirical ε (lower bound)", "attack", "held-out operating point", "α", "δ", "check"],
              rows),
        note(f"Procedure: {procedure}.")]}


def section_release(results: AuditResults) -> Section | None:
    rel = results.data_release
    if rel is None:
        return None
    blocks: list[Block] = []
    if rel.summary is not None:
        s = rel.summary
        rows = [[q.name, q.mechanism, _n(q.sensitivity, ".3g"), _n(q.noise_sd, ".3g"), _n(q.epsilon_alone),
                 _t(", ".join(f"{lab}: {v:g}" if len(q.labels) > 1 else f"{v:g}" for lab, v in zip(q.labels, q.values)))]
                for q in s.queries]
        if s.systolic_mean is not None:
            rows.append(["systolic mean (mmHg)", "post-processing", _t("—"), _t("—"), _n(0.0), _t(f"{s.systolic_mean:.1f}")])
        blocks += [table(["statistic", "mechanism", "sensitivity", "noise sd", "ε alone", "released values"], rows,
                         caption=f"Data summary of the members under ({s.epsilon:.3f}, {s.delta:.1e})-DP — {s.accountant}; "
                                 f"basic composition would say ε = {s.epsilon_basic_composition:.3f}. Unit: {s.unit}."),
                   note("; ".join(s.notes) + ".")]
    if rel.ldp_terms is not None:
        lt = rel.ldp_terms
        terms = ", ".join(f"{x} ({v:g})" for x, v in lt.terms) or "none above the noise threshold"
        blocks.append(note(f"Frequent member terms learned under {lt.epsilon:g}-local DP ({lt.method.upper()}, k = {lt.k}, "
                           f"m = {lt.m}; {lt.n_users:,} members reporting, {lt.n_candidates:,} candidates from "
                           f"{lt.candidates_from}; listed only above {lt.threshold:.1f}, the noise level no unused candidate "
                           f"reaches with 95 % probability): {terms}. "
                           f"Rule: {lt.rule}."))
    blocks.append(note(f"Total ε spent on these releases: {rel.epsilon_total:g} (summary + local-DP terms, basic composition)."))
    return {"id": "release", "title": "Released under differential privacy", "blocks": blocks}


def section_one_run(results: AuditResults) -> Section | None:
    rows, plot_rows = [], []
    for name, m in results.models():
        one = m.one_run_epsilon
        if one is None:
            continue
        acc = m.epsilon
        canary = m.attacks.get("one_run_canaries")
        auc = _n(getattr(canary, "auc", None))
        if not one.available:
            rows.append([name, _t(f"{acc:.3f}" if acc is not None else "—"), _t("unavailable"), _t("—"), _t("—"), auc,
                         _t(one.reason)])
            continue
        if m.kind == "control":
            check = "control: never saw the canaries (the bound's floor)"
        elif acc is None:
            check = "no DP claim to check"
        elif one.exceeds_accountant:
            check = "DP GUARANTEE VIOLATED: the lower bound is above the accountant's ε"
        else:
            check = "ok: below the accountant's ε"
        best = one.best
        acc_cell = _t(f"{acc:.3f}") if acc is not None else _t("—" if m.kind == "control" else "∞ (no DP)")
        rows.append([name, acc_cell, _n(one.epsilon_steinke),
                     _n(one.epsilon_fdp), _t(f"{best.correct}/{best.guesses} right (top {best.k_in}"
                                              + (f", bottom {best.k_out}" if best.k_out else "") + ")" if best else "—"),
                     auc, check])
        if m.kind != "control":
            plot_rows.append((name, acc, one.epsilon_steinke, None))
    if not rows:
        return None
    first = next((m.one_run_epsilon for _, m in results.models() if m.one_run_epsilon and m.one_run_epsilon.available),
                 None)
    if first is None:  # every arm's bound unavailable (e.g. fewer canaries than it needs): the rows say why
        return {"id": "one-run", "title": "One-run DP audit (canaries)", "blocks": [table(
            ["arm", "accountant ε", "one-run ε ≥ (Steinke)", "one-run ε ≥ (Gaussian f-DP)", "guesses",
             f"{_title('one_run_canaries')}: AUC in vs out", "check"], rows)]}
    blocks = []
    if plot_rows:
        blocks.append(figure(plots.epsilon_compare(plot_rows), "Accountant ε (proven upper bound) beside the one-run lower "
                                                               "bound (95%); a lower bound above the upper bound means the "
                                                               "DP step is broken."))
    blocks += [
        table(["arm", "accountant ε", "one-run ε ≥ (Steinke)", "one-run ε ≥ (Gaussian f-DP)", "guesses",
               f"{_title('one_run_canaries')}: AUC in vs out", "check"], rows),
        note(f"{first.m} audit canaries (random rare-word sequences, Panda et al. 2025), each added to every trained "
             f"model's data with probability ½ ({first.n_included} in); score: {first.score} on every token after the first. The "
             "auditor guesses 'in' for the top-k scores (and 'out' for the bottom k), k from a fixed grid with a union "
             f"bound (α = {first.alpha:g} overall), δ = the arm's. Steinke, Nasr & Jagielski 2023 hold for any (ε, δ)-DP "
             "training and decide the check; the f-DP bound (Mahloujifar, Melis & Chaudhuri 2024) assumes the "
             "Gaussian trade-off curve of the same (ε, δ).")]
    return {"id": "one-run", "title": "One-run DP audit (canaries)", "blocks": blocks}


def section_people(results: AuditResults) -> Section | None:
    rows = []
    for name, m in results.arms.items():
        for p in m.exposed_people[:5]:
            if not p.flagged_by:
                continue
            rows.append([name, _t(p.id), _t(p.name or "—"), _n(p.records, "d"),
                         _t(", ".join(_title(a) for a in p.flagged_by)), _n(p.percentile, ".3f")])
    if not rows:
        return None
    unit = results.data.membership_design.unit if results.data.membership_design else "person"
    return {"id": "people", "title": "Most exposed individuals", "blocks": [
        table(["arm", f"{unit} (masked id)", "name (masked)", "records", "attacks that flag them at ≤ 1% FPR",
               "highest percentile among non-members"], rows),
        note("An aggregate AUC hides the people at risk: these are the evaluated members (one record per "
             f"{unit}) that the most attacks single out at a threshold with at most 1% false alarms on the "
             "non-members, up to five per arm. Ids are salted hashes; names are masked.")]}


def section_tests(results: AuditResults) -> Section | None:
    if not results.statistical_tests:
        return None
    rows = [[k, _t(f"{c.k1}/{c.n1}"), _t(f"{c.k2}/{c.n2}"), _n(c.diff), _t(fmt.interval(c.diff_ci95)), _n(c.cohens_h),
             _n(c.fisher_p, ".3g"), _n(c.chi2_p, ".3g")] for k, c in results.statistical_tests.items()]
    return {"id": "tests", "title": "Statistical tests", "blocks": [table(
        ["comparison", "arm 1", "arm 2", "difference", "95% CI (Newcombe)", "Cohen's h", "Fisher p", "χ² p (Yates)"], rows)]}


def section_examples(results: AuditResults, canaries: dict[str, Canary], mask: Masker, show_pii: bool) -> Section | None:
    blocks: list[Block] = []
    for name, m in results.arms.items():
        rows: list[list[Any]] = []
        exp = m.attacks.get("exposure")
        if isinstance(exp, ExposureResult):
            for c in exp.canaries:
                if c.rank <= 1:
                    src = canaries.get(c.canary_id)
                    text = src.text() if src else "(canary text not available: render with the run directory)"
                    rows.append(["canary ranked first", {"text": mask(text), "cls": "example"}, _n(c.repeats, "d"),
                                 f"rank {c.rank:g} of {c.n_candidates:,}"])
        samp = m.attacks.get("sampling_extraction")
        if isinstance(samp, SamplingExtractionResult):
            rows += [["sampling extraction", {"text": mask(e.text), "cls": "example"}, "—", f"{e.length}-char member window"]
                     for e in samp.examples]
        phi = m.attacks.get("phi_extraction")
        if isinstance(phi, PhiExtractionResult):
            rows += [["PHI prompt", {"text": mask(e.prompt + " ▸ " + e.completion), "cls": "example"}, "—", e.label]
                     for e in phi.examples]
        pii = m.attacks.get("pii_extraction")
        if isinstance(pii, PiiExtractionResult):
            rows += [["PII extraction", {"text": e.value_masked, "cls": "example"}, _n(e.duplicates, "d"), e.label]
                     for e in pii.examples]
        if rows:
            blocks.append({"kind": "h3", "text": f"{name} ({len(rows)})"})
            blocks.append(table(["source", "leaked text", "copies in training", "how"], rows[:50]))
            if len(rows) > 50:
                blocks.append(note(f"First 50 of {len(rows)} shown."))
    if not blocks:
        return None
    head = ("PII is shown UNMASKED (--show-pii)." if show_pii else
            "PII is masked: every ground-truth PII value of the run's splits and canaries, and anything shaped like an SSN, "
            "e-mail, phone number or MRN. Rerun `privleak report RUN_DIR --show-pii` to reveal it.")
    return {"id": "examples", "title": "Examples of leaked text", "blocks": [note(head), *blocks]}


def _compact_json(obj: Any) -> str:
    """Indented JSON with lists of scalars kept on one line."""
    text = json.dumps(obj, indent=2, ensure_ascii=False)
    return re.sub(r"\[\s*([^\[\]{}]*?)\s*\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]" if m.group(1) else "[]", text)


def section_repro(results: AuditResults, source: str, digest: str | None) -> Section:
    cfg = results.config
    facts = [["schema version", results.schema_version], ["tool", f"{results.tool.name} {results.tool.version}"],
             ["seed", str(cfg.get("seed", "—"))], ["profile", str(cfg.get("profile", "—"))], ["results file", source]]
    if digest:
        facts.append(["results sha256", digest])
    blocks: list[Block] = [table(["", ""], facts)]
    if results.warnings:
        blocks += [{"kind": "h3", "text": "Warnings"}, {"kind": "list", "cls": "warnings", "items": list(results.warnings)}]
    if results.versions:
        blocks.append(table(["package", "version"], [[k, v] for k, v in results.versions.items()], caption="Package versions"))
    if results.durations_s:
        dur = results.durations_s
        stages = [[k, _n(v, ".1f")] for k, v in dur.items() if k.count("/") <= 1]
        total = sum(v for k, v in dur.items() if fmt.finite(v) and k.count("/") <= 1)
        blocks.append(table(["stage", "seconds"], stages + [["total", _n(total, ".1f")]],
                            caption="Durations per stage (not reproducible; per-attack splits are in results.json)"))
    blocks += [{"kind": "h3", "text": "Configuration"}, {"kind": "pre", "text": _compact_json(cfg)},
               note("Everything in results.json except durations is identical for the same config and seed.")]
    return {"id": "reproducibility", "title": "Reproducibility", "blocks": blocks}


# --------------------------------------------------------------------------- rendering

def template() -> Any:
    import jinja2

    text = resources.files("privleak.report").joinpath("templates/report.html.j2").read_text(encoding="utf-8")
    env = jinja2.Environment(autoescape=True, undefined=jinja2.Undefined)
    return env.from_string(text)


def run_inputs(run_dir: Path | None, show_pii: bool) -> tuple[Masker, dict[str, Canary]]:
    """The masker of a run's ground-truth PII and its canaries by id (both empty without a readable run directory)."""
    splits, canaries = [], []
    if run_dir is not None and (run_dir / "splits").is_dir():
        for name in ("members", "non_members", "population", "public"):
            path = run_dir / "splits" / f"{name}.jsonl"
            try:
                splits.append(read_jsonl(path) if path.is_file() else [])
            except (OSError, ValueError, KeyError, TypeError):
                continue
        try:
            canaries = load_canaries(run_dir / "splits" / "canaries.json")
        except UserError:
            canaries = []
    mask: Masker = (lambda s: s) if show_pii else PiiMasker(known_pii(splits, canaries)).mask
    return mask, {c.canary_id: c for c in canaries}


def render_report(results: AuditResults, run_dir: str | Path | None = None, show_pii: bool = False,
                  source: str | None = None) -> str:
    """The HTML report of one run (a self-contained page) from its typed results."""
    rd = Path(run_dir) if run_dir is not None else None
    mask, canaries = run_inputs(rd, show_pii)
    digest = None
    if rd is not None and (rd / "results.json").is_file():
        digest = hashlib.sha256((rd / "results.json").read_bytes()).hexdigest()
    src = source or (str(rd / "results.json") if rd is not None else "results.json")
    sections = [section_summary(results), section_arms(results), section_tradeoff(results), section_membership(results),
                section_canaries(results), *[section_family(results, f) for f in FAMILIES if f not in ("membership", "canaries")],
                section_defences(results), section_guard(results), section_one_run(results), section_people(results),
                section_empirical(results), section_release(results),
                section_tests(results),
                section_examples(results, canaries, mask, show_pii), section_repro(results, src, digest)]
    sections = [s for s in sections if s]
    title = f"PrivLeak audit — {rd.name if rd is not None else 'run'}"
    meta = [f"{len(results.arms)} arm(s): {', '.join(results.arms)}", f"data: {results.data.source}",
            f"seed {results.config.get('seed', '—')}"]
    if results.recommendation is not None and results.recommendation.arm:
        meta.append(f"recommended: {results.recommendation.arm}")
    return template().render(title=title, meta=meta, sections=sections, show_pii=show_pii,
                             tool_version=results.tool.version, source=src)


def write_report(run_dir: str | Path, show_pii: bool = False, out: str | Path | None = None) -> Path:
    """Render ``RUN_DIR/results.json`` to ``report.html`` (or ``out``); returns the path written."""
    rd = Path(run_dir).expanduser()
    results = load_results(rd)
    base = rd if rd.is_dir() else rd.parent
    html = render_report(results, base, show_pii=show_pii, source=str(rd if rd.is_file() else rd / "results.json"))
    html = escape_control(html, keep_newlines=True)  # names and paths from results.json: shown, never obeyed
    target = Path(out) if out is not None else base / "report.html"
    try:
        write_text(target, html)
    except OSError as exc:
        raise UserError(f"{target}: cannot write the report ({exc.strerror or exc}); choose a writable path with --out") from None
    return target
