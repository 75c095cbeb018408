"""The HTML report of a run (``report.html``) and the comparison of runs.

One self-contained file: inline CSS, inline SVG figures (matplotlib, Agg), no
scripts and a Content-Security-Policy that forbids every request, so it reads
offline and prints. Sections are built from whatever ``results.json`` holds:
an absent section is skipped, and keys this module does not know (later
attacks, arms, ``extraction``/``pii``/``guard`` blocks) are rendered as
key/value tables rather than dropped.

PII is masked by default: every ground-truth value of the run's splits and
canaries, and SSN/e-mail/phone/MRN-shaped strings, wherever text from the
results is shown; ``show_pii=True`` reveals it under a warning banner.

API::

    render_report(results, run_dir=None, show_pii=False) -> str
    write_report(run_dir, show_pii=False, out=None) -> Path
    render_compare(list_of_results, names=None) -> str
    write_compare(run_dirs, out) -> Path
"""

from __future__ import annotations

import hashlib
import json
import math
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from markupsafe import Markup

from ..core.errors import UserError
from ..core.io import write_text
from ..core.masking import PiiMasker, known_pii_values, load_canaries
from .schema import load_results, validate_results

# --- verdict thresholds (stated in the report) ------------------------------
# An attack is "near chance" when its AUC 95% CI reaches within AUC_MARGIN of
# the base control's AUC (the control never saw the members, so its AUC is
# what distribution shift alone gives), or — without a CI — the AUC itself is
# within AUC_MARGIN of it.
AUC_MARGIN = 0.02
# Canaries are "near chance" when their mean exposure is at most
# EXPOSURE_MARGIN bits above chance and no canary's secret ranks first.
EXPOSURE_MARGIN = 1.0
# An arm whose held-out perplexity is within UTILITY_SAME of the control's
# learned (almost) nothing from the members.
UTILITY_SAME = 0.01
# ... and its TPR@1%FPR 95% CI (when given) reaches within TPR_MARGIN of
# max(1%, the control's TPR@1%FPR).
TPR_MARGIN = 0.01

KNOWN_TOP = {"schema_version", "tool", "config", "data", "base_model", "arms", "warnings", "durations_s", "versions"}
KNOWN_ARM = {"kind", "training", "privacy", "utility", "attacks", "canaries"}
TEST_KEYS = ("statistical_tests", "tests", "statistics", "significance")
EXTRA_ARM_SECTIONS = ("extraction", "pii", "guard", "pii_attacks", "defences", "n_train_records", "serves", "shadows")
CONTROL = "base (control)"

Masker = Callable[[str], str]


# --- small helpers ----------------------------------------------------------

def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _f(x: Any, spec: str = ".3f") -> str:
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float) and not math.isfinite(x):
        return "∞" if x > 0 else ("−∞" if x < 0 else "NaN")
    if isinstance(x, (int, float)):
        if spec == "auto":
            if isinstance(x, int):
                return f"{x:,}"
            return f"{x:.3g}" if abs(x) < 1e-3 or abs(x) >= 1e5 else f"{x:.4g}"
        return format(x, spec)
    return str(x)


def _n(x: Any, spec: str = ".3f", title: str | None = None) -> dict[str, Any]:
    return {"text": _f(x, spec), "cls": "num", "title": title}


def _ci(ci: Any) -> str:
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(_num(c) for c in ci):
        return f"{ci[0]:.3f}–{ci[1]:.3f}"
    return "—"


def _models(results: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = [(CONTROL, results["base_model"])] if isinstance(results.get("base_model"), dict) else []
    return out + list(results["arms"].items())


def best_attack(model: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    atts = {k: v for k, v in (model.get("attacks") or {}).items() if isinstance(v, dict) and _num(v.get("auc"))}
    if not atts:
        return None, {}
    name = max(atts, key=lambda k: atts[k]["auc"])
    return name, atts[name]


def _canaries(model: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in model.get("canaries") or [] if isinstance(c, dict)]


def _exposed(c: dict[str, Any]) -> bool:
    if _num(c.get("rank")):
        return c["rank"] <= 1
    return _num(c.get("exposure")) and _num(c.get("max_exposure")) and c["exposure"] >= c["max_exposure"] - 1e-9


def mean_exposure(model: dict[str, Any]) -> float | None:
    vals = [c["exposure"] for c in _canaries(model) if _num(c.get("exposure"))]
    return sum(vals) / len(vals) if vals else None


def _first_number(obj: Any, keys: Sequence[str]) -> float | None:
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        return float(obj)
    if isinstance(obj, dict):
        for k in keys:
            v = obj.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
    return None


_EPS_KEYS = ("epsilon_lb", "lower_bound", "epsilon_lower_bound", "lb", "epsilon", "value", "estimate")


def empirical_epsilon(model: dict[str, Any]) -> tuple[float | None, tuple[float, float] | None, str | None]:
    """The arm's empirical ε lower bound: (value, 95% CI or None, which attack / where from).

    The arm-level ``empirical_epsilon`` (attack chosen on a selection half, so
    the bound keeps its guarantee) wins; else ``privacy.empirical_epsilon``;
    else the largest per-attack bound, labelled as such (a maximum over
    attacks is optimistic: it loses the per-attack confidence level).
    """
    def ci_of(e: Any) -> tuple[float, float] | None:
        if isinstance(e, dict):
            for key in ("ci95", "ci", "epsilon_ci95"):
                c = e.get(key)
                if isinstance(c, (list, tuple)) and len(c) == 2 and all(_num(x) for x in c):
                    return (float(c[0]), float(c[1]))
        return None

    for where, e in (("arm", model.get("empirical_epsilon")), ("privacy", (model.get("privacy") or {}).get("empirical_epsilon"))):
        val = _first_number(e, _EPS_KEYS)
        if val is not None:
            att = e.get("attack") if isinstance(e, dict) else None
            return val, ci_of(e), str(att) if att else where
    best: tuple[float | None, tuple[float, float] | None, str | None] = (None, None, None)
    for k, v in (model.get("attacks") or {}).items():
        e = v.get("empirical_epsilon") if isinstance(v, dict) else None
        val = _first_number(e, _EPS_KEYS)
        if val is not None and (best[0] is None or val > best[0]):
            best = (val, ci_of(e), f"{k} (max over attacks)")
    return best


def _flatten(obj: Any, prefix: str = "", depth: int = 0, out: list | None = None) -> list[tuple[str, Any]]:
    out = [] if out is None else out
    if isinstance(obj, dict) and depth < 4:
        if not obj:
            out.append((prefix or "(empty)", "{}"))
        for k, v in obj.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), depth + 1, out)
    else:
        out.append((prefix or "value", obj))
    return out


