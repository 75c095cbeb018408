"""Shared fixtures: a private model cache and a tiny saved model.

Tests never download anything: every model they use is built here from a
config and saved to a local directory.
"""

from __future__ import annotations

import collections
import os
from pathlib import Path

import pytest

# Before torch is imported (OpenMP reads it once): waiting threads sleep instead of spinning, so a test run that
# shares the machine with other jobs slows down in proportion (privleak.core.threads).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("PRIVLEAK_PROGRESS", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# What the console script sets for itself before transformers loads (cli.common.quiet_libraries): the tests call
# it in this process, where transformers may load first, so the same settings are made here, before it does.
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
# `privleak run` in tests runs its tasks in this process (tests monkeypatch what the tasks call);
# the local worker processes that `auto` picks on a multi-core machine have their own tests.
os.environ.setdefault("PRIVLEAK_EXECUTOR", "sequential")
# One torch thread per test process, serial or under pytest-xdist (one per worker: two workers fill two cores).
# The tests' models are tiny: on 2 cores a second thread only adds synchronisation (measured on
# tests/test_pipeline_e2e.py, test_cli_commands.py, test_dp_audit.py run serially: 117 s at 2 threads, 109 s at
# 1). OpenMP reads OMP_NUM_THREADS when torch loads, and `privleak run` inside a test keeps it (core.threads:
# OMP_NUM_THREADS wins); PRIVLEAK_TEST_THREADS=N runs the suite at N threads instead.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
TEST_THREADS = int(os.environ.get("PRIVLEAK_TEST_THREADS", "1"))
if TEST_THREADS:
    os.environ.setdefault("OMP_NUM_THREADS", str(TEST_THREADS))


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    os.environ["PRIVLEAK_CACHE"] = str(tmp_path_factory.mktemp("privleak-cache"))


@pytest.fixture(scope="session")
def audits(tmp_path_factory: pytest.TempPathFactory, _private_cache):
    """The session's shared audits (tests/shared_audits.py): ``audits.get(cfg)`` runs each distinct configuration
    once and hands back its run directory; copy it (``.copy(dest)``) to change it. One store per process (an
    xdist worker has its own model cache, whose path a run's results name): the xdist groups below keep the
    readers of one audit on one worker."""
    import shared_audits as shared

    shared.DEFAULT_THREADS = default_threads()
    return shared.Audits(tmp_path_factory.mktemp("shared-audits"))


def default_threads() -> int:
    """torch's intra-op threads for every test (``PRIVLEAK_TEST_THREADS``, 1 unless set; 0: every core)."""
    from privleak.core.threads import cores_available

    return TEST_THREADS or cores_available()


@pytest.fixture(autouse=True)
def _torch_threads():
    """Each test starts at the session's thread count: a test (or a `privleak run` inside one) that sets
    torch's threads does not change the figures of the tests after it (float sums depend on the count)."""
    import sys

    def reset() -> None:
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(default_threads())

    reset()
    yield
    reset()  # before the next module's fixtures, which are set up ahead of this fixture


