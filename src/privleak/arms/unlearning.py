"""What the unlearning kinds share: the forget set in their settings, their details, verdict, section and tables.

The kinds (:mod:`.retrain`, :mod:`.unlearn_ga`, :mod:`.unlearn_sisa`) each
answer one erasure request — the audit's forget set
(:mod:`privleak.data.unlearning`) — and are judged on it
(:mod:`.forgetting`): ``retrain`` against the control, every other one
against ``retrain``. The retained members are not what they are judged on:
their leakage is the attacks' (the same verdict figures), and none of them is
a release recommendation — they answer "was this person removed", not "which
model to deploy".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..attacks.inputs import FORGET_SET
from ..core.present import Cell, Note, Section, Table, interval, n, t
from ..core.typed import ArmDetails
from ..policy import forget_plan
from .base import ArmInputs, ArmJudging, ArmKind, ArmPresentation
from .forgetting import ForgettingAssessment, assess_forgetting
from .registry import PRESENTATION, ArmSpec

if TYPE_CHECKING:  # results imports every attack, and torch with them: kinds load before any work
    from ..results import ArmResult, AuditResults, Verdict

RETRAIN = "retrain"

LABELS = {"forgotten": "FORGOTTEN", "not_forgotten": "NOT FORGOTTEN", "over_forgotten": "OVER-FORGOTTEN",
          "inconclusive": "INCONCLUSIVE", "untested": "NOT TESTED"}


def forget_settings(cfg: Any) -> dict[str, Any]:
    """The forget set's settings (policy defaults filled in): part of every unlearning arm's key."""
    u = cfg.unlearning
    return forget_plan(u.forget_fraction, u.forget_count, u.canary_fraction, u.seed, cfg.seed)


class UnlearningDetails(ArmDetails):
    """What every unlearning arm reports: what it was made from, and its forget set against its reference."""

    made_from: str  # "the base model", or the arm it unlearns from
    assessment: ForgettingAssessment


class UnlearningKind(ArmKind):
    """The shared behaviour of the unlearning kinds; a subclass sets ``name``, its model and its ``Details``."""

    alone = True
    needs: tuple = (FORGET_SET,)
    shadows = False
    after: tuple[str, ...] = (RETRAIN,)
    #: Who the arm is judged against: ``retrain`` (or "control" for retrain itself).
    versus = RETRAIN

    def check(self, cfg: Any, spec: ArmSpec, names: list[str]) -> None:
        if self.versus == RETRAIN and RETRAIN not in names:
            raise ValueError(f"arm '{spec.name}' is judged against retrain (the model trained without the forget "
                             "set); list retrain too")
        count = cfg.unlearning.forget_count
        if count is not None and cfg.data.path is None and count >= cfg.data.synthetic.n_members:
            # The synthetic members hold at most one person per record; the exact count of persons with PII is
            # known only once the corpus is drawn (data.unlearning.draw_forget_set refuses what is left then).
            raise ValueError(f"unlearning.forget_count = {count}: the synthetic members are "
                             f"{cfg.data.synthetic.n_members} records, so at most {cfg.data.synthetic.n_members - 1} "
                             "persons can be forgotten with one left to retain; lower forget_count or give "
                             "forget_fraction (e.g. 0.1)")
        if "forget_membership" not in cfg.selected_attacks():
            raise ValueError(f"arm '{spec.name}' is judged by the forget_membership attack; add it (or the membership "
                             "family) to attacks.select")

    # ------------------------------------------------------------------ results

    def own_details(self, inputs: ArmInputs) -> dict[str, Any]:
        """The kind's own fields of its :attr:`Details` (besides ``made_from`` and ``assessment``)."""
        return {}

    def made_from(self) -> str:
        return f"the {self.source} arm's model" if self.source else "the base model"

    def result(self, name: str, inputs: ArmInputs, common: dict[str, Any]) -> ArmResult:
        arm = super().result(name, inputs, common)
        ref = inputs.control if self.versus == "control" else inputs.assembled.get(self.versus)
        canaries = list(((inputs.record or {}).get("forget") or {}).get("canary_ids", []))
        assessment = assess_forgetting(arm.attacks, ref.attacks if ref is not None else {}, self.versus, canaries)
        arm.details = self.Details(made_from=self.made_from(), assessment=assessment,  # type: ignore[misc]
                                   **self.own_details(inputs))
        return arm