def _value_text(v: Any, mask: Masker) -> str:
    if isinstance(v, str):
        return mask(v)
    if isinstance(v, list):
        if all(not isinstance(x, (dict, list)) for x in v):
            parts = [_value_text(x, mask) for x in v[:12]]
            return ", ".join(parts) + (f", … ({len(v)} in all)" if len(v) > 12 else "")
        return mask(json.dumps(v[:5], ensure_ascii=False)[:400]) + (f" … ({len(v)} items)" if len(v) > 5 else "")
    if isinstance(v, dict):
        return mask(json.dumps(v, ensure_ascii=False)[:400])
    return _f(v, "auto")


def generic_blocks(obj: Any, mask: Masker, caption: str | None = None) -> list[dict[str, Any]]:
    """Any JSON value as tables: a list of dicts as one table, everything else as key/value rows."""
    if isinstance(obj, list) and obj and all(isinstance(x, dict) for x in obj):
        cols: list[str] = []
        for x in obj:
            for k in x:
                if k not in cols:
                    cols.append(k)
        rows = [[_n(x.get(c), "auto") if _num(x.get(c)) else _value_text(x.get(c), mask) if c in x else "—" for c in cols]
                for x in obj[:200]]
        blocks = [{"kind": "table", "caption": caption, "columns": cols, "rows": rows}]
        if len(obj) > 200:
            blocks.append({"kind": "p", "cls": "note", "text": f"First 200 of {len(obj)} rows shown."})
        return blocks
    flat = _flatten(obj)
    rows = [[k, _n(v, "auto") if _num(v) else _value_text(v, mask)] for k, v in flat]
    return [{"kind": "table", "caption": caption, "columns": ["field", "value"], "rows": rows}]


# --- verdicts ---------------------------------------------------------------

def arm_verdict(name: str, arm: dict[str, Any], results: dict[str, Any]) -> dict[str, Any]:
    """Plain-language verdict of one arm: level is 'chance', 'some' or 'leaks'."""
    base = results.get("base_model") or {}
    data = results.get("data") or {}
    findings: list[str] = []
    figures: list[str] = []
    mia_ok: bool | None = None
    atts = {k: v for k, v in (arm.get("attacks") or {}).items() if isinstance(v, dict) and _num(v.get("auc"))}
    bad_atts = []
    for att, e in atts.items():
        ctrl = ((base.get("attacks") or {}).get(att) or {}).get("auc")
        ref = ctrl if _num(ctrl) else 0.5
        ci = e.get("auc_ci95")
        low = ci[0] if isinstance(ci, list) and len(ci) == 2 and _num(ci[0]) else e["auc"]
        ok = low <= ref + AUC_MARGIN
        tpr = e.get("tpr_at_1pct_fpr")
        tci = e.get("tpr_at_1pct_fpr_ci95")
        ctpr = ((base.get("attacks") or {}).get(att) or {}).get("tpr_at_1pct_fpr")
        tref = max(0.01, ctpr if _num(ctpr) else 0.0)
        if isinstance(tci, list) and len(tci) == 2 and _num(tci[0]) and tci[0] > tref + TPR_MARGIN:
            ok = False  # strong at low FPR although the AUC looks harmless
        figures.append(f"{att} MIA AUC {e['auc']:.3f}" + (f" (95% CI {_ci(ci)})" if _ci(ci) != "—" else "")
                       + f" vs {ref:.3f} for the {'control' if _num(ctrl) else 'coin flip'}"
                       + (f", TPR@1%FPR {tpr:.3f}" if _num(tpr) else ""))
        if not ok:
            bad_atts.append(f"the {att} membership attack tells members from non-members (AUC {e['auc']:.2f} vs {ref:.2f} for the control"
                            + (f"; it flags {tpr:.0%} of members at a 1% false-alarm rate" if _num(tpr) and tpr > 0 else "") + ")")
        mia_ok = ok if mia_ok is None else (mia_ok and ok)
    findings += bad_atts
    exp_ok: bool | None = None
    cans = _canaries(arm)
    if cans:
        mexp = mean_exposure(arm)
        chance = data.get("canary_chance_exposure")
        if not _num(chance):
            chance = mean_exposure(base)
        n_exp = sum(_exposed(c) for c in cans)
        figures.append(f"canaries: mean exposure {_f(mexp, '.2f')} bits (chance {_f(chance, '.2f')}), "
                       f"{n_exp}/{len(cans)} secrets ranked first")
        exp_ok = n_exp == 0 and (mexp is None or not _num(chance) or mexp <= chance + EXPOSURE_MARGIN)
        if not exp_ok:
            if n_exp:
                reps = sorted({int(c["repeats"]) for c in cans if _exposed(c)})
                findings.append(f"{n_exp} of {len(cans)} planted secrets can be recovered outright (ranked first among all candidates; "
                                f"repeated {', '.join(map(str, reps))}× in training)")
            else:
                findings.append(f"planted secrets are more likely than chance (mean exposure {mexp:.2f} bits vs {chance:.2f})")
    # extra leak counts from later sections (extraction / pii / guard), when they say so plainly
    for sec in EXTRA_ARM_SECTIONS:
        block = arm.get(sec)
        if isinstance(block, dict):
            for key in ("n_extracted", "n_leaked", "leaked", "n_leaks", "total_leaks"):
                if _num(block.get(key)):
                    figures.append(f"{sec}: {key} = {_f(block[key], 'auto')}")
                    if block[key] > 0:
                        findings.append(f"{sec}: {_f(block[key], 'auto')} leaked item(s) ({key})")
                        exp_ok = False if exp_ok is None else exp_ok and False
                    break
    ev, _, esrc = empirical_epsilon(arm)
    if ev is not None and name != CONTROL:
        figures.append(f"empirical ε ≥ {_f(ev, '.2f')} ({esrc})")
        acc = (arm.get("privacy") or {}).get("epsilon")
        summ = arm.get("empirical_epsilon") if isinstance(arm.get("empirical_epsilon"), dict) else {}
        if summ.get("exceeds_accountant") or (_num(acc) and _num(ev) and ev > acc + 1e-9):
            findings.insert(0, f"the empirical ε lower bound {_f(ev, '.2f')} exceeds the accountant's ε {_f(acc, '.2f')}: the DP guarantee does not hold")
            mia_ok = False
    ppl = (arm.get("utility") or {}).get("ppl_non_members")
    bppl = (base.get("utility") or {}).get("ppl_non_members")
    util_note = ""
    if _num(ppl):
        figures.append(f"held-out perplexity {ppl:.2f}" + (f" (control {bppl:.2f})" if _num(bppl) else ""))
        if _num(bppl) and name != CONTROL and ppl >= bppl * (1 - UTILITY_SAME):
            util_note = " It is no better than the untrained control on held-out text: it learned (almost) nothing useful from the members."
    checks = [x for x in (mia_ok, exp_ok) if x is not None]
    if name == CONTROL:
        level, label = "control", "CONTROL"
        text = "The base model never saw the members: its attack figures are the floor any arm can reach."
    elif arm.get("kind") == "guard" and isinstance(arm.get("guard"), dict):
        level, label, text = "guard", "GUARDED", _guard_verdict(arm["guard"])
    elif not checks:
        level, label, text = "some", "NO ATTACKS", "No attack results for this arm."
    elif all(checks):
        level, label = "chance", "NEAR CHANCE"
        text = "No measurable leakage: attacks do no better than on the control." + util_note
    elif any(checks):
        level, label = "some", "SOME LEAKAGE"
        text = "Leaks: " + "; ".join(findings) + "." + util_note
    else:
        level, label = "leaks", "LEAKS"
        text = "Leaks: " + "; ".join(findings) + "." + util_note
    return {"kind": "verdict", "arm": name, "level": level, "label": label, "text": text,
            "figures": "; ".join(figures), "near_chance": level == "chance", "ppl": ppl}