TINY_TEXTS = [
    f"Patient {first} {last} was seen on day {d} for {cond}; phone 555-01{d:02d}."
    for d, (first, last, cond) in enumerate(
        [("Ann", "Lee", "asthma"), ("Bo", "Kim", "gout"), ("Cy", "Ray", "flu"), ("Di", "Fox", "acne")] * 10
    )
] + ["General advice: drink water and sleep well."] * 5


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny GPT-2 (2 layers, 32 dims) + BPE tokenizer saved with save_pretrained."""
    from privleak.models.base import BaseModelSpec, pretrain_base
    from privleak.models.handle import save_handle

    spec = BaseModelSpec(vocab_size=320, n_layer=2, n_embd=32, n_head=2, max_length=96, epochs=2, batch_size=8, lr=3e-3)
    handle = pretrain_base(spec, TINY_TEXTS)
    out = tmp_path_factory.mktemp("tiny-model")
    save_handle(handle, out)
    return out


@pytest.fixture(scope="session")
def tiny_handle(tiny_model_dir: Path):
    from privleak.models.handle import load_handle

    return load_handle(tiny_model_dir)


# A small real audit: the same tiny config every end-to-end test builds on. The smoke profile's attack sizes
# and its 64 one-run audit canaries (the quick profile's 1,000 add ~500 records to every model's training set
# and scoring passes); the data and the model are smaller still.
SMALL = {
    "profile": "smoke",
    "seed": 7,
    # fp32 training whatever the CPU: the suite's figures are then the same on a machine with native bf16 and on
    # one without, and results across torch thread counts agree within test_thread_agreement's tolerance (bf16
    # rounds each product to 8 bits, so a reordered sum moves a trained model by far more). bf16 training has
    # its own tests (test_devices, test_train_fast) and the smoke profile's run trains at the machine's default.
    "compute": {"precision": "fp32"},
    "arms": ["baseline", "dp-4"],
    "data": {"synthetic": {"n_public": 240, "n_members": 120, "n_non_members": 120, "n_population": 20, "n_public_heldout": 40, "phi_fraction": 0.5}},
    "canaries": {"repeats": [1, 8], "per_repeat": 1, "candidates": 200},
    "model": {"max_length": 160, "embedded": {"n_layer": 1, "n_embd": 32, "n_head": 2, "epochs": 1, "vocab_size": 400}},
    "train": {"epochs": 2, "batch_size": 16},
    "dp": {"epsilons": [4], "epochs": 1, "batch_size": 24},
    "attacks": {"bootstrap": 10},
}
# Every kind of arm, and a baseline trained long enough to memorise its canaries (so extraction finds leaks).
ALL_ARMS = {**SMALL, "arms": ["baseline", "best", "dp-8", "scrub", "dedup", "dp-8+scrub", "guard"],
            "canaries": {"repeats": [1, 16], "per_repeat": 1, "candidates": 200},
            "train": {"epochs": 30, "batch_size": 16, "lr": 0.01},
            # 100 audit canaries (½ inserted): with the default 1,000 about 500 extra records swamp
            # the 137 member records and the baseline no longer reliably memorises its 16× canary.
            "one_run": {"canaries": 100, "prefix_words": 2, "secret_words": 3}}


def comparable_results(path: Path) -> dict:
    """results.json less its wall times (``durations_s``)."""
    import json

    r = json.loads((path / "results.json").read_text())
    r.pop("durations_s")
    return r


class Lines(list):
    """A ``notify`` callback that keeps the lines."""

    def __call__(self, line: str) -> None:
        self.append(line)


def interrupted_after_training(cfg, out: Path) -> None:
    """Run ``cfg`` on its executor and press Ctrl-C (raised from the progress callback) once
    train/baseline finishes; checks that the run stopped without results."""
    from privleak import pipeline
    from privleak.executors import make_executor

    def stop_after_training(line: str) -> None:
        if "✓ train/baseline" in line:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pipeline.run_audit(cfg, out, notify=stop_after_training,
                           executor=make_executor(cfg.executor, notify=stop_after_training))
    assert not (out / "results.json").exists()
    assert (out / "stages" / "train_baseline.json").exists()


@pytest.fixture(scope="session")
def sequential_1thread_run(audits):
    """SMALL run sequentially on one torch thread, the parallel executors' default per task: float sums are
    only bit-identical at equal thread counts (the same shared run as SMALL's at the suite's default count)."""
    return audits.get(SMALL, threads=1).out


class AuditedRun:
    """A real audit run through the command line: its directory, console output and typed results."""

    def __init__(self, out: Path, console: str) -> None:
        from privleak.report.schema import load_results

        self.out = out
        self.console = console
        self.results = load_results(out)


@pytest.fixture(scope="session")
def audited(audits) -> AuditedRun:
    """``privleak run`` on the ALL_ARMS config (once per test session), console captured."""
    run = audits.get(ALL_ARMS, via="cli")
    return AuditedRun(run.out, run.console)


# The issue-17 extras on the small audit: a DP-Weights arm (with LiRA shadows made the same way), the data
# summary under central DP and the members' terms under local DP.
EXTRAS = {**SMALL, "arms": ["baseline", "dpw-0.02"],
          "attacks": {**SMALL["attacks"], "select": ["membership", "exposure"]},
          "shadows": {"enabled": True, "n_shadows": 2, "arms": ["dpw-0.02"]}}


@pytest.fixture(scope="session")
def extras_run(audits):
    """``privleak run --dp-summary 2 --ldp-terms 4`` on EXTRAS: (run dir, console, typed results)."""
    run = audits.get(EXTRAS, via="cli", args=("--dp-summary", "2", "--ldp-terms", "4"))
    return run.out, run.console, run.results


# ---------------------------------------------------------------- pytest-xdist: what runs on one worker

#: Modules that read the same shared audit run on one worker (the store is per worker: another worker would run
#: the audit again). Every other module is a group of its own, so its module fixtures are built once.
XDIST_GROUPS = {
    "small": ("test_pipeline_e2e", "test_thread_agreement", "test_process_executor", "test_ray_executor"),  # SMALL
    "all-arms": ("test_no_pii_leaks", "test_report", "test_report_browser", "test_utility", "test_verdicts"),
    "extras": ("test_release", "test_dp_weights"),
    # Presidio and spaCy load once per process (2.3 s): the modules that load them share a worker.
    "presidio": ("test_pii", "test_scrub", "test_arm_data", "test_unit_stamp", "test_guard"),
}
#: The groups that take longest, in the order xdist starts them, so no worker is left alone with a long one at
#: the end (from `make test --durations`; the rest follow in collection order).
LONGEST_FIRST = ("small", "test_real_tokenizer", "test_long_texts", "test_federated", "test_dp_audit", "all-arms",
                 "test_fdp_seeds", "test_trainer_callback", "test_recommendation_seeds", "test_library",
                 "test_requirement", "test_foreign_corpus_audit", "test_budget_units", "test_bad_inputs_budget",
                 "test_run_lock", "test_user_dp", "test_smoke_profile", "test_dp_user_arm", "test_cli_commands",
                 "test_unlearning_audit", "test_crash_reports", "test_attack_cmd", "test_worker_orphans")
_GROUP_OF = {mod: group for group, mods in XDIST_GROUPS.items() for mod in mods}


def xdist_group(nodeid: str) -> str:
    """The group of a test by its node id: its module's entry in XDIST_GROUPS, else the module."""
    module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
    return _GROUP_OF.get(module, module)


