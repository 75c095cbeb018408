"""Issue 49 item 6, a first run a newcomer can read: the console and the report on results built here.

What a first user met on the smoke tour: verdict lines with labels only (``dp-8: INCONCLUSIVE`` while dp-8
recovered G = 0.03); "not evidence" only in ``--help``; G = 3.29 for the baseline, never explained; headers that
do not match their cells ("canary NLL in / out" holding one number, a "chance · floor" table holding neither, a
client-level column with no word on what a client is) and figures without a unit or meaning ("ppl generic",
"−54.8 %", ``|C| = 4``, compare's "exposure" without bits, "AUC" without the attack).
"""

from __future__ import annotations

import io

from rich.console import Console
from test_bad_inputs_files import valid_results


def _results(**config):
    from privleak.report.schema import validate_results

    raw = valid_results()
    raw["config"] = config
    raw["arms"]["baseline"]["utility"]["gain_recovered"] = 3.29
    return validate_results(raw)


def _text(table) -> str:
    buf = io.StringIO()
    Console(file=buf, width=250).print(table)
    return buf.getvalue()


def test_a_verdict_line_shows_the_figures_that_decide_it():
    from privleak.report.console import verdict_lines

    lines = verdict_lines(_results())
    dp = next(x for x in lines if x.startswith("dp-8:"))
    assert dp.startswith("dp-8: NEAR CHANCE — G = 0.03; ε ≤ 7.996 per record, ≤ 115.6 per person (8 records) at "
                         "δ = 6.3e-04; strongest attack: LOSS AUC 0.530 (control 0.520)"), dp
    base = next(x for x in lines if x.startswith("baseline:"))
    assert "G = 3.29" in base and "no formal ε (not DP)" in base and "strongest attack: LOSS AUC 0.670" in base


def test_the_smoke_profile_says_it_is_a_tour_in_its_own_output(tmp_path):
    from privleak.report.console import verdict_lines
    from privleak.report.html import render_report
    from privleak.report.views import TOUR

    smoke = _results(profile="smoke")
    lines = verdict_lines(smoke)
    assert lines[0] == TOUR and "not evidence" in TOUR and lines[-1] == "(smoke profile: a tour, not evidence)"
    page = render_report(smoke)
    assert page.index("not evidence of anything") < page.index('id="scorecard"')  # before the first figure
    assert "smoke profile: a tour, not evidence" in page
    assert TOUR not in verdict_lines(_results(profile="quick")) and "not evidence" not in render_report(_results())


def test_g_above_one_is_explained_where_it_is_printed():
    from privleak.report.console import utility_table
    from privleak.report.html import render_report

    text = _text(utility_table(_results()))
    assert "G above 1 — baseline (G = 3.29)" in " ".join(text.split())
    assert "G above 1 — baseline (G = 3.29)" in render_report(_results())


def test_headers_match_their_cells_and_figures_carry_their_units():
    from privleak.report.console import utility_table

    text = " ".join(_text(utility_table(_results())).split())
    assert "L private (nats)" in text and "ppl public vs base" in text and "ppl generic" not in text
    assert "generic vs base" not in text and "public: generic held-out text no arm trained on" in text


def test_an_attack_table_promises_chance_and_floor_only_where_its_cells_show_them():
    from privleak.attacks.one_run_canaries import OneRunCanaryResult
    from privleak.report.console import attack_tables

    r = _results()
    for arm in (r.base_model, *r.arms.values()):
        arm.attacks["one_run_canaries"] = OneRunCanaryResult(m=64, n_included=32, score="loss", auc=0.6,
                                                             nll_included=4.48, nll_excluded=4.67)
    [table] = attack_tables(r, "canaries")
    text = " ".join(_text(table).split())
    assert "NLL inserted (nats)" in text and "NLL left out (nats)" in text
    assert "chance" not in str(table.title) and "floor" not in str(table.title)  # no cell shows either



def test_an_attack_table_promises_the_floor_alone_where_its_cells_show_only_floors():
    """The smoke tour's extraction table said "(in brackets: chance · non-member floor)" above cells showing a floor
    only ("0.0% (0/30) (floor 0.0%)"): the title names exactly the baselines its cells show."""
    from privleak.attacks.extraction import PrefixCell, PrefixExtractionResult
    from privleak.report.console import attack_tables

    r = _results()
    for arm in (r.base_model, *r.arms.values()):
        arm.attacks["prefix_extraction"] = PrefixExtractionResult(
            cells=[PrefixCell(k=16, m=16, n_members=30, members_extracted=0, n_non_members=30,
                              non_members_extracted=0)], n_members_total=30, n_non_members_total=30)
    [table] = [t for t in attack_tables(r, "extraction") if "result" in str(t.title)]
    assert str(table.title).endswith("(in brackets: non-member floor)"), table.title
    assert "(floor 0.0%)" in " ".join(_text(table).split())

def test_the_client_level_attack_says_what_a_client_is():
    from privleak.attacks.membership.client import ClientMembershipResult
    from privleak.report.console import attack_tables

    r = _results()  # no federated arm
    client = ClientMembershipResult(auc=0.6, auc_ci95=(0.4, 0.8), score="loss", n_member_clients=20,
                                    n_heldout_clients=20, records_per_client=(1, 4, 36))
    for arm in (r.base_model, *r.arms.values()):
        arm.attacks["client_membership"] = client
    table = next(t for t in attack_tables(r, "membership") if "Client-level" in str(t.title))
    text = " ".join(_text(table).split())
    assert "0.600 [0.40–0.80]" in text and "20 / 20" in text
    assert "A client is a group of records one party holds" in text and "federated or not" in text


def test_attack_figures_are_named_for_what_they_hold():
    from privleak.attacks.one_run_canaries import OneRunCanaryResult
    from privleak.attacks.pii_reconstruction import PiiReconstructionResult

    labels = [f.label for f in OneRunCanaryResult.model_construct(auc=0.6, m=64, n_included=32, nll_included=4.48,
                                                                   nll_excluded=4.67).headline()]
    assert "NLL inserted (nats)" in labels and "NLL left out (nats)" in labels
    assert not any("in / out" in x for x in labels)
    import inspect

    assert "|C|" not in inspect.getsource(PiiReconstructionResult.headline)  # "best of 4 sampled values"


def test_compare_names_the_attack_and_the_unit(tmp_path):
    from privleak.report.compare import render_compare

    page = render_compare([_results(), _results()], names=["a", "b"])
    assert "a: strongest MIA: AUC (attack)" in page and "0.530 (LOSS)" in page
    assert "a: canary exposure (bits)" in page