def _guard_verdict(g: dict[str, Any]) -> str:
    """What the guard stopped and what it costs, in words; it never makes an arm 'near chance'."""
    attacks = g.get("attacks") or {}
    before = sum(int(a.get("without_guard") or 0) for a in attacks.values())
    after = sum(int(a.get("with_guard") or 0) for a in attacks.values())
    fp = (g.get("false_positives") or {})
    overall, blocked = fp.get("overall") or {}, fp.get("blocked") or {}
    text = f"Behind the output guard, {before - after} of {before} leaks found by the extraction attacks are stopped"
    if _num(overall.get("rate")):
        text += (f"; it changes {overall['rate']:.0%} of benign outputs (blocks {blocked.get('rate', 0):.0%})")
    return text + (". A guard filters generated text only: anyone with access to the model's scores or weights "
                   "is not stopped, so membership inference on the baseline still applies.")


def recommend(results: dict[str, Any], verdicts: dict[str, dict[str, Any]]) -> dict[str, Any]:
    ok = {n: v for n, v in verdicts.items() if n != CONTROL and v["near_chance"] and _num(v["ppl"])}
    thresholds = (f"Near chance means: every membership attack's AUC 95% CI reaches within {AUC_MARGIN} of the control's AUC "
                  f"(and its TPR@1%FPR CI, when reported, within {TPR_MARGIN} of max(1%, the control's)), "
                  f"mean canary exposure is at most {EXPOSURE_MARGIN:g} bit above chance and no canary secret ranks first.")
    if ok:
        best = min(ok, key=lambda n: ok[n]["ppl"])
        others = [n for n in verdicts if n not in ok and n != CONTROL and verdicts[n]["level"] != "guard"
                  and _num(verdicts[n]["ppl"]) and verdicts[n]["ppl"] < ok[best]["ppl"]]
        why = f"Recommended arm: {best} — the best held-out perplexity ({ok[best]['ppl']:.2f}) among the arms whose attacks are near chance ({', '.join(ok)})."
        if others:
            why += f" {', '.join(others)} ha{'s' if len(others) == 1 else 've'} better perplexity but leak{'s' if len(others) == 1 else ''}."
        bppl = ((results.get("base_model") or {}).get("utility") or {}).get("ppl_non_members")
        if _num(bppl) and ok[best]["ppl"] >= bppl * (1 - UTILITY_SAME):
            why += (f" Caution: its perplexity is no better than the untrained control's ({bppl:.2f}); it is safe because it learned little — "
                    "consider more epochs, a larger ε or a larger batch.")
        return {"kind": "recommend", "text": why + " " + thresholds, "arm": best}
    cands = {n: v for n, v in verdicts.items() if n != CONTROL}
    text = "No arm meets the near-chance thresholds; none is recommended for release."
    if cands:
        least = min(cands, key=lambda n: ({"chance": 0, "some": 1, "leaks": 2}.get(cands[n]["level"], 3), cands[n]["ppl"] if _num(cands[n]["ppl"]) else 1e9))
        text += f" The least leaky is {least}."
    return {"kind": "recommend", "cls": "none", "text": text + " " + thresholds, "arm": None}


# --- sections ---------------------------------------------------------------