def pytest_ignore_collect(collection_path, config):
    """A run that deselects the audit tier (``make test-fast``) does not import the modules that are audit-tier
    by name (tests/tiers.py): they would all be deselected, and importing them is most of a worker's start."""
    if collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    markexpr = config.getoption("markexpr", "")
    if not markexpr:
        return None
    from _pytest.mark.expression import Expression

    import tiers

    runs_audit = Expression.compile(markexpr).evaluate(lambda mark: mark == "audit")
    return True if not runs_audit and tiers.module_is_audit(collection_path.stem) else None


@pytest.hookimpl(tryfirst=True)  # the tiers are marked before `-m` deselects by them
def pytest_collection_modifyitems(config, items):
    """Each test marked with its tier (tests/tiers.py: contract, unit, audit; ``make test-fast`` runs the first
    two); distinct node ids (xdist schedules by node id: of two tests with one id, it runs one); under xdist,
    the longest groups first (the order the scheduler below hands groups out)."""
    import tiers

    for item in items:
        module = item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
        name = getattr(item, "originalname", None) or item.name.partition("[")[0]
        item.add_marker(tiers.tier(module, getattr(item, "fixturenames", ()), name))
    _distinct_node_ids(items)
    if XDIST_WORKER:
        rank = {g: i for i, g in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(xdist_group(item.nodeid), len(rank)))


def _distinct_node_ids(items) -> None:
    """schemathesis names its per-operation tests ``test[GET /healthz]``, ``test[POST /v1/check]``, but under
    pytest 9.2's structured node ids both get the id ``test``: give each its operation as the id's parameters.
    Any other duplicate is an error under xdist rather than a test silently not run."""
    seen: dict[str, list] = {}
    for item in items:
        seen.setdefault(item.nodeid, []).append(item)
    for nodeid, same in seen.items():
        if len(same) > 1 and "[" not in nodeid and all("[" in it.name and hasattr(it, "_id") for it in same):
            for it in same:
                it._id = it._id.with_params(it.name.partition("[")[2].removesuffix("]"))
    if XDIST_WORKER:
        counts = collections.Counter(it.nodeid for it in items)
        dup = sorted(nodeid for nodeid, n in counts.items() if n > 1)
        if dup:
            raise pytest.UsageError(f"tests with the same node id (xdist would run only one of each): {dup}")


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's: unknown where it is not installed
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` by XDIST_GROUPS, groups handed out longest first. xdist's own loadgroup reads
    ``xdist_group`` marks through a node-id suffix that pytest 9.2 no longer keeps (pytest-xdist #1386: every
    test is then scheduled alone), so the groups are derived here from the node ids themselves."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class AuditGroups(LoadScopeScheduling):
        def __init__(self, config, log=None):
            super().__init__(config, log)
            config.option.loadscopereorder = False  # keep the collection's order: longest first

        def _split_scope(self, nodeid: str) -> str:
            return xdist_group(nodeid)

    return AuditGroups(config, log)
