"""The broken-DP table of issue 45 from the results.json of the runs of bench/configs/fdp_table*.yaml.

The measurement: three audits in one run directory (the second and third retrain and re-attack dp-8 only,
the one arm whose stage keys carry ``dp.debug_break``; the other arms' stages are reused), then the table:

    export PYTHONPATH=$PWD/src D=runs/fdp-table
    for c in fdp_table fdp_table_no_noise fdp_table_no_clip; do
      /work/shared/tools/measure --label $c -- .venv/bin/privleak run -c bench/configs/$c.yaml --out $D \
        && cp $D/results.json $D-$c.json
    done
    .venv/bin/python bench/fdp_table.py $D-fdp_table.json $D-fdp_table_no_noise.json $D-fdp_table_no_clip.json

Prints one Markdown row per arm: every arm of a run with no ``dp.debug_break``, and only the broken arms of a
run with one (its other arms are the clean run's models, reused from the run directory: the script checks
that their one-run guess counts are the clean run's, and says so when they are not). Columns: the claimed ε
(per record; per person for a user-level arm), Steinke et al.'s one-run bound (``one_run_epsilon``, at the
summary's α), the f-DP bounds of the in/out and the reconstruction game (each at the level the alarm allotted
it: the largest ε of the DP-SGD curves at the arm's q and T the guesses refute), the secrets decoded, the
white-box gradient canaries' bound (the ε of the smallest noise multiplier their readings refute, at the level the
alarm allotted them), the alarm's decision (which routes reject, p against level) and whether the alarm had the power to catch the arm
broken. A non-private arm (the baseline) has no claim; its f-DP bounds are its guesses read against the
curves of the run's record-level DP-SGD arm of largest ε, at that arm's levels — what that arm's power
check reads.
"""

from __future__ import annotations

import argparse
import sys

from privleak.audit.alarms import canary_curves, fdp_alarm_test, reconstruction_alarm_test
from privleak.report.schema import load_results
from privleak.results import AuditResults

ROUTES = ("one_run", "one_run_fdp", "one_run_kary", "whitebox")
SHORT = {"one_run": "Steinke", "one_run_fdp": "f-DP in/out", "one_run_kary": "reconstruction",
         "whitebox": "white-box"}


def _breaks(res: AuditResults) -> dict[str, str]:
    cfg = res.config if isinstance(res.config, dict) else {}
    return dict((cfg.get("dp") or {}).get("debug_break") or {})


def _fmt(x: float | None, nd: int = 2) -> str:
    return "—" if x is None else f"{x:.{nd}f}"


def _reference_bounds(res: AuditResults, name: str) -> tuple[str, str, str]:
    """(in/out bound, reconstruction bound, against whom) of a non-private arm's guesses, read against the curves
    of the run's record-level DP-SGD arm of largest ε at its levels."""
    # the record-level DP-SGD arm of largest ε (dp-8 here) before any other kind
    dp = [(a.kind == "dp", a.privacy.epsilon, n) for n, a in res.arms.items()
          if a.privacy is not None and canary_curves(a.privacy)]
    one = res.arms[name].one_run_epsilon
    if not dp or res.alarms is None or one is None or not one.candidates:
        return "—", "—", ""
    ref = max(dp)[2]
    p = res.arms[ref].privacy
    curves = canary_curves(p)
    level = {o.route: o.level for o in res.alarms.outcomes if o.arm == ref}
    counts = [(c.guesses, c.correct) for c in one.candidates]
    inout = fdp_alarm_test(name, one.m, counts, curves, p.delta).bound(level["one_run_fdp"])
    rec = one.reconstruction
    kary = None
    if rec is not None and rec.candidates and "one_run_kary" in level:
        kary = reconstruction_alarm_test(name, rec.m, rec.k, [(c.guesses, c.correct) for c in rec.candidates],
                                         curves, p.delta).bound(level["one_run_kary"])
    return _fmt(inout), _fmt(kary), f" (against {ref}'s curves)"


def row(res: AuditResults, name: str, label: str) -> str:
    arm = res.arms[name]
    one, p = arm.one_run_epsilon, arm.privacy
    rec = one.reconstruction if one is not None else None
    decoded = f"{rec.reconstructed} of {rec.m}" if rec is not None else "—"
    auc = _fmt(one.canary_auc, 3) if one is not None else "—"
    steinke = _fmt(one.epsilon_steinke) if one is not None and one.available else "—"
    if p is None:
        inout, kary, against = _reference_bounds(res, name)
        return (f"| {label} | none | {steinke} | {inout}{against} | {kary} | {decoded} | {auc} | — | no claim to test "
                f"| — |")
    claimed = p.epsilon if p.unit == "person" else p.epsilon_per_record
    unit = "person" if p.unit == "person" else "record"
    outs = {o.route: o for o in (res.alarms.outcomes if res.alarms else []) if o.arm == name and o.route in ROUTES}
    fdp, kary, white = outs.get("one_run_fdp"), outs.get("one_run_kary"), outs.get("whitebox")
    rejected = [f"{SHORT[r]} p = {o.p_value:.2g} ≤ {o.level:.2g}" for r, o in outs.items() if o.rejected]
    decision = ("**VIOLATED** (" + "; ".join(rejected) + ")") if rejected else (
        "no alarm (smallest p/level: " + (f"{min(o.p_value / o.level for o in outs.values()):.3g}" if outs else "—")
        + ")")
    power = res.alarms.power.get(name) if res.alarms else None
    checked = "—" if power is None else ("yes" if power.verified else "no")
    return (f"| {label} | {claimed:.2f} per {unit} | {steinke} | {_fmt(fdp.bound_at_level if fdp else None)} | "
            f"{_fmt(kary.bound_at_level if kary else None)} | {decoded} | {auc} | "
            f"{_fmt(white.bound_at_level if white else None)} | {decision} | {checked} |")


def _counts(res: AuditResults, name: str) -> tuple:
    one = res.arms[name].one_run_epsilon
    if one is None:
        return ()
    rec = one.reconstruction
    return (tuple((c.guesses, c.correct) for c in one.candidates),
            tuple((c.guesses, c.correct) for c in rec.candidates) if rec is not None else ())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="results.json of each run (the clean one first)")
    args = ap.parse_args(argv)
    runs = [(path, load_results(path)) for path in args.results]
    clean = next((r for _, r in runs if not _breaks(r)), None)
    print("| arm | claimed ε | Steinke ε ≥ | f-DP in/out ε ≥ | reconstruction ε ≥ | secrets decoded | "
          "canary AUC | white-box ε ≥ | alarm | power: checked |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    notes = []
    for path, res in runs:
        broken = _breaks(res)
        for name, arm in res.arms.items():
            if broken and name not in broken:
                if clean is not None and name in clean.arms and _counts(res, name) != _counts(clean, name):
                    notes.append(f"{path}: {name}'s guess counts differ from the clean run's (not the same model?)")
                continue
            if arm.one_run_epsilon is None:
                continue
            print(row(res, name, f"{name} ({broken[name]})" if name in broken else name))
    for path, res in runs:
        if res.alarms is not None:
            print(f"\n{path}: {res.alarms.statement}")
    for n in notes:
        print(f"\nNOTE: {n}", file=sys.stderr)
    return 1 if notes else 0


if __name__ == "__main__":
    raise SystemExit(main())
