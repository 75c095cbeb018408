"""``guard``: the baseline model served behind the output guard (:mod:`privleak.defenses.guard`).

The guard filters generated text: every attack that reads text only runs
through it, so "leaks stopped" is the served arm's count minus the guard
arm's, attack by attack; :mod:`.guard_costs` adds what it costs on benign
output. It changes no training, so it has no model of its own and is never
recommended: anyone with the model's scores or weights is not stopped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..attacks.inputs import CANARIES, SPLITS
from ..core.inputs import provides
from ..core.present import Cell, Note, Section, Table, n, pct, t
from .base import ArmInputs, ArmJudging, ArmKind, ArmPresentation, ExtraStage, KindSettings, Served
from .guard_report import GuardReport, Interventions
from .inputs import GUARD as GUARD_INPUT
from .registry import ArmSpec, register

if TYPE_CHECKING:
    from ..results import ArmResult, AuditResults, Verdict


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


def _title(attack: str) -> str:
    from ..attacks.registry import ATTACKS

    spec = ATTACKS.get(attack)
    return f"{spec.title} ({spec.cite})" if spec and spec.cite else attack


def _rate_row(label: str, r: Any) -> list[Cell | str]:
    ci = f"{pct(r.ci95[0])}–{pct(r.ci95[1])}" if r.ci95 else "—"
    return [label, t(f"{r.k}/{r.n}"), t(pct(r.rate)), t(ci)]


@provides(GUARD_INPUT, needs=(SPLITS, CANARIES), pure=True)
def _guard(view: Any) -> Any:
    """The audit's guard: verbatim member windows, canaries and the members' PII inventory, public text allowed."""
    from ..defenses.guard.guard import Guard, inventory_from_records

    s = view[SPLITS]
    guard = Guard.build([r.text for r in s["members"]], canaries=view[CANARIES],
                        inventory=inventory_from_records(s["members"]), threshold=50,
                        allow_texts=[r.text for r in s["public"]])
    guard.warm_up()
    return guard


def _benign_cost(handle: Any, ctx: Any) -> dict[str, Any]:
    """The guard-cost stage: its interventions on benign output (:func:`.guard_costs.benign_false_positives`)."""
    from .guard_costs import benign_false_positives

    return benign_false_positives(handle, ctx).model_dump(mode="json")


class Guarded(ArmKind):
    name = "guard"
    summary = "the baseline model served behind the output guard (filters outputs, changes no training)"
    model = "served"
    source = "baseline"
    shadows = False
    Details = GuardReport
    needs = (GUARD_INPUT,)  # serve: the guard every text-only attack goes through

    def settings(self, cfg, spec: ArmSpec, n_members: int) -> KindSettings:
        return KindSettings(kind="guard")

    def serve(self, handle: Any, ctx: Any) -> Served:
        from .guard_costs import Tally, guard_target

        tally = Tally()
        return Served(target=guard_target(handle, ctx, tally),
                      finish=lambda: {"interventions": {k: v.model_dump(mode="json") for k, v in tally.counts.items()}},
                      on_start=tally.start)

    def extra_stages(self) -> list[ExtraStage]:
        from ..attacks.extraction import VERBATIM_INDEXES
        from ..attacks.inputs import REFERENCE

        return [ExtraStage("guard-cost", "guard.json", _benign_cost, needs=(GUARD_INPUT, VERBATIM_INDEXES, REFERENCE))]

    def details(self, inputs: ArmInputs) -> GuardReport | None:
        report = GuardReport.model_validate(inputs.extra["guard-cost"])
        report.interventions = {k: Interventions.model_validate(v)
                                for k, v in inputs.extra.get("interventions", {}).items()}
        return report

    def result(self, name: str, inputs: ArmInputs, common: dict[str, Any]) -> ArmResult:
        from ..results import ArmResult

        served = inputs.assembled[self.source]
        common = {**common, "utility": served.utility}
        return ArmResult(kind=self.name, serves=self.source, privacy=served.privacy, details=self.details(inputs),
                         **common)



class GuardJudging(ArmJudging):
    """Judged by what it stops and what it costs, never recommended (it changes no training) nor compared."""

    recommendable = False
    compared = False

    def verdict(self, name: str, arm: ArmResult, results: AuditResults) -> Verdict:
        """What the guard stopped and what it costs, in words; a guard never makes an arm "near chance"."""
        from ..results import Verdict

        counts = guard_rows(results, name)
        before, after = sum(r[2] for r in counts), sum(r[3] for r in counts)
        rows = [f"{attack}: {b} → {a} {unit}" for attack, unit, b, a, _ in counts]
        text = f"Behind the output guard, {before - after} of {before} leaks found by the extraction attacks are stopped"
        fp = arm.details.false_positives if isinstance(arm.details, GuardReport) else None
        if fp is not None and fp.overall.rate is not None:
            text += f"; it changes {fp.overall.rate:.0%} of benign outputs (blocks {fp.blocked.rate or 0:.0%})"
        text += (". A guard filters generated text only: anyone with access to the model's scores or weights "
                 "is not stopped, so membership inference on the served model still applies.")
        return Verdict(level="guard", label="GUARDED", text=text, findings=[], figures=rows)



class GuardPresentation(ArmPresentation):
    """Its section and console table: leaks stopped attack by attack, false positives on benign output."""

    def sections(self, results: AuditResults) -> list[Section]:
        out = []
        for name, arm in results.arms.items():
            g = arm.details
            if arm.kind != Guarded.name or not isinstance(g, GuardReport):
                continue
            rows = []
            for attack, unit, before, after, stopped in guard_rows(results, name):
                iv = g.interventions.get(attack)
                rows.append([_title(attack), unit, n(before, "d"), n(after, "d"), t(pct(stopped)),
                             t(f"{iv.outputs_intervened}/{iv.outputs_checked} ({iv.outputs_blocked} blocked)" if iv
                               else "—")])
            fp = g.false_positives
            fprows = [_rate_row("any intervention", fp.overall), _rate_row("blocked", fp.blocked)]
            fprows += [_rate_row(f"by reason: {k}", v) for k, v in fp.by_reason.items()]
            fprows += [_rate_row(f"from {k} prompts", v) for k, v in fp.by_source.items()]
            d = g.guard
            desc = (f"Guard: blocks ≥ {d.get('threshold', '?')}-character verbatim training windows, redacts PII "
                    f"({', '.join(d.get('pii_labels', []))}), never lets a canary secret or a listed member value out; "
                    f"blocked outputs reach the attacker redacted. Benign output: {fp.n_benign} of {fp.n_generated} "
                    f"sampled continuations of non-member and public prefixes ({fp.excluded_member_pii} excluded for "
                    f"holding a member value, {fp.excluded_member_window} for a member window).")
            examples = [[", ".join(e.reasons), "yes" if e.allowed else "no", Cell(e.text, "example")]
                        for e in g.false_positive_examples]
            blocks = [Note(desc),
                      Table(["attack", "leaked item", "without guard", "with guard", "stopped", "outputs changed"], rows,
                            caption=f"The {arm.serves} model's extraction leaks with and without the guard"),
                      Table(["false positives on benign output", "k/n", "rate", "95% CI (Clopper–Pearson)"], fprows)]
            if examples:
                blocks.append(Table(["reasons", "allowed (redacted)", "benign output the guard changed (masked)"],
                                    examples))  # type: ignore[arg-type]
            out.append(Section("guard", "Output guard", blocks))
        return out

    def console_tables(self, results: AuditResults) -> list[Table]:
        out = []
        for name, arm in results.arms.items():
            g = arm.details
            if arm.kind != Guarded.name or not isinstance(g, GuardReport):
                continue
            from ..attacks.registry import ATTACKS

            rows: list[list[Cell | str]] = []
            for attack, _unit, before, after, stopped in guard_rows(results, name):
                rows.append([ATTACKS[attack].title if attack in ATTACKS else attack, str(before), str(after), pct(stopped)])
            fp = g.false_positives
            for label, r in [("false positives (any)", fp.overall), ("false positives (blocked)", fp.blocked),
                             *[(f"false positives ({k})", v) for k, v in fp.by_reason.items()]]:
                rows.append([label, "", f"{r.k}/{r.n}", f"{pct(r.rate)} [{pct(r.ci95[0]) if r.ci95 else '—'}, "
                                                       f"{pct(r.ci95[1]) if r.ci95 else '—'}]"])
            out.append(Table(["measure", "without guard", "with guard", "stopped / rate [95% CI]"], rows,
                             console_title=f"Output guard ({arm.serves} model behind the guard) — leaks stopped, and "
                                           "false positives on benign output"))
        return out


GUARD = register(Guarded(), judging=GuardJudging(), presentation=GuardPresentation())

__all__ = ["GUARD", "Guarded", "guard_rows"]
