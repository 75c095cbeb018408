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
from importlib import resources
from pathlib import Path
from typing import Any

from ..attacks.base import FAMILIES, FAMILY_TITLES
from ..core import present as pr
from ..core.errors import UserError
from ..core.io import write_text
from ..core.masking import PiiMasker
from ..core.present import finite, interval, n as _n, num, t as _t
from ..core.terminal import escape_control
from ..data.canaries import Canary, known_pii, load_canaries
from ..data.records import read_jsonl
from ..results import ArmResult, AuditResults
from . import plots
from .back_matter import section_examples, section_repro, section_tests
from .blocks import Block, Masker, Section, block, figure, note, section, table
from .schema import load_results
from .views import (context, family_runs, gain_note, is_control, judged, kinds_present, short, shown, title,
                    tour_note, verdict_figures)

# --------------------------------------------------------------------------- sections

def _ci(x: float | None, ci: Any, spec: str = ".2f") -> str:
    if x is None:
        return "—"
    return f"{x:{spec}}" + (f" [{interval(ci, spec)}]" if ci else "")


def _extracted(m: ArmResult) -> Any:
    """What the extraction attacks got out, one short "attack k/n" per attack."""
    parts = [f"{short(a)} {lc.k}/{lc.n}" for a, r in m.attacks.items() if (lc := r.leaked()) is not None]
    return _t("; ".join(parts) if parts else "—")


def scorecard(results: AuditResults) -> Block:
    """One row per model: its verdict, the privacy it claims and the leakage and utility measured, each figure
    with its interval — the table a reader scans first."""
    rows = []
    for name, m in [*results.arms.items(), *([("base (control)", results.base_model)] if results.base_model else [])]:
        v = m.verdict
        badge = {"text": v.label, "cls": f"badge {v.level}", "badge": True} if v else "—"
        one = m.one_run_epsilon
        att, best = m.best_membership()
        exp = next((f for r in m.attacks.values() for f in r.scorecard() if f.fmt == "bits"), None)
        u = m.utility
        rows.append([{"text": name, "cls": "arm"}, badge, _eps_cell(name, m, results),
                     _n(one.epsilon_steinke, ".2f") if one is not None and one.available else _t("—"),
                     _t(_ci(u.gain_recovered, u.gain_recovered_ci95)
                        + (f"; outside PII {_ci(u.gain_recovered_outside_pii, u.gain_recovered_outside_pii_ci95)}"
                           if u.gain_recovered_outside_pii is not None else "")),
                     _t(f"{_ci(best.auc, best.auc_ci95, '.3f')} ({short(att)})" if best else "—"),
                     _t(_ci(exp.value, exp.ci) if exp is not None else "—"), _extracted(m)])
    return table(["arm", "verdict", "ε (accountant), unit, δ", "one-run ε ≥", "G utility recovered [95% CI]",
                  "strongest attack AUC [95% CI]", "canary exposure, bits [95% CI]", "extracted"], rows,
                 id="scorecard", caption="Scorecard: one row per arm. G: 1 = the best non-private fine-tune's gain, "
                                         "0 = none (on every held-out token, then on the tokens outside PII "
                                         "spans: what a model should learn); AUC 0.5 = chance; exposure: chance ≈ "
                                         + num(results.data.canary_chance_exposure, ".2f") + " bits."
                                         + (f" {g}" if (g := gain_note(results)) else ""))


