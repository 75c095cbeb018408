"""Real DP-SGD runs cheap enough to repeat over seeds, for the alarm's power and false-alarm rate at test size.

The smallest model whose training memorises audit canaries the way an LM memorises a random secret after a
random prefix: a linear map from a one-hot "prefix" row to ``W`` softmax heads of ``K`` classes (the
secret's words). Canary i's input is row i scaled by ``SCALE`` (its per-sample gradient is ~``SCALE``× the
clip norm, so only clipping bounds it), its secret is W labels drawn uniformly — one of k = K^W values — and
it is in the training data with probability ½; fillers (rows of their own, random labels) make up the rest.
σ is calibrated by PrivLeak's accountant for the run's q and T (:func:`privleak.models.dp_sigma.calibrated_sigma`)
and the step is broken on purpose exactly as :func:`privleak.models.dp_train.broken_step` breaks it.

Two implementations of the same DP-SGD (Poisson sampling at q, per-sample clipping to C, N(0, σ²C²) on the
sum, divided by the expected batch; Abadi et al. 2016):

* :func:`run` — in numpy, every row at once: a row's gradient comes from its own record only, so a step is a
  few array operations (≈ 1 ms). What the over-seeds tests repeat;
* :func:`run_opacus` — the same training through Opacus, set up by PrivLeak's
  :func:`~privleak.models.dp_train.make_private` (seconds per run), for a few seeds.

Each run also carries the audit's white-box gradient canaries (GRADIENT of them, :mod:`privleak.models.gradient_canaries`):
:func:`run_opacus` attaches the product's own :class:`~privleak.models.gradient_canaries.GradientCanaries` to the
Opacus optimizer; :func:`run` adds them to its numpy step as the product's step treats them (in with probability
½, joining at q, gradient 100·C clipped at the step's bound, the step's noise), from a generator of their own so
the training's draws are those of a run without them.

After training the auditor reads the weights only: in/out game score Σ_h log p_h(secret_h | row i) for all m
canaries (:func:`~privleak.audit.one_run.guess_counts`); reconstruction game: every head's argmax for each
included canary, right only if all W are, ranked by the decoded secret's log-probability
(:func:`~privleak.audit.one_run.reconstruction_counts`). The alarm tests are the pipeline's own
(:func:`privleak.audit.verdicts._canary_tests`), decided by :func:`privleak.audit.alarms.alarm_decision`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privleak.accountants import steps_for
from privleak.audit.alarms import alarm_decision, canary_curves
from privleak.audit.one_run import guess_counts, reconstruction_counts
from privleak.audit.verdicts import _canary_tests, _whitebox_test
from privleak.models.dp_sigma import calibrated_sigma as _calibrated_sigma
from privleak.models.dp_train import _NO_CLIP, DPSettings, broken_step
from privleak.results import OneRunCandidate, OneRunEpsilon, OneRunReconstruction, Privacy, ReconstructionCandidate

M = 400  # audit canaries (about 200 included)
FILLERS = 200
K = 16  # classes per head ("pool words")
W = 5  # heads ("secret words"): k = 16^5 ≈ 1.0e6
SCALE = 20.0  # input norm: per-sample gradients up to ≈ 20× the clip norm
C = 1.0
BATCH = 60
EPOCHS = 20
LR = 2.0
DELTA = 1e-5
GRADIENT = 1000  # white-box gradient canaries (the default dp.gradient_canaries)


@dataclass(frozen=True)
class ToyRun:
    privacy: Privacy
    one_run: OneRunEpsilon


def setup(epsilon: float) -> tuple[float, float, int]:
    """(q, σ, T): q from the expected training-set size (public, never the coin flips), T = E·⌊1/q⌋, σ for
    (ε, δ) by the accountant PrivLeak trains with (cached on disk after the first call)."""
    q = BATCH / (FILLERS + M // 2)
    steps = steps_for(sample_rate=q, epochs=EPOCHS)
    return q, _calibrated_sigma(epsilon, DELTA, q, steps, "prv"), steps


def _data(rng: np.random.Generator):
    included = rng.random(M) < 0.5
    secrets = rng.integers(0, K, size=(M, W))
    rows = np.concatenate([np.flatnonzero(included), M + np.arange(FILLERS)])
    labels = np.concatenate([secrets[included], rng.integers(0, K, size=(FILLERS, W))])
    return included, secrets, rows, labels


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def _audit(weights: np.ndarray, epsilon: float, included, secrets, q: float, sigma: float, steps: int,
           gradient: dict | None = None) -> ToyRun:
    """The one-run guesses of trained ``weights`` (≥ M rows × W × K; the canaries' rows first), as the pipeline
    types them."""
    logp = _log_softmax(SCALE * weights[:M])
    score = np.take_along_axis(logp, secrets[:, :, None], axis=2)[:, :, 0].sum(1)
    counts = guess_counts(score, included)
    right = (logp.argmax(-1) == secrets).all(1)[included]
    recon = reconstruction_counts(logp.max(-1).sum(1)[included], right)
    privacy = Privacy(target_epsilon=epsilon, epsilon=epsilon, accountant="prv", delta=DELTA, sigma=sigma,
                      sample_rate=q, steps=steps, max_grad_norm=C, epsilon_rdp=None, epsilon_pld=None, epsilon_prv=None,
                      gradient_canaries=gradient)
    one = OneRunEpsilon(available=True, m=M, n_included=int(included.sum()), delta=DELTA,
                        candidates=[OneRunCandidate(k_in=a, k_out=b, guesses=r, correct=v, epsilon_steinke=0.0)
                                    for a, b, r, v in counts],
                        reconstruction=OneRunReconstruction(
                            m=int(included.sum()), pool_size=K, secret_words=W, k=float(K) ** W,
                            reconstructed=int(right.sum()),
                            candidates=[ReconstructionCandidate(guesses=r, correct=v) for r, v in recon]))
    return ToyRun(privacy=privacy, one_run=one)


def _settings(epsilon: float, seed: int, debug_break: str | None) -> DPSettings:
    return DPSettings(target_epsilon=epsilon, delta=DELTA, max_grad_norm=C, epochs=EPOCHS, expected_batch_size=BATCH,
                      lr=LR, seed=seed, debug_break=debug_break)  # type: ignore[arg-type]


def run(seed: int, epsilon: float = 8.0, debug_break: str | None = None) -> ToyRun:
    """One DP-SGD training (numpy, see the module docstring) at target ``epsilon``, broken by ``debug_break``."""
    rng = np.random.default_rng(seed)
    included, secrets, rows, labels = _data(rng)
    q, sigma, steps = setup(epsilon)
    used_sigma, used = broken_step(_settings(epsilon, seed, debug_break), sigma)
    clip = used.max_grad_norm
    # Only the canaries' rows are simulated: a filler's row is touched by its own gradient and by noise alone, so
    # it never changes a canary's (the fillers only make q what it is; the sum is divided by the fixed B). A
    # left-out canary's row gets noise alone, T draws of N(0, σ²C²) summed: one draw of N(0, Tσ²C²) is the same.
    planted = np.flatnonzero(included)
    rows = np.zeros((planted.size, W, K))
    onehot = np.zeros((planted.size, W, K))
    onehot[np.arange(planted.size)[:, None], np.arange(W)[None, :], secrets[included]] = 1.0
    std = used_sigma * clip
    white = np.random.default_rng(seed + 10_000)  # the gradient canaries' own draws
    inside, joined, reading = white.random(GRADIENT) < 0.5, np.zeros(GRADIENT), np.zeros(GRADIENT)
    for _ in range(steps):
        join = inside & (white.random(GRADIENT) < q)
        joined += join
        reading += (join * min(1.0, clip / (100 * C + 1e-6)) * 100 * C + std * white.standard_normal(GRADIENT)) / C
        batch = rng.random(planted.size) < q  # Poisson sampling of the canary records
        # per-sample gradient of the mean (over heads) cross-entropy: on its own row only
        g = SCALE * (np.exp(_log_softmax(SCALE * rows[batch])) - onehot[batch]) / W
        norm = np.sqrt((g ** 2).sum(axis=(1, 2)))
        g *= np.minimum(1.0, clip / np.maximum(norm, 1e-12))[:, None, None]
        total = rng.standard_normal(rows.shape, dtype=np.float32) * std  # float32 draws: half the time, ample here
        total[batch] += g  # rows are distinct: one record per row
        rows -= LR * total / BATCH
    weights = np.zeros((M, W, K))
    weights[planted] = rows
    weights[~included] = -LR / BATCH * std * np.sqrt(steps) * rng.standard_normal(((~included).sum(), W, K))
    gradient = {"canaries": GRADIENT, "included": int(inside.sum()), "steps": steps, "scale": 100.0,
                "sum_nn": float((joined ** 2).sum()), "sum_ny": float((joined * reading).sum()),
                "sum_yy": float((reading ** 2).sum())}
    return _audit(weights, epsilon, included, secrets, q, sigma, steps, gradient)


def run_opacus(seed: int, epsilon: float = 8.0, debug_break: str | None = None) -> ToyRun:
    """The same training through Opacus as PrivLeak sets it up (:func:`~privleak.models.dp_train.make_private`)."""
    import torch

    from privleak.models.dp_train import _step_on_empty_batch, make_private
    from privleak.models.gradient_canaries import GradientCanaries

    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    included, secrets, rows, labels = _data(rng)
    q, sigma, steps = setup(epsilon)
    used_sigma, used = broken_step(_settings(epsilon, seed, debug_break), sigma)
    x = torch.zeros((rows.size, M + FILLERS))
    x[torch.arange(rows.size), torch.from_numpy(rows)] = SCALE
    y = torch.from_numpy(labels)
    model = torch.nn.Linear(M + FILLERS, W * K, bias=False)
    torch.nn.init.zeros_(model.weight)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=BATCH)
    private, optimizer, _, loader, _ = make_private(model, optimizer, loader, used_sigma, used, sample_rate=q)
    canaries = GradientCanaries(GRADIENT, q, C, seed + 10_000)
    canaries.attach(optimizer)
    taken = 0
    for _ in range(EPOCHS):
        for bx, by in loader:
            optimizer.zero_grad(set_to_none=True)
            if bx.shape[0] == 0:
                _step_on_empty_batch(optimizer)
            else:
                logits = private(bx).view(-1, W, K)
                torch.nn.functional.cross_entropy(logits.reshape(-1, K), by.reshape(-1)).backward()
                optimizer.step()
            taken += 1
    assert taken == steps
    with torch.no_grad():
        weights = model.weight.T.reshape(M + FILLERS, W, K).double().numpy()
    return _audit(weights, epsilon, included, secrets, q, sigma, steps, canaries.stats().as_dict())


def alarm(runs: dict[str, ToyRun], alpha: float = 0.05):
    """The audit's decision over these arms, every route of every arm counted (family-wise ``alpha``)."""
    tests = [t for name, r in runs.items() for t in _canary_tests(name, r.privacy, r.one_run, canary_curves(r.privacy))]
    tests += [_whitebox_test(name, r.privacy, r.privacy.gradient_canaries) for name, r in runs.items()
              if r.privacy.gradient_canaries is not None]
    return alarm_decision(tests, alpha)


assert _NO_CLIP > SCALE * 2  # "no_clip" must clip nothing here