class UnlearningJudging(ArmJudging):
    """Judged on its forget set against its reference (:mod:`.forgetting`); it answers an erasure request and
    is never the release recommendation."""

    recommendable = False

    def verdict(self, name: str, arm: ArmResult, results: AuditResults) -> Verdict | None:
        a = arm.details.assessment if isinstance(arm.details, UnlearningDetails) else None
        if a is None:
            return None
        level = a.outcome if a.outcome != "untested" else "none"
        head = a.headline()
        versus = "the control (base model)" if a.versus == "control" else a.versus
        tests = f"{a.n_tests} one-sided tests, Holm at family-wise α = {a.alpha:g}"
        if a.outcome == "forgotten":
            text = (f"Shown forgotten: no test tells its forget set from {versus}'s ({tests}), and every figure is "
                    f"shown within its margin of {versus}'s (two one-sided tests at α = {a.alpha:g}).")
        elif a.outcome == "inconclusive":
            text = (f"Not shown forgotten: no test tells its forget set from {versus}'s ({tests}), but "
                    + "; ".join(a.unsettled[:3]) + (f"; and {len(a.unsettled) - 3} more" if len(a.unsettled) > 3 else "")
                    + ".")
        elif a.outcome == "untested":
            text = "The forget set could not be tested: " + "; ".join(a.reasons) + "."
        else:
            what = "still knows the forget set" if a.outcome == "not_forgotten" else \
                "knows the forget set worse than a model that never saw it, which singles it out"
            text = f"It {what}: " + "; ".join(a.reasons) + "."
        text += (" The retained members are judged by the attacks as for any arm; an unlearning arm answers "
                 "an erasure request and is not a release recommendation.")
        figures = [f"forget-set {m.attack} AUC {m.auc:.3f} vs {m.auc_reference:.3f} ({a.versus}), Δ {m.diff:+.3f} "
                   f"[{interval(m.diff_ci95)}]" for m in a.membership]
        if head is not None:
            figures.insert(0, f"MUSE PrivLeak ({head.attack}) {head.privleak:+.3f} [{interval(head.privleak_ci95)}]")
        if a.canaries is not None:
            c = a.canaries
            figures.append(f"{c.n} forgotten canaries: exposure {c.mean_exposure:.2f} vs {c.mean_exposure_reference:.2f} "
                           f"bits, extracted {c.extracted} vs {c.extracted_reference}")
        if a.pii is not None:
            figures.append(f"forgotten PII values extracted {a.pii.extracted}/{a.pii.n} vs "
                           f"{a.pii.extracted_reference}/{a.pii.n_reference}"
                           + (f"; persons with a value out: {a.pii.model_only} by this model only, "
                              f"{a.pii.reference_only} by {a.versus} only, of {a.pii.persons} ({a.pii.test})"
                              if a.pii.persons is not None else f" ({a.pii.test})"))
        from ..results import Verdict

        return Verdict(level=level, label=LABELS[a.outcome], text=text, findings=a.reasons, figures=figures,
                       unsettled=a.unsettled,
                       error_control=(f"Not / over-forgotten: Holm over the {a.n_tests} one-sided tests (both ways) at "
                                      f"family-wise α = {a.alpha:g}. FORGOTTEN: every figure within its margin of the "
                                      f"reference's ({a.versus}) by two one-sided tests at α = {a.alpha:g} "
                                      "(intersection–union)."))



class UnlearningPresentation(ArmPresentation):
    """The unlearning section and console table (drawn once, by the first unlearning kind present), and the
    sentences a kind adds about its arms under them (:meth:`notes_for`)."""

    def notes_for(self, name: str, arm: ArmResult) -> list[str]:
        """Sentences about one of its arms under the unlearning table (e.g. SISA's shards)."""
        return []

    def _first_present(self, results: AuditResults) -> bool:
        """Whether this kind is the first unlearning kind among the run's arms (the one that draws the shared
        section and table, so they appear once)."""
        first = next((PRESENTATION[a.kind] for a in results.arms.values()
                      if isinstance(PRESENTATION.get(a.kind), UnlearningPresentation)), None)
        return first is self

    def sections(self, results: AuditResults) -> list[Section]:
        if not self._first_present(results):
            return []
        rows, notes = unlearning_rows(results)
        f = results.data.forget
        head = (f"Forget set: {forget_count(results)}, {f.n_forget_records} member records "
                f"({f.n_retain_records} retained; of the members' {f.n_member_persons} persons with PII and "
                f"{f.n_canaries} planted canaries). Each unlearning arm is compared with retrain on the same "
                "forgotten persons (one record each) and as many held-out non-members; retrain with the control. "
                "Δ AUC: DeLong's paired interval; PrivLeak: MUSE's relative gap (Shi et al. 2024), 0 = retrain. "
                "Seconds: what answering the request took (retrain: training without the forget set; unlearn-ga: "
                "unlearning; SISA: retraining the shards that held a forgotten person).") if f else ""
        blocks = [Note(head)]
        line = unlearning_recommendation(results)
        if line:
            blocks.append(Note(line))
        return [Section("unlearning", "Unlearning (forget on request)", [
            *blocks, Table(COLUMNS, rows, caption="Each unlearning arm against its reference on the forget set. "
                                                  + reading_note(results)),
            *[Note(x) for x in notes]])]

    def console_tables(self, results: AuditResults) -> list[Table]:
        if not self._first_present(results):
            return []
        rows, _ = unlearning_rows(results, console=True)
        title = "Unlearning — each arm's forget set against its reference (retrain; retrain against the control)"
        if results.data.forget is not None:
            title += f"; forget set: {forget_count(results)}"
        caption = " ".join(x for x in (unlearning_recommendation(results), reading_note(results)) if x)
        return [Table(CONSOLE_COLUMNS, rows, console_title=title, console_caption=caption)]