def standings_table(results: AuditResults) -> Block | None:
    """Every recommendable arm against the stated requirement: whether it meets it, its ε on the requirement's
    unit, its utility, whether the one-run audit could have caught it broken, and what it lacks."""
    rec = results.recommendation
    if rec is None or not rec.standings:
        return None
    rows = []
    for s in rec.standings:
        eps = "—" if s.epsilon is None else f"{s.epsilon:.4g} per {s.unit} at δ = {s.delta:.1e}"
        g = ("—" if s.utility is None else f"held-out perplexity {-s.utility:.2f}" if not s.utility_is_g
             else _ci(s.utility, s.utility_ci) + (f" ({s.seeds} seeds)" if s.seeds > 1 else ""))
        checked = {True: "yes", False: "no (implementation unverified)", None: "—"}[s.verified]
        rows.append([{"text": s.arm, "cls": "arm"}, _t("meets it" + (" (recommended)" if s.arm == rec.arm else "")
                                                        if s.meets else "does not"), _t(eps), _t(g), _t(checked),
                     _t(s.lacks or "—")])
    return table(["arm", "requirement", "ε on its unit (accountant)", "G utility recovered [95% CI]",
                  "alarm could catch it broken", "what it lacks"], rows, id="standings",
                 caption=rec.requirement_text + " Every candidate arm against it.")


def section_summary(results: AuditResults) -> Section:
    blocks: list[Block] = []
    rec = results.recommendation
    if rec is not None and rec.requirement_text:
        # The report's first line: what the user asked for.
        blocks.append({"kind": "p", "cls": "note", "text": rec.requirement_text})
    if tour := tour_note(results):  # before anything a reader could take as a finding
        blocks.append({"kind": "recommend", "cls": "none", "text": tour})
    b = results.blind_baseline
    if b is not None and b.shifted:
        # Here, not only under Warnings: every membership figure below must be read with it.
        blocks.append({"kind": "recommend", "cls": "none", "text": (
            f"Distribution shift: a classifier that never sees the model tells the evaluated members from non-members "
            f"(blind baseline AUC {b.auc:.3f} [{interval(b.auc_ci95)}]). Membership-inference AUCs here are not "
            "evidence of leakage or memorisation, and no claim that a DP guarantee is violated can rest on them; "
            "canary exposure and extraction counts do not depend on the split.")})
    if rec is not None:
        text = rec.text[len(rec.requirement_text):].strip() if rec.text.startswith(rec.requirement_text) else rec.text
        blocks.append({"kind": "recommend", "cls": "" if rec.arm else "none", "text": text})
        if (st := standings_table(results)) is not None:
            blocks.append(st)
    if results.alarms is not None:
        violated = results.alarms.violated
        blocks.append({"kind": "p", "cls": "alarm" if violated else "note",
                       "text": (f"DP GUARANTEE VIOLATED: {', '.join(violated)}. " if violated else "")
                       + results.alarms.statement})
    blocks.append(scorecard(results))
    plot = section_tradeoff(results)
    if plot is not None:
        blocks += plot["blocks"]
    models = [(n, m) for n, m in results.models() if m.verdict is not None]
    if results.base_model is not None:
        models = [*models[1:], *models[:1]]  # the arms, then the control
    for name, m in models:
        v = m.verdict
        # The figures that decide the verdict beside it, as on the console (G, ε per record and person, the
        # strongest attack against the control's figure).
        headline = verdict_figures(name, m, results) if m is not results.base_model else ""
        blocks.append({"kind": "details", "summary": f"{name}: {v.label}", "headline": headline, "level": v.level,
                       "label": v.label,
                       "arm": name, "text": v.text,
                       "figures": "; ".join([*v.figures, *v.unsettled[3:], *([v.error_control] if v.error_control else [])])})
    if rec is not None:
        blocks.append({"kind": "details", "summary": "How verdicts, alarms and the recommendation are decided",
                       "text": rec.policy + (f" The recommendation: {rec.rule}." if rec.rule else "")
                       + (f" {rec.training_noise}" if rec.training_noise else ""), "figures": ""})
    return {"id": "summary", "title": "Summary", "blocks": blocks}


