r"""White-box gradient canaries: the DP step's own clipping and noise, observed while it trains.

PrivLeak trains its DP arms itself, so it can audit the step the way Steinke, Nasr & Jagielski (NeurIPS 2023,
§6, white-box) and Nasr et al. (USENIX Security 2023, "Dirac canaries") do: canaries whose gradients are
chosen by the auditor, read from the noised gradient sum of every step. Here each of m canaries owns one
coordinate of an auxiliary vector that joins the optimiser beside the model's weights and that the model's
forward pass never reads, so no record's gradient touches it and the weights train as they would without it
(except that the noise generator also draws those m coordinates each step).

Per canary: in with probability ½ (a seeded coin); an in-canary joins each step with the records' own
probability q, independently (Poisson sampling, as a record joins). Its gradient is e_i · B·C (C the claimed
clipping bound, B = :data:`SCALE`, far above 1), clipped by the factor the step applies to its records
(:func:`~.book_keeping.clip_factors` with the bound the step really uses); the step then adds its own noise to
the whole sum (Opacus's ``add_noise`` for record-level arms, the user-level loop's draw for person-level ones)
and scales it; the canaries read the noised sum back after the scaling (undone). After T steps, canary i's
reading in units of C is

    y_i = α·N_i + τ·√T·z_i,      z_i ~ N(0, 1) independent,

N_i the steps it joined (known: drawn here), α one inclusion's contribution (1 for a step clipping at C) and τ
the noise's standard deviation per step (σ for the mechanism the accountant analysed). What the mechanism's
privacy depends on is the ratio τ/α, its effective noise multiplier: the accountant's ε holds when τ/α ≥ σ.
The statistics kept (:class:`GradientCanaryStats`, sufficient for α and τ) are judged in
:func:`privleak.audit.whitebox.whitebox_alarm_test`.

What this sees: a step that clips above its claimed bound, or adds less noise than σ·C, whatever the cause
(a wrong noise multiplier handed to the optimiser, clipping switched off, a noise draw skipped). What it does
not see: an error in the per-sample norms of the model's own layers (a layer left out of the norm), which the
black-box one-run routes judge from the trained model.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from .book_keeping import clip_factors

#: A canary's gradient norm in units of the claimed C: far above any bound a correct step clips at.
SCALE = 100.0


@dataclass(frozen=True)
class GradientCanaryStats:
    """The sufficient statistics of m canaries' readings (units of the claimed C): S_nn = Σ N_i²,
    S_ny = Σ N_i·y_i, S_yy = Σ y_i²; ``included`` canaries were in (N_i > 0 possible), over ``steps`` steps."""

    canaries: int
    included: int
    steps: int
    scale: float
    sum_nn: float
    sum_ny: float
    sum_yy: float

    def as_dict(self) -> dict:
        return asdict(self)


class GradientCanaries:
    """m gradient canaries on an auxiliary vector ``param`` (see the module docstring).

    Per step: :meth:`contribution` (the clipped canary sum of this step's joiners), then, after the step's noise
    and scaling, :meth:`observe` of the noised sum. :meth:`attach` wires both into an Opacus optimiser (PrivLeak's
    record-level DP-SGD, or a user's own: :class:`privleak.integrations.AuditHook`)."""

    def __init__(self, m: int, sample_rate: float, claimed_clip: float, seed: int, device: torch.device | str = "cpu",
                 scale: float = SCALE) -> None:
        if m < 3:
            raise ValueError(f"the white-box check needs at least 3 gradient canaries, got {m}")
        if not 0.0 < sample_rate <= 1.0 or not claimed_clip > 0:
            raise ValueError(f"need 0 < q ≤ 1 and C > 0, got q = {sample_rate}, C = {claimed_clip}")
        self._gen = torch.Generator().manual_seed(seed)
        self.inside = torch.rand(m, generator=self._gen) < 0.5
        self.q = float(sample_rate)
        self.clip = float(claimed_clip)
        self.scale = float(scale)
        self.param = torch.nn.Parameter(torch.zeros(m, dtype=torch.float32, device=device))
        self.joined = torch.zeros(m, dtype=torch.float64)
        self.reading = torch.zeros(m, dtype=torch.float64)
        self.steps = 0
        self._fresh = True

    @property
    def m(self) -> int:
        return int(self.inside.numel())

    def contribution(self, bound: float) -> torch.Tensor:
        """This step's clipped canary sum: each in-canary joins with probability q; its gradient B·C·e_i is
        clipped at ``bound`` (the step's own) by the records' clipping function."""
        join = self.inside & (torch.rand(self.m, generator=self._gen) < self.q)
        self.joined += join.double()
        norms = torch.full((self.m,), self.scale * self.clip, dtype=torch.float32)
        c = clip_factors(norms, float(bound))
        return (join.float() * c * norms).to(self.param.device)

    def observe(self, noised_sum: torch.Tensor) -> None:
        """One step's noised (and unscaled) canary sum, read back."""
        self.reading += noised_sum.detach().double().cpu() / self.clip
        self.steps += 1

    def stats(self) -> GradientCanaryStats:
        n, y = self.joined, self.reading
        return GradientCanaryStats(canaries=self.m, included=int(self.inside.sum()), steps=self.steps,
                                   scale=self.scale, sum_nn=float((n * n).sum()), sum_ny=float((n * y).sum()),
                                   sum_yy=float((y * y).sum()))

    # ------------------------------------------------------------------ an Opacus optimiser's step

    def attach(self, optimizer, bound: float | None = None) -> None:
        """Join an Opacus DP optimiser (``DPOptimizer``, per-sample hooks; or ``DPOptimizerFastGradientClipping``,
        book-keeping and ghost clipping): ``param`` becomes one more of its parameters (the last), so its own
        ``add_noise`` and ``scale_grad`` treat it as they treat the weights; at the first accumulation of each
        logical step the canaries' clipped sum joins the clipped sums (:meth:`contribution`), and the step hook
        reads the noised sum back. ``bound``: the clipping bound the step applies to its records (None: the optimiser's
        ``max_grad_norm``, read at every step). The training loop needs no change."""
        clip = bound if bound is not None else getattr(optimizer, "max_grad_norm", None)
        if isinstance(clip, bool) or not isinstance(clip, (int, float)):
            raise ValueError("gradient canaries need one flat clipping bound (per-layer clipping is not supported)")
        # Into the last parameter group, not a group of its own: a learning-rate scheduler built before (the
        # Trainer's) holds one rate per group. The inner optimiser then updates ``param`` too, which nothing reads.
        optimizer.original_optimizer.param_groups[-1]["params"].append(self.param)
        self._fresh = True

        def step_sum() -> torch.Tensor:
            """The canaries' clipped sum for this accumulation: the step's draw at its first, zeros after."""
            if not self._fresh:
                return torch.zeros_like(self.param)
            self._fresh = False
            return self.contribution(bound if bound is not None else float(optimizer.max_grad_norm))

        if hasattr(optimizer, "accumulate"):  # p.grad-based clipping: the clipped sum is in p.grad when accumulated
            accumulate = optimizer.accumulate

            def accumulate_with_canaries() -> None:
                self.param.grad = step_sum()  # whatever cleared p.grad before (ghost's second pass does)
                accumulate()

            optimizer.accumulate = accumulate_with_canaries
        else:  # per-sample hooks: the canaries' own rows are zero (their norms add nothing), their sum added after
            pre_step, clip_and_accumulate = optimizer.pre_step, optimizer.clip_and_accumulate

            def pre_step_with_canaries(*args, **kwargs):
                rows = next((p.grad_sample for p in optimizer.params
                             if p is not self.param and getattr(p, "grad_sample", None) is not None), None)
                zeros = lambda g: torch.zeros((g.shape[0], self.m), device=self.param.device)  # noqa: E731
                self.param.grad_sample = ([zeros(g) for g in rows] if isinstance(rows, list) else
                                          zeros(rows) if rows is not None else zeros(torch.empty(0)))
                return pre_step(*args, **kwargs)

            def clip_and_accumulate_with_canaries() -> None:
                clip_and_accumulate()
                self.param.summed_grad = self.param.summed_grad + step_sum()

            optimizer.pre_step = pre_step_with_canaries
            optimizer.clip_and_accumulate = clip_and_accumulate_with_canaries
        previous = optimizer.step_hook

        def hook(opt) -> None:
            # After add_noise and scale_grad: p.grad = (Σ clipped + noise) / (B·iterations); undo the scaling.
            self.observe(self.param.grad * (opt.expected_batch_size * opt.accumulated_iterations))
            self._fresh = True
            if previous is not None:
                previous(opt)

        optimizer.step_hook = hook
