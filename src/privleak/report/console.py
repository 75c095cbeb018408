"""The console tables of ``privleak run``: the short form of ``results.json``, read from its typed fields."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from ..attacks.base import FAMILIES, FAMILY_TITLES
from ..core import present as fmt
from ..core.present import Cell
from ..core.present import Table as Block
from ..results import AuditResults
from ..core.terminal import escape_control
from .views import context, family_runs, gain_note, kinds_present, short, shown, tour_note, verdict_figures


def _user(text: str) -> str:
    """A name or value from results.json in a table cell: shown, never obeyed as markup or control."""
    return escape(escape_control(text))


def rich_table(b: Block) -> Table:
    """A presentation table (:mod:`privleak.core.present`) as a rich table: first column left, the rest right."""
    t = Table(title=b.console_title or b.caption, caption=_user(b.console_caption) if b.console_caption else None)
    for i, col in enumerate(b.columns):
        t.add_column(col, justify="left" if i == 0 else "right")
    for row in b.rows:
        t.add_row(*[_user(c.text if isinstance(c, Cell) else str(c)) for c in row])
    return t


#: How the console's privacy table reads, under it (every ε beside its unit and δ; issue 39).
PRIVACY_CAPTION = ("ε: the accountant's upper bound at δ for the arm's unit (record, person or client), target in "
                   "brackets. A record-level arm (dp-ε) holds a record to ε and the person with the most records (k) "
                   "only to 'ε per person'; a user-level arm (dp-user-ε) holds every person to ε and a record to "
                   "'ε per record'; a client-level arm (fed-dp-ε) holds a client to ε, a record to 'ε per record', and a person whose records lie in one client to the same. ε PLD / RDP: the same ε by two other accountants. '≥': lower bounds measured by "
                   "the attacks (one-run: Steinke's ε for any (ε, δ)-DP training / the f-DP tests' — in/out · secrets decoded — the ε of the DP-SGD curves at the arm's q and T they refute · the white-box gradient canaries' — the ε of the noise multipliers at the arm's q and T their readings refute). G: utility gain recovered, only with a best reference (— otherwise).")


def _fdp_bounds(results: AuditResults, name: str) -> str:
    """The f-DP routes' bounds of an arm and the white-box one, "in/out · reconstruction · white-box" (— where the
    audit has none)."""
    got = {o.route: o.bound_at_level for o in (results.alarms.outcomes if results.alarms else []) if o.arm == name}
    return " · ".join(fmt.num(got.get(r), ".2f") for r in ("one_run_fdp", "one_run_kary", "whitebox"))


def privacy_table(results: AuditResults) -> Table:
    t = Table(title="Privacy parameters and utility — every ε with its unit and its δ", caption=PRIVACY_CAPTION)
    for col in ("arm", "unit", "ε (target)", "ε per record", "ε per person", "δ", "ε PLD / RDP", "one-run ε ≥",
                "empirical ε ≥", "σ", "q", "steps", "G"):
        t.add_column(col, justify="left" if col in ("arm", "unit") else "right")
    design = results.data.membership_design
    notes: list[str] = []
    for name, arm in results.models():
        p, emp, one = arm.privacy, arm.empirical_epsilon, arm.one_run_epsilon
        steps = p.steps if p else (arm.training.steps if arm.training else None)
        guarantee = shown(arm).guarantee(arm)
        sigma = p.sigma if p else shown(arm).sigma_value(arm)
        control = arm is results.base_model
        if p is not None:
            unit, spent = p.unit, f"{fmt.num(p.epsilon)} ({fmt.num(p.target_epsilon, 'g')})"
            per_record = fmt.num(p.epsilon_per_record, ".4g")
            per_person = fmt.num(p.epsilon if p.unit == "person" else p.epsilon_person, ".4g")
            if p.person_records and per_person != "—":
                per_person += f" (k = {p.person_records})"
        else:
            # An arm without an accountant ε says what it guarantees instead (in full in the caption, which wraps).
            unit, per_record, per_person = "—", "—", "—"
            spent = "—" if control else ("none †" if guarantee else "∞ (no DP)")
            if guarantee:
                notes.append(f"† {name}: {guarantee}")
        one_s = (f"{fmt.num(one.epsilon_steinke, '.2f')} / {_fdp_bounds(results, name)}" if one and one.available
                 else "—")
        if results.alarms is not None and name in results.alarms.violated:
            one_s = f"[bold red]{one_s} !![/bold red]"
        emp_s = fmt.num(emp.epsilon_lb if emp else None, ".2f")
        if emp is None and design is not None and not design.available:
            emp_s = "unavailable"
        cross = f"{fmt.num(p.epsilon_pld)} / {fmt.num(p.epsilon_rdp)}" if p else "—"
        t.add_row(_user(name), unit, spent, per_record, per_person, fmt.num(p.delta if p else None, ".1e"), cross,
                  one_s, emp_s, fmt.num(sigma, ".3f" if p else "g"),
                  fmt.num(p.sample_rate if p else None, ".4f"), fmt.num(steps, "d"),
                  fmt.num(arm.utility.gain_recovered, ".2f"))
    if notes:  # first, so a short guarantee is never split by the wrapping of the long explanation
        t.caption = f"{'; '.join(_user(n) for n in notes)}. {PRIVACY_CAPTION}"
    return t


def utility_table(results: AuditResults) -> Table:
    """Held-out utility per model — private domain (non-members) and generic public text — and what training cost."""
    caption = ("private: the held-out notes of the members' institution (non-members); public: generic held-out text "
               "no arm trained on — its perplexity's change against the base model shows forgetting (+) or transfer "
               "(−). G: 1 = the best non-private fine-tune's gain over the base model, 0 = none.")
    if note := gain_note(results):
        caption += " " + note
    t = Table(title="Utility and compute — L = held-out log-perplexity (nats/token); G = utility gain recovered "
                    "(L_base − L_arm) / (L_base − L_best)", caption=_user(caption))
    outside = any(arm.utility.gain_recovered_outside_pii is not None for _, arm in results.models())
    cols = ("arm", "L private (nats)", "ppl private", "ppl public", "ppl public vs base", "G",
            *(("G outside PII",) if outside else ()), "steps", "tokens", "train s")
    for col in cols:
        t.add_column(col, justify="left" if col == "arm" else "right")
    base_pub = results.base_model.utility.ppl_public if results.base_model else None
    for name, arm in results.models():
        u, tr = arm.utility, arm.training
        secs = results.durations_s.get(f"train/{name}") if tr else None  # a duration, kept with the others
        change = (u.ppl_public / base_pub - 1) if (u.ppl_public is not None and base_pub) else None
        t.add_row(_user(name), fmt.num(u.nll_non_members, ".3f"), fmt.num(u.ppl_non_members, ".2f"),
                  fmt.num(u.ppl_public, ".2f"), "—" if change is None else f"{change:+.1%}",
                  fmt.num(u.gain_recovered, ".2f"),
                  *((fmt.num(u.gain_recovered_outside_pii, ".2f"),) if outside else ()),
                  fmt.num(tr.steps if tr else None, "d"), fmt.num(tr.tokens if tr else None, ",d"), fmt.num(secs, ".0f"))
    return t


def attack_tables(results: AuditResults, family: str) -> list[Table]:
    """A family's console tables: each result type's own (:meth:`AttackResult.console`), then one table of the
    headline figures of the family's other attacks — one row per model, each figure beside its chance level
    and non-member floor."""
    ctx = context(results)
    out: list[Table] = []
    rest: list[str] = []
    for result_type, runs in family_runs(results, family):
        own = result_type.console(runs, ctx)
        out += [rich_table(b) for b in own]
        if not own:
            rest += list(runs)
    if not rest:
        return out
    cols: list[tuple[str, str]] = []
    for a in rest:
        for _, m in results.models():
            r = m.attacks.get(a)
            if r is not None:
                cols += [(a, f.label) for f in r.headline() if (a, f.label) not in cols]
    rows, shown_bases = [], set()
    for name, m in results.models():
        if not any(a in m.attacks for a in rest):
            continue
        cells = []
        for a, label in cols:
            r = m.attacks.get(a)
            f = next((f for f in r.headline() if f.label == label), None) if r is not None else None
            cells.append("—" if f is None else fmt.figure_text(f))
            if f is not None:
                shown_bases.update(fmt.baseline_kinds(f))
        rows.append((name, cells))
    # The title promises what the cells hold: chance and the non-member floor, each only where some cell shows it.
    promised = " · ".join(w for k, w in (("chance", "chance"), ("floor", "non-member floor")) if k in shown_bases)
    t = Table(title=f"{FAMILY_TITLES[family]} — result" + (f" (in brackets: {promised})" if promised else ""))
    t.add_column("arm")
    for a, label in cols:
        t.add_column(f"{short(a)}: {label}", justify="right")
    for name, cells in rows:
        t.add_row(_user(name), *cells)
    return [*out, t]


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


def budget_table(results: AuditResults) -> Table | None:
    """Which ε a release of the audit's DP arms carries: each alone, all together (composed)."""
    if not results.budget or not any(len(r.arms) > 1 for b in results.budget for r in b.releases):
        return None
    t = Table(title="Privacy budget — the ε a release carries (DP trainings on the same members compose)")
    for col in ("released", "unit", "ε", "ε per person", "δ"):
        t.add_column(col, justify="left" if col in ("released", "unit") else "right")
    for b in results.budget:
        for r in b.releases:
            # The same release at the person: the one figure a user-level arm is accounted at (k: the largest
            # real person's records), so a release mixing dp-ε and dp-user-ε reads on both units.
            person = ("—" if r.epsilon_person is None
                      else f"{fmt.num(r.epsilon_person)} (k = {r.person_records})" if r.person_records
                      else fmt.num(r.epsilon_person))
            t.add_row(", ".join(r.arms) + ("" if len(r.arms) == 1 else " (together)"), b.unit, fmt.num(r.epsilon),
                      person, fmt.num(r.delta, ".1e"))
    return t