def _eps_cell(name: str, m: ArmResult, results: AuditResults) -> Any:
    own = shown(m).epsilon_cell(m)
    if own is not None:
        return own
    p = m.privacy
    if p is None:
        return _t("—" if is_control(results, name, m) else "∞ (no DP)")
    # Every ε with its unit and its δ (issue 39: "8" beside "8" read as the same guarantee for dp-8 and dp-user-8).
    return _t(f"{p.epsilon:.3f} per {p.unit} at δ = {p.delta:.1e} ({p.accountant})",
              title=f"{p.accountant.upper()} accountant; RDP {num(p.epsilon_rdp)}, PLD {num(p.epsilon_pld)}, PRV "
                    f"{num(p.epsilon_prv)}; per record {num(p.epsilon_per_record, '.4g')}, per person "
                    f"{num(p.epsilon if p.unit == 'person' else p.epsilon_person, '.4g')}")


def _per_unit(m: ArmResult) -> tuple[Any, Any]:
    """The (ε per record, ε per person) cells of a DP arm: its own unit's ε and the other one's."""
    p = m.privacy
    if p is None:
        return _t("—"), _t("—")
    person = p.epsilon if p.unit == "person" else p.epsilon_person
    k = f" (k = {p.person_records})" if p.person_records and person is not None else ""
    return (_n(p.epsilon_per_record, ".4g"),
            _t(num(person, ".4g") + k, title="the person with the most records (k) in the training data"))


def _scorecard(results: AuditResults) -> list[str]:
    """The labels of every attack's scorecard figures present in the run, in registry order."""
    from ..attacks.registry import ATTACKS

    labels: list[str] = []
    for spec in ATTACKS.values():
        for _, m in results.models():
            r = m.attacks.get(spec.name)
            for f in (r.scorecard() if r is not None else []):
                if f.label not in labels:
                    labels.append(f.label)
    return labels


def section_arms(results: AuditResults) -> Section:
    score = _scorecard(results)
    cols = ["arm", "kind", "ε target", "ε accountant, unit, δ", "ε per record", "ε per person",
            "ε one-run (lower bound)", "ε empirical (lower bound)", "σ", "q",
            "steps", "δ", "L held-out (nats)", "ppl held-out", "ppl public", "G (utility recovered)", "best MIA attack",
            "AUC [95% CI]", "TPR@1%FPR", *score]
    rows = []
    for name, m in results.models():
        p, emp, one = m.privacy, m.empirical_epsilon, m.one_run_epsilon
        att, best = m.best_membership()
        figures = {f.label: f for r in m.attacks.values() for f in r.scorecard()}
        steps = p.steps if p else (m.training.steps if m.training else None)
        one_cell = (_n(one.epsilon_steinke, ".2f", title=f"Steinke et al. 2023, {one.m} audit canaries, 95%")
                    if one is not None and one.available else _t("—"))
        sigma = shown(m).sigma_cell(m) or _n(p.sigma if p else None)
        rows.append([name, m.kind, _n(p.target_epsilon if p else None, "g"), _eps_cell(name, m, results),
                     *_per_unit(m), one_cell,
                     _n(emp.epsilon_lb if emp else None, title=f"from {emp.attack}" if emp else None), sigma,
                     _n(p.sample_rate if p else None, ".4f"), _n(steps, "d"),
                     _n(p.delta if p else None, ".1e"), _n(m.utility.nll_non_members, ".3f"),
                     _n(m.utility.ppl_non_members, ".2f"), _n(m.utility.ppl_public, ".2f"),
                     _n(m.utility.gain_recovered, ".2f"), short(att) if att else "—",
                     _t(f"{best.auc:.3f} [{interval(best.auc_ci95)}]" if best else "—"),
                     _n(best.tpr_at_1pct_fpr if best else None),
                     *[_t(pr.value(figures[label])) if label in figures else _t("—") for label in score]])
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


def _leakage_bits(m: ArmResult | None) -> float | None:
    if m is None:
        return None
    return next((b for r in m.attacks.values() if (b := r.leakage_bits()) is not None), None)