COLUMNS = ["arm", "verdict", "vs", "forget AUC (attack)", "Δ AUC [95% CI]", "PrivLeak [95% CI]",
           "most telling attack: Δ AUC [95% CI], p (level)", "forgotten canaries: exposure (vs), extracted",
           "forgotten PII (vs)", "NLL forget / retain / held-out", "G", "seconds (× retrain)"]
#: The console's narrower table: the headline attack's AUC and Δ in one cell; MUSE's PrivLeak (Δ / AUC_retrain)
#: and G (none without a best arm, which unlearning audits seldom have) are in the report.
CONSOLE_COLUMNS = ["arm", "verdict", "vs", "forget AUC vs ref (attack), Δ [95% CI]",
                   "most telling attack: Δ AUC [95% CI], p (level)", "forgotten canaries: exposure (vs), extracted",
                   "forgotten PII (vs)", "NLL forget / retain / held-out", "seconds (× retrain)"]


def forget_count(results: AuditResults) -> str:
    """Who was forgotten, counted as ``splits/forget.json`` lists them: persons and canaries (each canary is its
    own made-up person there; the membership attacks evaluate the real persons, the canaries are read off
    exposure)."""
    f = results.data.forget
    if f is None:
        return ""
    canaries = len(f.canary_ids)
    return (f"{f.n_persons} persons and {canaries} planted canar{'y' if canaries == 1 else 'ies'} "
            f"(forget.json's {f.n_persons + canaries} entries)")


def _telling(a: ForgettingAssessment) -> Any:
    """The forget-set attack that differs most from the reference, either way (smallest one-sided p): where
    over-forgetting (the forget set standing out by being *less* likely) or remaining knowledge shows first."""
    if not a.membership:
        return None
    return min(a.membership, key=lambda m: (min(m.p_greater, m.p_less), m.attack))


def reading_note(results: AuditResults) -> str:
    """What the table's figures do not say by themselves: the level each test is decided at, and why the
    reference model (retrain) is not at AUC 0.5 on people it never saw."""
    arms = [a for a in results.arms.values() if isinstance(a.details, UnlearningDetails)]
    if not arms:
        return ""
    a0 = arms[0].details.assessment
    text = (f"Intervals are 95 % each, but a verdict tests every comparison of its row (each attack both ways, the "
            f"canaries, the PII) at α = {a0.alpha:g} split between them — the level in brackets beside the most "
            "telling attack's one-sided p — so an interval may exclude 0 while the verdict stays FORGOTTEN.")
    retrain = results.arms.get(RETRAIN)
    d = retrain.details if retrain is not None else None
    head = d.assessment.headline() if isinstance(d, UnlearningDetails) else None
    if head is not None and d.assessment.n_forget:
        k = d.assessment.n_forget
        se = (1 / (6 * k)) ** 0.5
        text += (f" retrain never saw the forgotten persons, yet scores AUC {head.auc:.2f} ({head.attack}) on them: "
                 f"the forget set's records and the held-out non-members are {k} per side (an AUC's standard error "
                 f"near 0.5 is then about {se:.2f}), and they differ in what a model learns from everyone — the "
                 "institution's templates and phrasing, shared by the forgotten persons and the retained ones — so "
                 "the side whose templates the model fits better scores as 'member'. That is why every unlearning arm "
                 "is compared with retrain on the same records, never with 0.5.")
    return text


