"""The tiers of the test suite, by module name: what ``make test-fast`` runs and what only ``make test`` does.

* **contract**: the plug-in, layer, schema and stage-key contracts (a toy input, kind and attack through the
  plan; every kind × attack × provider; the import layers; the pinned stage keys). No audit.
* **audit**: a test that reads a finished audit (its fixtures reach the shared store, ``audits``), a module that
  starts its own (:data:`STARTS_ITS_OWN`: the start itself is what it tests), a module in :data:`HEAVY`
  (its tests train and attack models for most of a minute or more without an audit), or one of the single slow
  tests of :data:`HEAVY_TESTS`. A run that deselects this tier does not import the modules that are in it by
  name (conftest's ``pytest_ignore_collect``).
* **unit**: everything else.
* **slow**: the ``slow`` mark (full-size statistical simulations), run only with ``-m slow``.

conftest marks each collected test with its tier; ``make test-fast`` runs ``-m "(contract or unit) and not
slow"``. The tiers
are lists here, not folders, so a module keeps its path (and its history) when its tier changes.
"""

from __future__ import annotations

#: The contract tier.
CONTRACT = frozenset({
    "test_contract_toy_input", "test_common", "test_inputs", "test_layers", "test_stage_keys",
    "test_audits_are_shared", "test_attack_registry", "test_plugins",
})

#: Modules that start audits themselves, and why the shared store cannot start them (tests/test_audits_are_shared.py
#: holds every other module to asking the store).
STARTS_ITS_OWN = {
    "shared_audits.py": "the store itself",
    "conftest.py": "interrupted_after_training: presses Ctrl-C mid-run (the resume tests)",
    "test_pipeline_e2e.py": "reproduction with a fresh model cache, and a run killed mid-training then resumed",
    "test_cli_errors.py": "refusals: every `privleak run` here fails at the door, before any work",
    "test_requirement.py": "a requirement refused at the door, before any work",
    "test_scrub_bounds.py": "a record too long for the scrub arm refused at the door, before any work",
    "test_crash_reports.py": "a stage that fails on purpose, in a subprocess",
    "test_run_lock.py": "two runs racing for one run directory",
    "test_process_executor.py": "the local worker processes' own runs, against the sequential shared one",
    "test_ray_executor.py": "Ray's own runs, against the sequential shared one",
    "test_devices.py": "bf16 training's own run (the shared audits train in fp32)",
    "test_smoke_profile.py": "the smoke profile as shipped (the shared audits fix their sizes)",
    "test_dp_audit.py": "an audit over a hand-built run directory (splits planted before the data stage)",
    "test_federated.py": "Flower's own runs, interrupted and resumed",
    "test_foreign_corpus_audit.py": "a user corpus written by the test (another generator's data)",
    "test_pipeline_shadows.py": "a shadow run changed between runs (which stages it redoes)",
    "test_cli_commands.py": "the command line's own flags and output files",
    "test_library.py": "privleak.audit's own run against the shared `privleak run` one (the two doors agree), and "
                       "refusals at the door",
}

#: Modules that train and attack models beyond the session's tiny one, without an audit: the longest groups of
#: conftest's LONGEST_FIRST (from `make test --durations`), and the modules whose tests fine-tune models of their
#: own (DP-SGD, user-level DP, LoRA, shadows, unlearning, exposure's canaries). They run in the audit tier, so
#: that ``make test-fast`` stays within a minute on 2 cores.
HEAVY = frozenset({
    "test_real_tokenizer", "test_long_texts", "test_bad_inputs_budget", "test_user_dp", "test_dp_user_arm",
    "test_unlearning_audit", "test_attack_cmd", "test_worker_orphans",
    "test_dp_fast", "test_dp_train", "test_exposure", "test_guard_audit", "test_lira_rmia", "test_lora_archs",
    "test_lora_bf16", "test_lora_dp", "test_pii_attacks", "test_shadow_attacks", "test_train_fast",
    "test_unlearning", "test_public_q", "test_frozen_prefix", "test_llama_fast", "test_trainer_callback",
    "test_library_docs", "test_whitebox_training",
    # No model, but most of a minute each (the slowest of `make test-fast --durations`): dp_accounting's PLD
    # compositions as the ledger's oracle, 360 DP-SGD runs over seeds, the released summary's accounting, a
    # guard server saturated on purpose.
    "test_budget_units", "test_fdp_seeds", "test_release", "test_guard_pool",
    # schemathesis and a guard app built at import: 5.8 s of every worker's collection.
    "test_guard_contract",
    # A real guard server started and stopped (4.2 s): a service test, not a unit's.
    "test_guard_service",
})