def section_tradeoff(results: AuditResults) -> Section | None:
    arms = {n: m for n, m in results.arms.items() if judged(m).compared}
    # G where the audit has a best reference (the utility measure that compares arms); perplexity otherwise.
    by_g = any(m.utility.gain_recovered is not None for m in arms.values())

    def utility(m: ArmResult) -> float | None:
        return m.utility.gain_recovered if by_g else m.utility.ppl_non_members

    pts = []
    for name, m in arms.items():
        _, best = m.best_membership()
        pts.append({"name": name, "epsilon": m.epsilon, "auc": best.auc if best else None,
                    "auc_ci": best.auc_ci95 if best else None, "exposure": _leakage_bits(m), "utility": utility(m),
                    "one_run": m.one_run_epsilon.epsilon_steinke if m.one_run_epsilon and m.one_run_epsilon.available
                    else None, "own_unit": shown(m).epsilon_unit is not None, "marker": shown(m).marker})
    if not any(finite(p["auc"]) or finite(p["utility"]) for p in pts):
        return None
    control = results.base_model
    _, cbest = control.best_membership() if control else (None, None)
    ctrl = {"auc": cbest.auc if cbest else None, "utility": utility(control) if control else None,
            "exposure": _leakage_bits(control)}
    label = "utility recovered G" if by_g else "held-out perplexity"
    what = ("utility recovered G = (L_base − L_arm)/(L_base − L_best) on held-out private text (1: the best "
            "non-private fine-tune's gain; 0: none)") if by_g else "held-out perplexity"
    marked = [k for k in kinds_present(results) if k.marker != "o" and k.marker_note]
    notes: list[Block] = []
    seen: set[Any] = set()
    present = kinds_present(results)
    for k in present:
        impl = type(k).notes  # kinds that share one notes implementation get one note over all their arms
        if impl in seen:
            continue
        seen.add(impl)
        mine = {n: a for n, a in results.arms.items() if shown(a) in present and type(shown(a)).notes is impl}
        notes += [block(b) for b in k.notes(mine)]
    return {"id": "tradeoff", "title": "Privacy–utility trade-off", "blocks": [figure(
        plots.privacy_utility(pts, ctrl, utility_label=label),
        "ε spent (accountant) on a log axis; arms without DP at ∞ on the right. Leakage (best MIA AUC with 95% CI, mean "
        f"canary exposure) and {what}; dotted lines: the base control (never saw the members). "
        "'ε ≥' beside a point: the arm's one-run lower bound (95%)."
        + "".join(f" {k.marker_note}" for k in dict.fromkeys(marked)))] + notes}


def section_family(results: AuditResults, family: str, ctx: Any) -> Section | None:
    """Every attack of ``family``, each result type presenting its attacks (:meth:`AttackResult.present`)."""
    blocks: list[Block] = []
    for result_type, runs in family_runs(results, family):
        blocks += [block(b) for b in result_type.present(runs, ctx)]
    if not blocks:
        return None
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


def kind_sections(results: AuditResults) -> list[Section]:
    """The sections arm kinds add (e.g. the output guard's)."""
    return [section(x) for k in kinds_present(results) for x in k.sections(results)]


def _diagnostic_check(results: AuditResults, name: str) -> str:
    """How the empirical ε reads against the units' ε (a diagnostic: it never raises the alarm)."""
    alarms = results.alarms
    o = next((x for x in (alarms.outcomes if alarms else []) if x.arm == name and x.route == "empirical_epsilon"),
             None)
    if o is None:
        return "no DP claim to check"
    if o.rejected:
        return (f"above {o.claim} (p = {o.p_value:.2g}): a diagnostic, not an alarm — it assumes the evaluated "
                "units behave as independent trials")
    return f"consistent with {o.claim}"


