"""AdamW and gradient-norm clipping for a pack of runs: every run keeps its own hyper-parameters.

The parameters of a packed Classifier carry a leading run axis, so one elementwise update serves
all runs; what differs per run (learning rate and schedule position, weight decay, clipping norm,
whether the run is still training) enters as a per-run factor broadcast over that axis. The update
is torch's AdamW (decoupled weight decay, bias-corrected moments) written out, since torch's
optimisers take one learning rate per parameter group, not one per slice of a tensor.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

BETAS = (0.9, 0.999)
EPS = 1e-8


def decays(name: str, parameter: torch.Tensor) -> bool:
    """Weight decay applies to weight matrices only (not biases, norms, embeddings or frequencies)."""
    return parameter.dim() - 1 >= 2 and not name.startswith(("embedding.", "positional.frequencies"))


def _per_run(values: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return values.to(like.dtype).view((-1,) + (1,) * (like.dim() - 1))


def clip_grad_norms(parameters: Sequence[torch.nn.Parameter], max_norms: torch.Tensor) -> torch.Tensor:
    """Scale each run's gradients so that its global L2 norm is at most max_norms[run] (<= 0: no
    clipping); returns the per-run norms before clipping (torch.nn.utils.clip_grad_norm_ per run)."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return torch.zeros(len(max_norms))
    squares = torch.stack([g.detach().double().pow(2).flatten(1).sum(1) for g in grads]).sum(0)
    norms = squares.sqrt()
    factors = torch.where(max_norms > 0, (max_norms / (norms + 1e-6)).clamp(max=1.0), torch.ones_like(norms))
    for grad in grads:
        grad.mul_(_per_run(factors, grad))
    return norms


class PackedAdamW:
    """AdamW over packed parameters with per-run learning rates and weight decays.

    `step(lrs, active)`: lrs (R,) learning rates for this step; runs with active False (diverged,
    frozen) are not updated and their moments do not advance.
    """

    def __init__(self, named_parameters, weight_decays: Sequence[float], betas=BETAS, eps: float = EPS) -> None:
        self.parameters: list[torch.nn.Parameter] = []
        self.decayed: list[bool] = []
        for name, parameter in named_parameters:
            if parameter.requires_grad:
                self.parameters.append(parameter)
                self.decayed.append(decays(name, parameter))
        self.weight_decays = torch.tensor([float(w) for w in weight_decays], dtype=torch.float64)
        self.betas, self.eps = betas, eps
        self.steps = torch.zeros(len(weight_decays), dtype=torch.int64)  # per-run update count
        self.exp_avg = [torch.zeros_like(p) for p in self.parameters]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.parameters]

    def zero_grad(self) -> None:
        for parameter in self.parameters:
            parameter.grad = None

    @torch.no_grad()
    def step(self, lrs: torch.Tensor, active: torch.Tensor) -> None:
        beta1, beta2 = self.betas
        everyone = bool(active.all())
        lrs = torch.where(active, lrs.to(torch.float64), torch.zeros_like(lrs, dtype=torch.float64))
        self.steps += active.to(torch.int64)
        steps = self.steps.clamp(min=1).to(torch.float64)
        correction1 = 1 - beta1**steps
        correction2_sqrt = (1 - beta2**steps).sqrt()
        step_sizes = -lrs / correction1
        decay_factors = 1 - lrs * self.weight_decays
        for index, (parameter, decayed) in enumerate(zip(self.parameters, self.decayed)):
            grad = parameter.grad
            if grad is None:
                continue
            # The same operations whether or not some runs are frozen, so an active run's numbers
            # never depend on the others; frozen runs keep their weights and moments (torch.where).
            mask = None if everyone else _per_run(active, grad).bool()
            if mask is not None:
                grad = torch.where(mask, grad, torch.zeros((), dtype=grad.dtype, device=grad.device))
            exp_avg = self.exp_avg[index].lerp(grad, 1 - beta1)
            exp_avg_sq = self.exp_avg_sq[index].mul(beta2).addcmul_(grad, grad, value=1 - beta2)
            denominator = exp_avg_sq.sqrt().div_(_per_run(correction2_sqrt, exp_avg_sq)).add_(self.eps)
            updated = parameter * _per_run(decay_factors, parameter) if decayed else parameter
            updated = updated + exp_avg * _per_run(step_sizes, exp_avg) / denominator
            if mask is not None:
                exp_avg = torch.where(mask, exp_avg, self.exp_avg[index])
                exp_avg_sq = torch.where(mask, exp_avg_sq, self.exp_avg_sq[index])
                updated = torch.where(mask, updated, parameter)
            self.exp_avg[index], self.exp_avg_sq[index] = exp_avg, exp_avg_sq
            parameter.copy_(updated)

    def state_dict(self) -> dict:
        return {
            "steps": self.steps.clone(),
            "exp_avg": [t.clone() for t in self.exp_avg],
            "exp_avg_sq": [t.clone() for t in self.exp_avg_sq],
        }

    def load_state_dict(self, state: dict) -> None:
        self.steps.copy_(state["steps"])
        for target, source in zip(self.exp_avg, state["exp_avg"]):
            target.copy_(source)
        for target, source in zip(self.exp_avg_sq, state["exp_avg_sq"]):
            target.copy_(source)