def _section_summary(results: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    verdicts = {name: arm_verdict(name, m, results) for name, m in _models(results)}
    rec = recommend(results, verdicts)
    blocks: list[dict[str, Any]] = [rec]
    blocks += [verdicts[n] for n in verdicts if n != CONTROL]
    if CONTROL in verdicts:
        blocks.append(verdicts[CONTROL])
    return {"id": "summary", "title": "Summary", "blocks": blocks}, rec


def _scalar_extras(arm: dict[str, Any], sec: str) -> dict[str, Any]:
    b = arm.get(sec)
    if not isinstance(b, dict):
        return {}
    return {k: v for k, v in b.items() if _num(v) or isinstance(v, bool)}


def _section_arms(results: dict[str, Any]) -> dict[str, Any]:
    models = _models(results)
    has_emp = any(empirical_epsilon(m)[0] is not None for _, m in models)
    has_ci_tpr = any(isinstance((best_attack(m)[1] or {}).get("tpr_at_1pct_fpr_ci95"), list) for _, m in models)
    has_can = any(_canaries(m) for _, m in models)
    extras: list[tuple[str, str]] = []
    for sec in EXTRA_ARM_SECTIONS:
        keys: list[str] = []
        for _, m in models:
            for k in _scalar_extras(m, sec):
                if k not in keys:
                    keys.append(k)
        extras += [(sec, k) for k in keys[:6]]
    cols = ["arm", "kind", "ε target", "ε accountant"] + (["ε empirical (lower bound)"] if has_emp else []) + \
           ["σ", "q", "steps", "δ", "ppl members", "ppl held-out", "best MIA attack", "AUC", "AUC 95% CI", "TPR@1%FPR"] + \
           (["TPR@1%FPR 95% CI"] if has_ci_tpr else []) + \
           (["mean exposure (bits)", "secrets ranked first"] if has_can else []) + [f"{s}: {k}" for s, k in extras]
    rows = []
    for name, m in models:
        p = m.get("privacy") or {}
        u = m.get("utility") or {}
        att, e = best_attack(m)
        eps = p.get("epsilon")
        acc = p.get("accountant")
        kind = m.get("kind") or ("control" if name == CONTROL else "—")
        eps_cell = _n(eps, ".3f") if eps is not None else {"text": "—" if name == CONTROL else "∞ (no DP)", "cls": "num"}
        if acc and eps is not None:
            eps_cell["title"] = f"{acc.upper()} accountant; RDP {_f(p.get('epsilon_rdp'))}, PLD {_f(p.get('epsilon_pld'))}, PRV {_f(p.get('epsilon_prv'))}"
            eps_cell["text"] += f" ({acc})"
        row: list[Any] = [name, kind, _n(p.get("target_epsilon"), "g"), eps_cell]
        if has_emp:
            ev, eci, esrc = empirical_epsilon(m)
            row.append(_n(ev, ".3f", title=f"from {esrc}" + (f", 95% CI {eci[0]:.3f}–{eci[1]:.3f}" if eci else "") if ev is not None else None))
        row += [_n(p.get("sigma"), ".3f"), _n(p.get("sample_rate"), ".4f"), _n(p.get("steps"), "auto"), _n(p.get("delta"), ".1e"),
                _n(u.get("ppl_members"), ".2f"), _n(u.get("ppl_non_members"), ".2f"), att or "—",
                _n(e.get("auc"), ".3f"), {"text": _ci(e.get("auc_ci95")), "cls": "num"}, _n(e.get("tpr_at_1pct_fpr"), ".3f")]
        if has_ci_tpr:
            row.append({"text": _ci(e.get("tpr_at_1pct_fpr_ci95")), "cls": "num"})
        if has_can:
            cans = _canaries(m)
            row += [_n(mean_exposure(m), ".2f"), {"text": f"{sum(_exposed(c) for c in cans)}/{len(cans)}" if cans else "—", "cls": "num"}]
        for sec, k in extras:
            row.append(_n(_scalar_extras(m, sec).get(k), "auto"))
        rows.append(row)
    blocks: list[dict[str, Any]] = [{"kind": "table", "id": "arms-table", "columns": cols, "rows": rows}]
    # every attack, not only the best
    att_rows = []
    for name, m in models:
        for att, e in (m.get("attacks") or {}).items():
            if isinstance(e, dict):
                att_rows.append([name, att, _n(e.get("auc")), {"text": _ci(e.get("auc_ci95")), "cls": "num"},
                                 _n(e.get("tpr_at_1pct_fpr")), _n(e.get("tpr_at_0_1pct_fpr")),
                                 _n(e.get("n_members"), "auto"), _n(e.get("n_non_members"), "auto")])
    if att_rows:
        blocks.append({"kind": "table", "caption": "All attacks", "columns": ["arm", "attack", "AUC", "AUC 95% CI", "TPR@1%FPR", "TPR@0.1%FPR", "members", "non-members"], "rows": att_rows})
    data = results.get("data") or {}
    if data:
        blocks.append({"kind": "p", "cls": "note", "text": "Data: " + ", ".join(f"{k} {_f(v, 'auto')}" for k, v in data.items() if not isinstance(v, (dict, list)))})
    return {"id": "arms", "title": "Arms", "blocks": blocks}


def _privacy_points(results: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    pts = []
    for name, m in results["arms"].items():
        att, e = best_attack(m)
        pts.append({"name": name, "epsilon": (m.get("privacy") or {}).get("epsilon"), "auc": e.get("auc"),
                    "auc_ci": e.get("auc_ci95"), "exposure": mean_exposure(m),
                    "ppl": (m.get("utility") or {}).get("ppl_non_members")})
    base = results.get("base_model") or {}
    ctrl = {"auc": best_attack(base)[1].get("auc"), "exposure": mean_exposure(base),
            "ppl": (base.get("utility") or {}).get("ppl_non_members")}
    return pts, ctrl


def _section_tradeoff(results: dict[str, Any]) -> dict[str, Any] | None:
    from . import plots

    pts, ctrl = _privacy_points(results)
    if not any(_num(p["auc"]) or _num(p["ppl"]) for p in pts):
        return None
    svg = plots.privacy_utility(pts, ctrl)
    return {"id": "tradeoff", "title": "Privacy–utility trade-off", "blocks": [
        {"kind": "figure", "svg": Markup(svg),
         "caption": "ε spent (accountant) on a log axis; arms without DP at ∞ on the right. Leakage (best MIA AUC with 95% CI, "
                    "mean canary exposure) and held-out perplexity; dotted lines: the base control (never saw the members)."}]}


def _section_roc(results: dict[str, Any]) -> dict[str, Any] | None:
    from . import plots

    models = {}
    for name, m in _models(results):
        curves = {}
        for att, e in (m.get("attacks") or {}).items():
            roc = e.get("roc") if isinstance(e, dict) else None
            if isinstance(roc, dict) and roc.get("fpr") and roc.get("tpr"):
                curves[att] = (roc["fpr"], roc["tpr"])
        if curves:
            models[name] = curves
    if not models:
        return None
    return {"id": "roc", "title": "ROC curves (log–log)", "blocks": [
        {"kind": "figure", "svg": Markup(plots.roc_curves(models)),
         "caption": "True against false positive rate on log axes, which magnifies the low-FPR region that matters for privacy; "
                    "the dashed diagonal is chance. One panel per arm, one curve per attack."}]}


def _section_canaries(results: dict[str, Any]) -> dict[str, Any] | None:
    from . import plots

    series = {name: [(int(c["repeats"]), c.get("exposure")) for c in _canaries(m)] for name, m in _models(results)}
    series = {k: v for k, v in series.items() if v}
    if not series:
        return None
    mx = next((c.get("max_exposure") for _, m in _models(results) for c in _canaries(m) if _num(c.get("max_exposure"))), None)
    chance = (results.get("data") or {}).get("canary_chance_exposure")
    svg = plots.canary_exposure(series, mx, chance if _num(chance) else None)
    reps = sorted({r for pts in series.values() for r, _ in pts})
    rows = []
    for name, m in _models(results):
        cans = _canaries(m)
        if not cans:
            continue
        row: list[Any] = [name]
        for r in reps:
            vals = [c["exposure"] for c in cans if int(c["repeats"]) == r and _num(c.get("exposure"))]
            row.append(_n(sum(vals) / len(vals) if vals else None, ".2f"))
        row.append({"text": f"{sum(_exposed(c) for c in cans)}/{len(cans)}", "cls": "num"})
        rows.append(row)
    return {"id": "canaries", "title": "Canary exposure vs repetitions", "blocks": [
        {"kind": "figure", "svg": Markup(svg),
         "caption": "Exposure = log2(candidates) − log2(rank of the true secret). At the red line the secret is the model's top guess; "
                    "the dotted line is what a model that never saw it scores on average."},
        {"kind": "table", "caption": "Mean exposure (bits) by repetition count", "columns": ["arm"] + [f"{r}×" for r in reps] + ["ranked first"], "rows": rows}]}


_CAT_KEYS = ("by_category", "by_label", "leaks_by_category", "leaks_by_label", "per_category", "per_label", "categories", "counts")
_COUNT_KEYS = ("leaked", "n_leaked", "leaks", "count", "n", "extracted", "n_extracted")


def category_counts(block: Any) -> dict[str, float] | None:
    """label → count from a ``pii`` block, if it has such a mapping."""
    if not isinstance(block, dict):
        return None
    cands = [block.get(k) for k in _CAT_KEYS] + [block]
    for c in cands:
        if isinstance(c, dict) and c:
            out = {}
            for k, v in c.items():
                if _num(v):
                    out[str(k)] = float(v)
                elif isinstance(v, dict):
                    n = next((v[x] for x in _COUNT_KEYS if _num(v.get(x))), None)
                    if n is not None:
                        out[str(k)] = float(n)
            if out and (c is not block or all(str(k).isupper() for k in out)):
                return out
    return None


def _section_pii(results: dict[str, Any], mask: Masker) -> dict[str, Any] | None:
    from . import plots

    blocks_by_arm = {n: m.get("pii") for n, m in _models(results) if m.get("pii") is not None}
    if not blocks_by_arm:
        return None
    counts = {n: c for n, b in blocks_by_arm.items() if (c := category_counts(b))}
    blocks: list[dict[str, Any]] = []
    if counts:
        blocks.append({"kind": "figure", "svg": Markup(plots.grouped_bars(counts, "PII values leaked", "PII leaks by category")),
                       "caption": "Ground-truth PII values of the training members that appear in the model's generations, by category."})
        cats = list(dict.fromkeys(c for d in counts.values() for c in d))
        blocks.append({"kind": "table", "columns": ["arm"] + cats,
                       "rows": [[n] + [_n(d.get(c), "auto") for c in cats] for n, d in counts.items()]})
    for n, b in blocks_by_arm.items():
        blocks.append({"kind": "h3", "text": n})
        blocks += generic_blocks(_strip_examples(b), mask)
    return {"id": "pii", "title": "PII leaks by category", "blocks": blocks}


def _section_pii_attacks(results: dict[str, Any]) -> dict[str, Any] | None:
    """Lukas et al.'s three attacks: one table, every figure beside its chance level and floor."""
    from ..audit.pii_eval import PII_TABLE_COLUMNS, pii_table_rows

    rows = [[n, *r] for n, m in _models(results) if m.get("pii_attacks") for r in pii_table_rows(m["pii_attacks"])]
    if not rows:
        return None
    return {"id": "pii-attacks", "title": "PII attacks (Lukas et al. 2023)", "blocks": [
        {"kind": "table", "columns": ["arm", *PII_TABLE_COLUMNS], "rows": rows,
         "caption": "Extraction: PII tagged in unprompted samples, minus what the base model emits; reconstruction: a "
                    "masked slot filled with sampled candidates, lowest perplexity wins; inference: the same over |C| "
                    "candidates of the true type. The non-member floor is the same attack on values never trained on."}]}


def _section_defences(results: dict[str, Any]) -> dict[str, Any] | None:
    """What the data defences did, measured against the ground truth."""
    rows = []
    for n, arm in (results.get("arms") or {}).items():
        d = arm.get("defences") or {}
        scrub, dd = d.get("scrub") or {}, d.get("dedup") or {}
        q = (scrub.get("quality") or {}).get("overall") or {}
        left = {k: v for k, v in (scrub.get("pii_in_training") or {}).items() if k in scrub.get("labels", ())}
        copies = dd.get("canary_copies") or {}
        if not d:
            continue
        rows.append([n, _n(q.get("recall")) if q else "—", _n(q.get("precision")) if q else "—",
                     f"{sum(v['values_left'] for v in left.values())} of {sum(v['ground_truth_spans'] for v in left.values())}"
                     if left else "—",
                     f"{dd['n_removed']} of {dd['n_in']}" if dd else "—",
                     f"{sum(v['after'] for v in copies.values())} of {sum(v['before'] for v in copies.values())}" if copies else "—",
                     _n(arm.get("n_train_records"), "auto")])
    if not rows:
        return None
    return {"id": "defences", "title": "Data defences", "blocks": [
        {"kind": "table", "columns": ["arm", "scrubber recall", "scrubber precision", "identifying PII left in training",
                                      "records removed by dedup", "canary copies after dedup", "records trained on"],
         "rows": rows, "caption": "Span-level recall/precision of the scrubber on the members' ground-truth PII; "
                                  "values still present in the text the arm was trained on."}]}


def _strip_examples(b: Any) -> Any:
    if isinstance(b, dict):
        return {k: v for k, v in b.items() if not _is_example_key(k)}
    return b


def _is_example_key(k: str) -> bool:
    k = k.lower()
    return any(w in k for w in ("example", "sample", "generation", "leaked_text", "texts"))


def _section_generic_arm(results: dict[str, Any], sec: str, title: str, mask: Masker) -> dict[str, Any] | None:
    blocks: list[dict[str, Any]] = []
    for n, m in _models(results):
        if m.get(sec) is None:
            continue
        blocks.append({"kind": "h3", "text": n})
        blocks += generic_blocks(_strip_examples(m[sec]), mask)
    if not blocks:
        return None
    return {"id": sec, "title": title, "blocks": blocks}


def _section_empirical(results: dict[str, Any]) -> dict[str, Any] | None:
    from . import plots

    rows = []
    for name, m in results["arms"].items():
        ev, ci, src = empirical_epsilon(m)
        if ev is None:
            continue
        rows.append((name, m, (m.get("privacy") or {}).get("epsilon"), ev, ci, src))
    if not rows:
        return None
    table = []
    for n, m, acc, ev, ci, src in rows:
        summ = m.get("empirical_epsilon") if isinstance(m.get("empirical_epsilon"), dict) else {}
        bound = summ.get("dp_bound") if isinstance(summ.get("dp_bound"), dict) else None
        if acc is None:
            check = "no DP claim to check"
        elif summ.get("exceeds_accountant") or (_num(ev) and _num(acc) and ev > acc + 1e-9):
            check = "VIOLATION: lower bound above the accountant's ε — the DP guarantee does not hold; check the implementation"
        else:
            check = "ok: below the accountant's ε"
        if bound is not None:
            check += ("; operating points within TPR ≤ e^ε·FPR + δ" if bound.get("ok", True)
                      else f"; VIOLATION of TPR ≤ e^ε·FPR + δ (max excess {_f(bound.get('max_excess'), '.3g')})")
        table.append([n, _n(acc, ".3f") if acc is not None else {"text": "∞ (no DP)", "cls": "num"}, _n(ev, ".3f"),
                      {"text": f"{ci[0]:.3f}–{ci[1]:.3f}" if ci else "—", "cls": "num"}, src,
                      _n(summ.get("alpha"), "g"), _n(summ.get("delta"), ".1e"), check])
    svg = plots.epsilon_compare([(n, acc if _num(acc) else None, ev if _num(ev) else None, ci) for n, _, acc, ev, ci, _ in rows])
    procedure = next((r[1]["empirical_epsilon"].get("procedure") for r in rows
                      if isinstance(r[1].get("empirical_epsilon"), dict) and r[1]["empirical_epsilon"].get("procedure")), None)
    blocks: list[dict[str, Any]] = [
        {"kind": "figure", "svg": Markup(svg), "caption": "The accountant's ε is a proven upper bound; the empirical ε, from an attack's "
                                                          "TPR/FPR with confidence bounds, is a lower bound. A lower bound above the upper bound means a bug."},
        {"kind": "table", "columns": ["arm", "accountant ε", "empirical ε (lower bound)", "95% CI", "attack", "α", "δ", "check"], "rows": table}]
    if procedure:
        blocks.append({"kind": "p", "cls": "note", "text": f"Procedure: {procedure}."})
    return {"id": "empirical-epsilon", "title": "Empirical ε vs accountant ε", "blocks": blocks}


def _section_tests(results: dict[str, Any], mask: Masker) -> dict[str, Any] | None:
    blocks: list[dict[str, Any]] = []
    for k in TEST_KEYS:
        if results.get(k) not in (None, {}, []):
            blocks += _tests_blocks(results[k], mask, None)
    for n, m in _models(results):
        for k in TEST_KEYS:
            if m.get(k) not in (None, {}, []):
                blocks += _tests_blocks(m[k], mask, n)
    if not blocks:
        return None
    return {"id": "tests", "title": "Statistical tests", "blocks": blocks}


def _tests_blocks(obj: Any, mask: Masker, arm: str | None) -> list[dict[str, Any]]:
    if isinstance(obj, dict) and obj and all(isinstance(v, dict) for v in obj.values()):
        obj = [{"comparison": k, **v} for k, v in obj.items()]
    return generic_blocks(obj, mask, caption=arm)


def _example_texts(block: Any) -> list[str]:
    out: list[str] = []
    if isinstance(block, dict):
        for k, v in block.items():
            if _is_example_key(k) and isinstance(v, list):
                for x in v:
                    if isinstance(x, str):
                        out.append(x)
                    elif isinstance(x, dict):
                        t = next((x[f] for f in ("text", "generated", "generation", "completion", "sample", "output", "leaked", "value") if isinstance(x.get(f), str)), None)
                        if t is not None:
                            out.append(t)
    elif isinstance(block, list):
        out += [x for x in block if isinstance(x, str)]
    return out


def _section_examples(results: dict[str, Any], run_dir: Path | None, mask: Masker, show_pii: bool) -> dict[str, Any] | None:
    canaries = load_canaries(run_dir)
    blocks: list[dict[str, Any]] = []
    for name, m in results["arms"].items():
        rows = []
        for c in _canaries(m):
            if not _exposed(c):
                continue
            src = canaries.get(str(c["canary_id"]))
            if src:
                text = str(src.get("prefix", "")) + str(src.get("secret", "")) + str(src.get("suffix", ""))
            else:
                text = "(canary text not available: render with the run directory)"
            rows.append([c["canary_id"], {"text": mask(text), "cls": "example"}, _n(c.get("repeats"), "auto"),
                         f"rank {_f(c.get('rank'), 'g')} of {_f(c.get('n_candidates'), 'auto')}"])
        for sec in EXTRA_ARM_SECTIONS:
            for t in _example_texts(m.get(sec))[:20]:
                rows.append([sec, {"text": mask(t), "cls": "example"}, "—", "—"])
        if rows:
            blocks.append({"kind": "h3", "text": f"{name} ({len(rows)})"})
            blocks.append({"kind": "table", "columns": ["source", "leaked text", "repeats", "how"], "rows": rows[:50]})
            if len(rows) > 50:
                blocks.append({"kind": "p", "cls": "note", "text": f"First 50 of {len(rows)} shown."})
    if not blocks:
        return None
    head = ("PII is shown UNMASKED (--show-pii)." if show_pii else
            "PII is masked: every ground-truth PII value of the run's splits and canaries, and anything shaped like an SSN, e-mail, phone number or MRN. "
            "Rerun `privleak report RUN_DIR --show-pii` to reveal it.")
    return {"id": "examples", "title": "Examples of leaked text", "blocks": [{"kind": "p", "cls": "note", "text": head}] + blocks}


def _section_repro(results: dict[str, Any], source: str, digest: str | None) -> dict[str, Any]:
    cfg = results.get("config") or {}
    tool = results.get("tool") or {}
    facts = [["schema version", results.get("schema_version")], ["tool", f"{tool.get('name', 'privleak')} {tool.get('version', '?')}"],
             ["seed", _f(cfg.get("seed"), "auto")], ["profile", cfg.get("profile", "—")], ["results file", source]]
    if digest:
        facts.append(["results sha256", digest])
    blocks: list[dict[str, Any]] = [{"kind": "table", "columns": ["", ""], "rows": facts}]
    if results.get("warnings"):
        blocks.append({"kind": "h3", "text": "Warnings"})
        blocks.append({"kind": "list", "cls": "warnings", "items": list(results["warnings"])})
    if results.get("versions"):
        blocks.append({"kind": "table", "caption": "Package versions", "columns": ["package", "version"],
                       "rows": [[k, v] for k, v in results["versions"].items()]})
    dur = results.get("durations_s") or {}
    if dur:
        total = sum(v for v in dur.values() if _num(v))
        blocks.append({"kind": "table", "caption": "Durations per stage (not reproducible)", "columns": ["stage", "seconds"],
                       "rows": [[k, _n(v, ".1f")] for k, v in dur.items()] + [["total", _n(total, ".1f")]]})
    if cfg:
        blocks.append({"kind": "h3", "text": "Configuration"})
        blocks.append({"kind": "pre", "text": _compact_json(cfg)})
    blocks.append({"kind": "p", "cls": "note", "text": "Everything in results.json except durations is identical for the same config and seed."})
    return {"id": "reproducibility", "title": "Reproducibility", "blocks": blocks}


def _compact_json(obj: Any) -> str:
    """Indented JSON with lists of scalars kept on one line."""
    import re

    text = json.dumps(obj, indent=2, ensure_ascii=False)
    return re.sub(r"\[\s*([^\[\]{}]*?)\s*\]", lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]" if m.group(1) else "[]", text)


def _section_other(results: dict[str, Any], mask: Masker) -> dict[str, Any] | None:
    blocks: list[dict[str, Any]] = []
    for k, v in results.items():
        if k in KNOWN_TOP or k in TEST_KEYS:
            continue
        blocks.append({"kind": "h3", "text": k})
        blocks += generic_blocks(v, mask)
    known_sec = KNOWN_ARM | set(EXTRA_ARM_SECTIONS) | set(TEST_KEYS) | {"empirical_epsilon"}
    for n, m in _models(results):
        for k, v in m.items():
            if k in known_sec or (n == CONTROL and k in ("kind", "path", "spec")):
                continue
            blocks.append({"kind": "h3", "text": f"{n}: {k}"})
            blocks += generic_blocks(v, mask)
    if not blocks:
        return None
    return {"id": "other", "title": "Other results", "blocks": blocks}


# --- rendering --------------------------------------------------------------

def _template():
    import jinja2

    text = resources.files("privleak.report").joinpath("templates/report.html.j2").read_text(encoding="utf-8")
    env = jinja2.Environment(autoescape=True, trim_blocks=False, lstrip_blocks=False, undefined=jinja2.StrictUndefined)
    env.undefined = jinja2.Undefined  # optional block keys are simply absent
    return env.from_string(text)


def _make_masker(run_dir: Path | None, show_pii: bool) -> Masker:
    if show_pii:
        return lambda s: s
    return PiiMasker(known_pii_values(run_dir)).mask


def render_report(results: dict[str, Any], run_dir: str | Path | None = None, show_pii: bool = False,
                  source: str | None = None) -> str:
    """The HTML report of one run (a self-contained page) from its validated results."""
    validate_results(results, source=source or "results.json")
    rd = Path(run_dir) if run_dir is not None else None
    mask = _make_masker(rd, show_pii)
    digest = None
    if rd is not None and (rd / "results.json").is_file():
        digest = hashlib.sha256((rd / "results.json").read_bytes()).hexdigest()
    src = source or (str(rd / "results.json") if rd is not None else "results.json")
    summary, rec = _section_summary(results)
    sections = [summary, _section_arms(results), _section_tradeoff(results), _section_roc(results),
                _section_canaries(results), _section_pii(results, mask), _section_pii_attacks(results),
                _section_defences(results), _section_empirical(results),
                _section_tests(results, mask), _section_generic_arm(results, "extraction", "Extraction", mask),
                _section_generic_arm(results, "guard", "Output guard", mask),
                _section_examples(results, rd, mask, show_pii), _section_other(results, mask),
                _section_repro(results, src, digest)]
    sections = [s for s in sections if s]
    cfg = results.get("config") or {}
    data = results.get("data") or {}
    tool = results.get("tool") or {}
    title = f"PrivLeak audit — {rd.name if rd is not None else 'run'}"
    meta = [f"{len(results['arms'])} arm(s): {', '.join(results['arms'])}",
            f"data: {data.get('source', 'unknown')}", f"seed {_f(cfg.get('seed'), 'auto')}"]
    if rec.get("arm"):
        meta.append(f"recommended: {rec['arm']}")
    return _template().render(title=title, meta=meta, sections=sections, show_pii=show_pii,
                              tool_version=tool.get("version", "?"), source=src)


def write_report(run_dir: str | Path, show_pii: bool = False, out: str | Path | None = None) -> Path:
    """Render ``RUN_DIR/results.json`` to ``report.html`` (or ``out``); returns the path written."""
    rd = Path(run_dir).expanduser()
    results = load_results(rd)
    html = render_report(results, rd if rd.is_dir() else rd.parent, show_pii=show_pii,
                         source=str(rd if rd.is_file() else rd / "results.json"))
    target = Path(out) if out is not None else (rd if rd.is_dir() else rd.parent) / "report.html"
    try:
        write_text(target, html)
    except OSError as exc:
        raise UserError(f"{target}: cannot write the report ({exc.strerror or exc}); choose a writable path with --out") from None
    return target


# --- compare ----------------------------------------------------------------

def _flat_config(cfg: Any) -> dict[str, Any]:
    return {k: v for k, v in _flatten(cfg)} if isinstance(cfg, dict) else {}


def render_compare(runs: Sequence[dict[str, Any]], names: Sequence[str] | None = None) -> str:
    """Side-by-side comparison of several runs (validated results dicts)."""
    from . import plots

    if len(runs) < 1:
        raise UserError("compare: give at least one run directory (two or more to compare)")
    names = list(names) if names else [f"run {i + 1}" for i in range(len(runs))]
    for n, r in zip(names, runs):
        validate_results(r, source=n)
    mask: Masker = PiiMasker({}).mask
    recs = {}
    sum_rows = []
    for n, r in zip(names, runs):
        verdicts = {a: arm_verdict(a, m, r) for a, m in _models(r)}
        rec = recommend(r, verdicts)
        recs[n] = rec
        cfg = r.get("config") or {}
        dur = r.get("durations_s") or {}
        sum_rows.append([n, rec.get("arm") or "none", ", ".join(r["arms"]), _f(cfg.get("seed"), "auto"), cfg.get("profile", "—"),
                         (r.get("data") or {}).get("source", "—"),
                         _n(sum(v for v in dur.values() if _num(v)) if dur else None, ".0f"), str(len(r.get("warnings") or []))])
    sections: list[dict[str, Any]] = [{"id": "summary", "title": "Summary", "blocks": [
        {"kind": "table", "columns": ["run", "recommended arm", "arms", "seed", "profile", "data", "total s", "warnings"], "rows": sum_rows}]
        + [{"kind": "p", "text": f"{n}: {recs[n]['text']}"} for n in names]}]
    # arms side by side: one row per arm name, a column group per run
    arm_names = list(dict.fromkeys([CONTROL] + [a for r in runs for a in r["arms"]]))
    metrics = [("ε", lambda m: (m.get("privacy") or {}).get("epsilon"), ".2f"),
               ("AUC", lambda m: best_attack(m)[1].get("auc"), ".3f"),
               ("TPR@1%", lambda m: best_attack(m)[1].get("tpr_at_1pct_fpr"), ".3f"),
               ("exposure", mean_exposure, ".2f"),
               ("ppl held-out", lambda m: (m.get("utility") or {}).get("ppl_non_members"), ".2f")]
    cols = ["arm"] + [f"{n}: {label}" for n in names for label, _, _ in metrics]
    rows = []
    for a in arm_names:
        row: list[Any] = [a]
        for r in runs:
            m = dict(_models(r)).get(a)
            for label, fn, spec in metrics:
                v = fn(m) if m is not None else None
                if label == "ε" and v is None and m is not None and a != CONTROL:
                    v = math.inf  # trained without DP
                row.append(_n(v, spec))
        rows.append(row)
    points = [(n, a, best_attack(m)[1].get("auc"), (m.get("utility") or {}).get("ppl_non_members"))
              for n, r in zip(names, runs) for a, m in _models(r)]
    sections.append({"id": "arms", "title": "Arms side by side", "blocks": [
        {"kind": "table", "id": "compare-table", "columns": cols, "rows": rows},
        {"kind": "figure", "svg": Markup(plots.compare_scatter(points)), "caption": "Each marker is one arm of one run: lower and further left is better."}]})
    flats = [_flat_config(r.get("config")) for r in runs]
    keys = list(dict.fromkeys(k for f in flats for k in f))
    diff = [[k] + [_value_text(f.get(k), mask) if k in f else "—" for f in flats]
            for k in keys if len({json.dumps(f.get(k), sort_keys=True) for f in flats}) > 1]
    sections.append({"id": "config-diff", "title": "Configuration differences", "blocks": [
        {"kind": "table", "columns": ["setting"] + names, "rows": diff} if diff else {"kind": "p", "text": "The runs have the same configuration."}]})
    vers = [r.get("versions") or {} for r in runs]
    vkeys = list(dict.fromkeys(k for v in vers for k in v))
    vdiff = [[k] + [str(v.get(k, "—")) for v in vers] for k in vkeys if len({v.get(k) for v in vers}) > 1]
    sections.append({"id": "versions", "title": "Version differences", "blocks": [
        {"kind": "table", "columns": ["package"] + names, "rows": vdiff} if vdiff else {"kind": "p", "text": "Same package versions."}]})
    warn = [f"{n}: {w}" for n, r in zip(names, runs) for w in r.get("warnings") or []]
    if warn:
        sections.append({"id": "warnings", "title": "Warnings", "blocks": [{"kind": "list", "cls": "warnings", "items": warn}]})
    return _template().render(title="PrivLeak comparison — " + " vs ".join(names), meta=[f"{len(runs)} runs"], sections=sections,
                              show_pii=False, tool_version=(runs[0].get("tool") or {}).get("version", "?"), source=", ".join(names))


def write_compare(run_dirs: Iterable[str | Path], out: str | Path) -> Path:
    """Load, validate and compare run directories (or results.json files); write the HTML to ``out``."""
    paths = [Path(p).expanduser() for p in run_dirs]
    runs = [load_results(p) for p in paths]
    names = [p.name if p.is_dir() else p.parent.name or p.name for p in paths]
    seen: dict[str, int] = {}
    for i, n in enumerate(names):  # disambiguate equal directory names
        if names.count(n) > 1:
            seen[n] = seen.get(n, 0) + 1
            names[i] = f"{n} ({seen[n]})"
    html = render_compare(runs, names)
    target = Path(out)
    try:
        write_text(target, html)
    except OSError as exc:
        raise UserError(f"{target}: cannot write the comparison ({exc.strerror or exc}); choose a writable path with --out") from None
    return target