def section_empirical(results: AuditResults) -> Section | None:
    rows, plot_rows = [], []
    for name, m in results.arms.items():
        emp = m.empirical_epsilon
        if emp is None:
            continue
        acc = m.epsilon
        guarantee = shown(m).guarantee(m)
        if guarantee:
            check = f"no DP claim to check ({guarantee})"
        elif acc is None:
            check = "no DP claim to check"
        else:
            check = _diagnostic_check(results, name)
        if emp.roc_band is not None:
            band = emp.roc_band
            check += (f"; held-out ROC of {short(band.attack)} vs (ε = {band.epsilon:.3g}, δ = {band.delta:.2g}) for a "
                      f"unit of up to {band.unit_records} records: "
                      + ("outside the DKW band (diagnostic)" if band.violated else "inside the DKW band")
                      + f", p = {band.p_value:.2g}")
        b = emp.by_attack[emp.attack]
        acc_cell = _eps_cell(name, m, results)
        rows.append([name, acc_cell, _n(emp.epsilon_lb), short(emp.attack),
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


def section_budget(results: AuditResults) -> Section | None:
    """Which ε a release carries: each DP arm alone, and all of the audit's DP arms released together."""
    if not results.budget:
        return None
    blocks: list[Block] = []
    for b in results.budget:
        rows = [[", ".join(r.arms), r.what, _n(r.epsilon), _n(r.delta, ".1e")] for r in b.releases]
        blocks.append(table(["released", "", "ε", "δ"], rows,
                            caption=f"Privacy unit: {b.unit}; members {b.members[:12]}…; {b.accountant}."))
    blocks.append(note("Every DP training on the same members spends budget: releasing several of these models costs "
                       "the composition of their trainings, not the largest ε alone. Other trainings on these members "
                       "(tuning runs, earlier audits) are not in this run's figure: `privleak budget RUN_DIR…` composes "
                       "everything recorded in the run directories' and this machine's ledgers."))
    return {"id": "budget", "title": "Privacy budget: the ε a release carries", "blocks": blocks}


ONE_RUN_COLUMNS = ["arm", "accountant ε", "one-run ε ≥ (Steinke)", "ε ≥ (f-DP, in/out)", "ε ≥ (f-DP, secrets)",
                   "secrets decoded", "ε ≥ (white-box gradient canaries)", "one-run μ ≥ (μ-GDP, not an ε)", "guesses", "canary AUC in vs out", "check"]


def section_one_run(results: AuditResults) -> Section | None:
    rows, plot_rows = [], []
    for name, m in results.models():
        one = m.one_run_epsilon
        if one is None:
            continue
        acc = m.epsilon
        control = is_control(results, name, m)
        auc = _n(one.canary_auc)
        if not one.available:
            rows.append([name, _t(f"{acc:.3f}" if acc is not None else "—"), _t("unavailable"), _t("—"), _t("—"), _t("—"),
                         _t("—"), _t("—"), _t("—"), auc, _t(one.reason)])
            continue
        power = results.alarms.power.get(name) if results.alarms is not None else None
        if control:
            check = "control: never saw the canaries (the bound's floor)"
        elif acc is None:
            check = "no DP claim to check"
        elif results.alarms is not None and name in results.alarms.violated:
            check = "DP GUARANTEE VIOLATED: a one-run test refutes the accountant's claim (audit-wide α)"
        else:
            check = "ok: no one-run test refutes the accountant's claim"
        if power is not None:
            check += ". " + power.text
        best = one.best
        bounds = {o.route: o.bound_at_level for o in (results.alarms.outcomes if results.alarms else []) if o.arm == name}
        rec = one.reconstruction
        acc_cell = _t(f"{acc:.3f}") if acc is not None else _t("—" if control else "∞ (no DP)")
        rows.append([name, acc_cell, _n(one.epsilon_steinke), _n(bounds.get("one_run_fdp")),
                     _n(bounds.get("one_run_kary")),
                     _t(f"{rec.reconstructed}/{rec.m} (k = {rec.k:.2g})" if rec is not None else "—"),
                     _n(bounds.get("whitebox")), _n(one.mu_gdp_lb), _t(f"{best.correct}/{best.guesses} right (top {best.k_in}"
                                              + (f", bottom {best.k_out}" if best.k_out else "") + ")" if best else "—"),
                     auc, check])
        if not control:
            plot_rows.append((name, acc, one.epsilon_steinke, None))
    if not rows:
        return None
    first = next((m.one_run_epsilon for _, m in results.models() if m.one_run_epsilon and m.one_run_epsilon.available),
                 None)
    if first is None:  # every arm's bound unavailable (e.g. fewer canaries than it needs): the rows say why
        return {"id": "one-run", "title": "One-run DP audit (canaries)", "blocks": [table(
            ONE_RUN_COLUMNS, rows, caption="The one-run audit canaries' bound, per arm.")]}
    blocks = []
    if plot_rows:
        blocks.append(figure(plots.epsilon_compare(plot_rows), "Accountant ε (proven upper bound) beside the one-run lower "
                                                               "bound (95%); a lower bound above the upper bound means the "
                                                               "DP step is broken."))
    blocks += [
        table(ONE_RUN_COLUMNS, rows),
        note(f"{first.m} one-run audit canaries (random rare-word sequences, Panda et al. 2025), each added to every trained "
             f"model's data with probability ½ ({first.n_included} in); score: {first.score} on every token after the first. The "
             "auditor guesses 'in' for the top-k scores (and 'out' for the bottom k), k from a fixed grid with a union "
             f"bound (α = {first.alpha:g} overall), δ = the arm's. Steinke, Nasr & Jagielski 2023 hold for any (ε, δ)-DP "
             "training. The f-DP tests (Mahloujifar, Melis & Chaudhuri 2025) read the same guesses, and the secrets the "
             "model decodes from each included canary's first words (one of k values), against the accountant's own "
             "trade-off curve of the DP-SGD it ran (its σ, q and T): their ε is the largest DP-SGD ε at that q and T "
             "the guesses refute. Every test is one of the alarm's, α split across all of them. The μ-GDP bound is a "
             "lower bound on the μ of μ-Gaussian DP, not an ε, and decides nothing.")]
    return {"id": "one-run", "title": "One-run DP audit (canaries)", "blocks": blocks}


def section_people(results: AuditResults) -> Section | None:
    rows = []
    for name, m in results.arms.items():
        for p in m.exposed_people[:5]:
            if not p.flagged_by:
                continue
            rows.append([name, _t(p.id), _t(p.name or "—"), _n(p.records, "d"),
                         _t(", ".join(title(a) for a in p.flagged_by)), _n(p.percentile, ".3f")])
    if not rows:
        return None
    unit = results.data.membership_design.unit if results.data.membership_design else "person"
    return {"id": "people", "title": "Most exposed individuals", "blocks": [
        table(["arm", f"{unit} (masked id)", "name (masked)", "records", "attacks that flag them at ≤ 1% FPR",
               "highest percentile among non-members"], rows),
        note("An aggregate AUC hides the people at risk: these are the evaluated members (one record per "
             f"{unit}) that the most attacks single out at a threshold with at most 1% false alarms on the "
             "non-members, up to five per arm. Ids are salted hashes; names are masked.")]}


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
    ctx = context(results, mask, lambda cid: canaries[cid].text() if cid in canaries else None)
    sections = [section_summary(results), section_arms(results),
                *[section_family(results, f, ctx) for f in FAMILIES],
                section_defences(results), *kind_sections(results), section_one_run(results), section_people(results),
                section_empirical(results), section_budget(results), section_release(results), section_tests(results),
                section_examples(results, ctx, show_pii), section_repro(results, src, digest)]
    sections = [s for s in sections if s]
    title = f"PrivLeak audit — {rd.name if rd is not None else 'run'}"
    meta = [f"{len(results.arms)} arm(s): {', '.join(results.arms)}", f"data: {results.data.source}",
            f"seed {results.config.get('seed', '—')}"]
    if tour_note(results):
        meta.insert(0, "smoke profile: a tour, not evidence")
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