#: Single tests of otherwise quick modules that take seconds each (`make test-fast --durations`, 2026-12-06): the
#: scrubber's cross-person check over two whole corpora, the Monte Carlo oracle of direct group accounting; an
#: attack on GGUF files (an audit in all but name); the refusals replayed in real
#: console-script processes (4.2 s; the same refusals stay in the fast tier in-process); the ledger's
#: dp_accounting oracle (the accountants' own oracle of the same composition stays); dp + scrub's person stamp
#: (Presidio over a corpus).
HEAVY_TESTS = frozenset({
    "test_scrub::test_scrubbing_never_writes_another_persons_value_into_a_record",
    # ≈ 2 s each (`make test-fast --durations`, 2026-12-06 evening): 4,000 simulated TOSTs at the margin,
    # near-dedup over 10,000 records, σ calibrated at three budgets and at the E2E figures by three accountants.
    "test_near_chance::test_tost_error_rate_at_the_margin",
    "test_dedup::test_near_dedup_finds_the_one_near_duplicate_among_10k_records",
    "test_accounting::test_calibrate_sigma_is_monotone",
    "test_accounting::test_e2e_like_setting_pld_and_prv_need_less_noise_than_rdp",
    "test_accountants::test_direct_group_epsilon_many_steps_against_monte_carlo",
    "test_gguf::test_attack_a_gguf_target_with_a_gguf_reference",
    "test_bad_inputs::test_refused_by_a_real_process_before_torch_is_imported",
    "test_ledger::test_three_trainings_compose_as_dp_accounting_says",
    "test_unit_stamp::test_dp_plus_scrub_guarantees_a_person_what_dp_does",
    # 1.1-5.0 s each (`make test-fast --durations=0`, 2026-12-06 night; 20 of the tier's 121 test-seconds): oracle
    # sweeps and simulations. What the fast tier keeps of each path: the PRV bound bit for bit against Opacus's own
    # accountant (not Opacus's PRV against dp_accounting's PLD at 16 settings); the group PMF bit for bit against
    # dp_accounting's and the grid fallback (not direct group accounting against group privacy and quadrature);
    # calibration without a cap and the unreachable target (not σ calibrated tight under three accountants);
    # LDP's analytic expected estimate (not its unbiasedness and stated variance over simulated users); the
    # alarm's power, harness and several-arm false rate (not its validity on exact randomised response, nor the
    # diagnostics' family rate); the empirical-ε helpers (not their bound over simulated Gaussian draws).
    "test_accounting::test_opacus_prv_agrees_with_dp_accounting_pld",
    "test_accountants::test_direct_group_accounting_is_tighter_than_group_privacy",
    "test_accountants::test_direct_group_epsilon_one_step_against_quadrature",
    "test_accounting::test_calibrate_sigma_meets_target_and_is_tight",
    "test_ldp::test_estimates_are_unbiased_with_the_stated_variance",
    "test_alarms::test_alarm_p_value_is_valid_on_exact_randomised_response",
    "test_alarms::test_diagnostic_family_rate_on_independent_scores",
    "test_stats::test_empirical_epsilon_never_exceeds_true_epsilon_gaussian",
    # Six usage errors replayed in real console-script processes (3.9 s; like test_bad_inputs' real-process
    # refusals above): the same cases stay in the fast tier in-process, and the real script's help with them.
    "test_cli_usage_errors::test_the_console_script_refuses_in_one_line",
})

#: Fixtures whose value is a finished audit (or that start one): a test that requests any of them, directly or
#: through another fixture, is in the audit tier.
AUDIT_FIXTURES = frozenset({"audits"})


def tier(module: str, fixturenames: list[str] | tuple[str, ...] = (), name: str = "") -> str:
    """The tier of a test ``name`` (its function's name, parameters stripped) in ``module`` (its name without
    ``.py``) that requests ``fixturenames`` (its whole fixture closure, as pytest's ``item.fixturenames`` gives
    it)."""
    # A test that reads an audit is in the audit tier even in a contract module (the plug-in contract's toy kind run
    # through a real audit): the contract tier starts none.
    if f"{module}::{name}" in HEAVY_TESTS or AUDIT_FIXTURES & set(fixturenames):
        return "audit"
    if module in CONTRACT:
        return "contract"
    return "audit" if module_is_audit(module) else "unit"


def module_is_audit(module: str) -> bool:
    """Whether every test of ``module`` is in the audit tier whatever it requests: a run without that tier need
    not import it (conftest's ``pytest_ignore_collect``)."""
    return module not in CONTRACT and (f"{module}.py" in STARTS_ITS_OWN or module in HEAVY)