def verdict_lines(results: AuditResults) -> list[str]:
    """One line per arm — its verdict (a DP arm's with whether the alarm could have caught it broken: "DP
    implementation checked / unverified") and the figures that decide it (G, ε per record and per person, the
    strongest attack beside the control's figure) — then the recommendation; a smoke run says first that it is
    a tour, not evidence."""
    tour = tour_note(results)
    power = results.alarms.power if results.alarms is not None else {}
    out = [tour] if tour else []
    out += [f"{name}: {arm.verdict.label}"
            + ("" if name not in power else " (DP implementation checked)" if power[name].verified
               else " (DP implementation unverified)")
            + f" — {verdict_figures(name, arm, results)}"
            for name, arm in results.arms.items() if arm.verdict]
    if results.recommendation is not None:
        out.append(results.recommendation.text)
    if tour:
        out.append("(smoke profile: a tour, not evidence)")
    return out


def all_tables(results: AuditResults) -> list[Table]:
    tables = [privacy_table(results), utility_table(results)]
    tables += [t for f in FAMILIES for t in attack_tables(results, f)]
    tables += [defence_table(results)]
    tables += [rich_table(b) for k in kinds_present(results) for b in k.console_tables(results)]
    tables += [release_table(results), budget_table(results)]
    return [t for t in tables if t is not None]