def unlearning_recommendation(results: AuditResults) -> str:
    """One line: which unlearning arm answers the erasure request, and why — read off the verdicts as the verdict
    layer gave them (only an arm shown FORGOTTEN against retrain qualifies) and the utility each kept."""
    own = {n: a for n, a in results.arms.items() if isinstance(a.details, UnlearningDetails)}
    if not own:
        return ""
    base_s = _seconds(results, RETRAIN)

    def nll(name: str) -> float | None:
        return own[name].details.assessment.nll.get("holdout")

    def cost(name: str) -> str:
        secs = _seconds(results, name)
        return f", {secs / base_s:.2f}× retrain's time" if secs is not None and base_s else ""

    fine = sorted((n for n, a in own.items() if n != RETRAIN and a.details.assessment.outcome == "forgotten"
                   and a.details.assessment.versus == RETRAIN),
                  key=lambda n: (nll(n) if nll(n) is not None else float("inf"), n))
    ref = nll(RETRAIN) if RETRAIN in own else None
    if fine:
        best = fine[0]
        why = (f"FORGOTTEN against retrain{cost(best)}, held-out NLL {nll(best):.3f} vs retrain's {ref:.3f}"
               if nll(best) is not None and ref is not None else f"FORGOTTEN against retrain{cost(best)}")
        others = f"; also FORGOTTEN: {', '.join(fine[1:])} (more held-out NLL)" if len(fine) > 1 else ""
        return (f"Recommended for the erasure request: {best} — {why}: of the arms no test tells from retrain, it "
                f"keeps the most utility{others}.")
    rest = ", ".join(f"{n} {LABELS.get(a.details.assessment.outcome, a.details.assessment.outcome.upper())}"
                     for n, a in own.items() if n != RETRAIN)
    if RETRAIN not in own:
        return f"No unlearning arm is recommended: none is shown FORGOTTEN ({rest})."
    return ("Recommended for the erasure request: retrain — it never saw the forgotten persons (exact unlearning), "
            "and no cheaper arm was shown to forget them" + (f" ({rest})." if rest else "."))


def _seconds(results: AuditResults, name: str) -> float | None:
    """What answering the request took: the kind's own timed phase (its ``phases_s``) — SISA's and GA's
    ``unlearn``, retrain's ``fit``."""
    dur = results.durations_s
    for key in (f"train/{name}/unlearn", f"derive/{name}/unlearn", f"train/{name}/fit"):
        if dur.get(key) is not None:
            return dur[key]
    return None


def unlearning_rows(results: AuditResults, console: bool = False) -> tuple[list[list[Cell | str]], list[str]]:
    """One row per unlearning arm (:data:`COLUMNS`, or :data:`CONSOLE_COLUMNS`), and the notes its kind adds
    (SISA's shard figures)."""
    rows: list[list[Cell | str]] = []
    notes: list[str] = []
    base_s = _seconds(results, RETRAIN)
    for name, arm in results.arms.items():
        d = arm.details
        if not isinstance(d, UnlearningDetails):
            continue
        a = d.assessment
        head = a.headline()
        secs = _seconds(results, name)
        ratio = f" (×{secs / base_s:.2f})" if secs is not None and base_s and name != RETRAIN else ""
        c, p = a.canaries, a.pii
        nll = " / ".join("—" if a.nll.get(k) is None else f"{a.nll[k]:.3f}" for k in ("forget", "retain", "holdout"))
        g = arm.utility.gain_recovered
        tell = _telling(a)
        level = a.alpha / max(1, a.n_tests)  # each test's share of the family-wise α (arms/forgetting.py)
        verdict = t(LABELS.get(a.outcome, a.outcome.upper()))
        telling = (t(f"{tell.diff:+.3f} [{interval(tell.diff_ci95)}] ({tell.attack}), p = "
                     f"{min(tell.p_greater, tell.p_less):.2g} ({level:.2g})") if tell else t("—"))
        canaries = t(f"{c.mean_exposure:.2f} ({c.mean_exposure_reference:.2f}) bits, {c.extracted}/{c.n}") if c else t("—")
        pii = t(f"{p.extracted}/{p.n} ({p.extracted_reference}/{p.n_reference})") if p else t("—")
        seconds = t(f"{secs:.1f}{ratio}") if secs is not None else t("—")
        if console:
            rows.append([name, verdict, a.versus,
                         t(f"{head.auc:.3f} vs {head.auc_reference:.3f} ({head.attack}), {head.diff:+.3f} "
                           f"[{interval(head.diff_ci95)}]") if head else t("—"),
                         telling, canaries, pii, t(nll), seconds])
        else:
            rows.append([name, verdict, a.versus,
                         t(f"{head.auc:.3f} vs {head.auc_reference:.3f} ({head.attack})") if head else t("—"),
                         t(f"{head.diff:+.3f} [{interval(head.diff_ci95)}]") if head else t("—"),
                         t(f"{head.privleak:+.3f} [{interval(head.privleak_ci95)}]") if head else t("—"),
                         telling, canaries, pii, t(nll), n(g, ".2f") if g is not None else t("—"), seconds])
        shown = PRESENTATION.get(arm.kind)
        if isinstance(shown, UnlearningPresentation):
            notes += shown.notes_for(name, arm)
    return rows, notes

__all__ = ["COLUMNS", "CONSOLE_COLUMNS", "RETRAIN", "UnlearningDetails", "UnlearningJudging", "UnlearningKind",
           "UnlearningPresentation", "forget_count", "forget_settings",
           "reading_note", "unlearning_recommendation", "unlearning_rows"]
