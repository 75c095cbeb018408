"""The console tables of ``privleak run``: the short form of ``results.json``, read from its typed fields."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from ..attacks.base import FAMILIES, FAMILY_TITLES
from ..attacks.exposure import ExposureResult
from ..attacks.registry import ATTACKS
from ..results import AuditResults
from ..core.terminal import escape_control
from . import fmt


def _user(text: str) -> str:
    """A name from results.json (an arm, a model) in a table cell: shown, never obeyed as markup or control."""
    return escape(escape_control(text))


def _specs(results: AuditResults, family: str, exclude: tuple[str, ...] = ()) -> list[str]:
    """Attacks of ``family`` present in any model, in registry order."""
    present = {a for _, m in results.models() for a in m.attacks}
    return [s.name for s in ATTACKS.values() if s.family == family and s.name in present and s.name not in exclude]


def privacy_table(results: AuditResults) -> Table:
    t = Table(title="Privacy parameters and utility")
    for col in ("arm", "ε target", "ε spent", "ε PLD", "ε RDP", "ε one-run ≥", "ε one-run f-DP ≥", "ε empirical ≥", "σ",
                "q", "steps", "δ", "G"):
        t.add_column(col, justify="left" if col == "arm" else "right")
    design = results.data.membership_design
    for name, arm in results.models():
        p, emp, one = arm.privacy, arm.empirical_epsilon, arm.one_run_epsilon
        steps = p.steps if p else (arm.training.steps if arm.training else None)
        wn = arm.weight_noise
        # A DP-Weights arm has no accountant ε to show: say so instead of a dash (in full in the
        # caption, which wraps, where a narrow cell would be cut).
        spent = "none †" if wn else fmt.num(p.epsilon if p else None)
        if wn:
            t.caption = f"† {name}: {wn.guarantee}" if not t.caption else f"{t.caption}; {name}: {wn.guarantee}"
        one_s = fmt.num(one.epsilon_steinke, ".2f") if one and one.available else "—"
        if one and one.exceeds_accountant:
            one_s = f"[bold red]{one_s} !![/bold red]"
        emp_s = fmt.num(emp.epsilon_lb if emp else None, ".2f")
        if emp is None and design is not None and not design.available:
            emp_s = "unavailable"
        t.add_row(_user(name), fmt.num(p.target_epsilon if p else None, "g"), spent,
                  fmt.num(p.epsilon_pld if p else None), fmt.num(p.epsilon_rdp if p else None),
                  one_s, fmt.num(one.epsilon_fdp if one and one.available else None, ".2f"),
                  emp_s, fmt.num(p.sigma if p else wn.sigma if wn else None, "g" if wn else ".3f"),
                  fmt.num(p.sample_rate if p else None, ".4f"), fmt.num(steps, "d"), fmt.num(p.delta if p else None, ".1e"),
                  fmt.num(arm.utility.gain_recovered, ".2f"))
    return t


def utility_table(results: AuditResults) -> Table:
    """Held-out utility per model — private domain (non-members) and generic public text — and what training cost."""
    t = Table(title="Utility and compute — L = held-out log-perplexity (nats/token); G = utility gain recovered "
                    "(L_base − L_arm) / (L_base − L_best)")
    for col in ("arm", "L private", "ppl private", "ppl generic", "generic vs base", "G", "steps", "tokens", "train s"):
        t.add_column(col, justify="left" if col == "arm" else "right")
    base_pub = results.base_model.utility.ppl_public if results.base_model else None
    for name, arm in results.models():
        u, tr = arm.utility, arm.training
        secs = results.durations_s.get(f"train/{name}") if tr else None  # a duration, kept with the others
        change = (u.ppl_public / base_pub - 1) if (u.ppl_public is not None and base_pub) else None
        t.add_row(_user(name), fmt.num(u.nll_non_members, ".3f"), fmt.num(u.ppl_non_members, ".2f"),
                  fmt.num(u.ppl_public, ".2f"), "—" if change is None else f"{change:+.1%}",
                  fmt.num(u.gain_recovered, ".2f"), fmt.num(tr.steps if tr else None, "d"),
                  fmt.num(tr.tokens if tr else None, ",d"), fmt.num(secs, ".0f"))
    return t


def membership_table(results: AuditResults) -> Table | None:
    names = _specs(results, "membership")
    if not names:
        return None
    d = results.data.membership_design
    unit = f", one record per {d.unit}" if d else ""
    t = Table(title=f"Membership inference — AUC (TPR at 1 % FPR) on {results.data.mia_records_per_side} members vs "
                    f"as many non-members{unit}")
    t.add_column("arm")
    for a in names:
        t.add_column(ATTACKS[a].title, justify="right")
    b = results.blind_baseline
    if b is not None:
        t.add_column("blind (no model)", justify="right")
    for name, arm in results.models():
        mia = arm.membership()
        if not mia:
            continue
        cells = ["—" if a not in mia else f"{mia[a].auc:.3f} ({mia[a].tpr_at_1pct_fpr:.2f})" for a in names]
        for a in names:  # attacks with their own result type (the client-level one): their headline AUC
            if a not in mia:
                figs = [f for f in (arm.attacks[a].headline() if a in arm.attacks else []) if f.fmt == "auc"]
                cells[names.index(a)] = f"{figs[0].value:.3f}" if figs and figs[0].value is not None else "—"
        if b is not None:
            cells.append(f"{b.auc:.3f} ({b.tpr_at_1pct_fpr:.2f})" + (" !!" if name in b.rivalled else ""))
        t.add_row(_user(name), *cells)
    return t


def exposure_table(results: AuditResults) -> Table | None:
    rows = [(n, m.attacks["exposure"]) for n, m in results.models() if isinstance(m.attacks.get("exposure"), ExposureResult)]
    rows = [(n, e) for n, e in rows if e.canaries]
    if not rows:
        return None
    repeats = sorted({c.repeats for _, e in rows for c in e.canaries})
    first = rows[0][1]
    t = Table(title=f"Canary exposure in bits by repetition count (max {first.canaries[0].max_exposure:.1f}, "
                    f"chance ≈ {first.chance_exposure:.1f}); secrets ranked first of {first.canaries[0].n_candidates:,}")
    t.add_column("arm")
    for r in repeats:
        t.add_column(f"{r}×", justify="right")
    t.add_column("ranked first", justify="right")
    for name, e in rows:
        by = e.by_repeats()
        t.add_row(_user(name), *[fmt.num(by.get(r), ".1f") for r in repeats], f"{e.n_ranked_first}/{len(e.canaries)}")
    return t


def family_table(results: AuditResults, family: str) -> Table | None:
    """One row per model, one column per headline figure of each attack of ``family``: every attack renders
    itself from its result model, each figure beside its chance level and non-member floor."""
    names = _specs(results, family, exclude=("exposure",) if family == "canaries" else ())
    if family == "membership" or not names:
        return None
    cols: list[tuple[str, str]] = []
    for a in names:
        for _, m in results.models():
            r = m.attacks.get(a)
            if r is not None:
                cols += [(a, f.label) for f in r.headline() if (a, f.label) not in cols]
    t = Table(title=f"{FAMILY_TITLES[family]} — result (chance · non-member floor)")
    t.add_column("arm")
    for a, label in cols:
        t.add_column(f"{ATTACKS[a].title}: {label}", justify="right")
    for name, m in results.models():
        if not any(a in m.attacks for a in names):
            continue
        cells = []
        for a, label in cols:
            r = m.attacks.get(a)
            f = next((f for f in r.headline() if f.label == label), None) if r is not None else None
            cells.append("—" if f is None else fmt.figure(f))
        t.add_row(_user(name), *cells)
    return t


def defence_table(results: AuditResults) -> Table | None:
    rows = [(n, a.defences) for n, a in results.arms.items() if a.defences is not None]
    if not rows:
        return None
    t = Table(title="Data defences — measured against the ground truth")
    for col in ("arm", "scrubber recall / precision", "identifying PII left in training", "records removed by dedup",
                "canary copies after dedup"):
        t.add_column(col, justify="left" if col == "arm" else "right")
    for name, d in rows:
        q = d.scrub.quality.overall if d.scrub and d.scrub.quality else None
        left = d.scrub.left_in_training() if d.scrub else None
        copies = (d.dedup.canary_copies or {}) if d.dedup else {}
        t.add_row(_user(name), "—" if q is None else f"{fmt.num(q.recall)} / {fmt.num(q.precision)}",
                  "—" if left is None else f"{left[0]} of {left[1]}",
                  "—" if d.dedup is None else f"{d.dedup.n_removed} of {d.dedup.n_in}",
                  "—" if not copies else f"{sum(c.after for c in copies.values())} of {sum(c.before for c in copies.values())}")
    return t


def guard_rows(results: AuditResults, name: str) -> list[tuple[str, str, int, int, float | None]]:
    """(attack, unit, leaks without the guard, with it, fraction stopped) for a guard arm."""
    arm = results.arms[name]
    served = results.arms.get(arm.serves or "")
    out = []
    for attack, guarded in arm.attacks.items():
        plain = served.attacks.get(attack) if served else None
        a, b = (plain.leaked() if plain else None), guarded.leaked()
        if a is not None and b is not None:
            out.append((attack, a.unit, a.k, b.k, (a.k - b.k) / a.k if a.k else None))
    return out


def guard_table(results: AuditResults) -> Table | None:
    name = next((n for n, a in results.arms.items() if a.kind == "guard" and a.guard), None)
    if name is None:
        return None
    arm = results.arms[name]
    t = Table(title=f"Output guard ({arm.serves} model behind the guard) — leaks stopped, and false positives on benign output")
    for col in ("measure", "without guard", "with guard", "stopped / rate [95% CI]"):
        t.add_column(col, justify="left" if col == "measure" else "right")
    for attack, _unit, before, after, stopped in guard_rows(results, name):
        t.add_row(ATTACKS[attack].title if attack in ATTACKS else attack, str(before), str(after), fmt.pct(stopped))
    fp = arm.guard.false_positives
    for label, r in [("false positives (any)", fp.overall), ("false positives (blocked)", fp.blocked),
                     *[(f"false positives ({k})", v) for k, v in fp.by_reason.items()]]:
        t.add_row(label, "", f"{r.k}/{r.n}", f"{fmt.pct(r.rate)} [{fmt.pct(r.ci95[0]) if r.ci95 else '—'}, "
                                             f"{fmt.pct(r.ci95[1]) if r.ci95 else '—'}]")
    return t


def _short(labels: list[str], values: list[float], n: int = 6) -> str:
    cells = [f"{lab} {v:g}" if len(labels) > 1 else f"{v:g}" for lab, v in zip(labels, values)]
    return ", ".join(cells[:n]) + (f", … ({len(cells)} values)" if len(cells) > n else "")


def release_table(results: AuditResults) -> Table | None:
    """The members' summary released under central DP, and the terms learned under local DP."""
    rel = results.data_release
    if rel is None:
        return None
    t = Table(title=f"Released under DP (total ε = {rel.epsilon_total:g})")
    for col in ("statistic", "mechanism", "sensitivity", "noise sd", "ε alone", "released values"):
        t.add_column(col, justify="left" if col in ("statistic", "mechanism", "released values") else "right")
    if rel.summary is not None:
        s = rel.summary
        for q in s.queries:
            t.add_row(q.name, q.mechanism, f"{q.sensitivity:.3g}", f"{q.noise_sd:.3g}", fmt.num(q.epsilon_alone),
                      _short(q.labels, q.values))
        if s.systolic_mean is not None:
            t.add_row("systolic mean (mmHg)", "post-processing", "—", "—", "0", f"{s.systolic_mean:.1f}")
        t.add_row(f"summary: ε = {s.epsilon:.3f} at δ = {s.delta:.1e}", s.accountant, "", "", "",
                  f"unit: {s.unit}; basic composition would say ε = {s.epsilon_basic_composition:.3f}")
    if rel.ldp_terms is not None:
        lt = rel.ldp_terms
        t.add_row(f"frequent terms ({lt.method.upper()}, ε = {lt.epsilon:g}-LDP per member)", "local DP", "", "",
                  f"{lt.epsilon:g}", _short([x for x, _ in lt.terms], [v for _, v in lt.terms], 12) or "none above the noise")
    return t


def verdict_lines(results: AuditResults) -> list[str]:
    out = [f"{name}: {arm.verdict.label}" for name, arm in results.arms.items() if arm.verdict]
    if results.recommendation is not None:
        out.append(results.recommendation.text)
    return out


def all_tables(results: AuditResults) -> list[Table]:
    tables = [privacy_table(results), utility_table(results), membership_table(results), exposure_table(results)]
    tables += [family_table(results, f) for f in FAMILIES]
    tables += [defence_table(results), guard_table(results), release_table(results)]
    return [t for t in tables if t is not None]
