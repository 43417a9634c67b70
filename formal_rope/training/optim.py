"""AdamW and gradient-norm clipping for a pack of runs: every run keeps its own hyper-parameters.

The parameters of a packed Classifier carry a leading run axis, so one elementwise update serves
all runs; what differs per run (learning rate and schedule position, weight decay, clipping norm,
whether the run is still training) enters as a per-run factor broadcast over that axis. The update
is torch's AdamW (decoupled weight decay, bias-corrected moments) written out, since torch's
optimisers take one learning rate per parameter group, not one per slice of a tensor.

`PackedAdamW` moves the pack's trainable parameters into one flat `(R, P)` buffer per dtype (each
parameter becomes a view of its columns) and gives their gradients the same layout, so zeroing,
clipping and the update are a handful of operations on one tensor whatever the number of weight
matrices (on a GPU: a handful of kernel launches per step instead of several per parameter).
Parameters keep their names, shapes and values; only their storage moves.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch

BETAS = (0.9, 0.999)
EPS = 1e-8


def decays(name: str, parameter: torch.Tensor) -> bool:
    """Weight decay applies to weight matrices only (not biases, norms, embeddings or frequencies)."""
    return parameter.dim() - 1 >= 2 and not name.startswith(("embedding.", "positional.frequencies"))


def _clip_factors(norms: torch.Tensor, max_norms: torch.Tensor) -> torch.Tensor:
    max_norms = max_norms.to(norms.device)
    return torch.where(max_norms > 0, (max_norms / (norms + 1e-6)).clamp(max=1.0), torch.ones_like(norms))


class _FlatGroup:
    """The parameters of one dtype, moved into the columns of one (R, P) buffer, with an (R, P)
    gradient buffer whose columns are their `.grad`s (autograd accumulates into them in place)."""

    def __init__(self, named: list[tuple[str, torch.nn.Parameter]]) -> None:
        first = named[0][1]
        runs = first.shape[0]
        self.names = [name for name, _ in named]
        self.parameters = [parameter for _, parameter in named]
        self.widths = [parameter[0].numel() for parameter in self.parameters]
        total = sum(self.widths)
        self.values = torch.empty(runs, total, dtype=first.dtype, device=first.device)
        self.grads = torch.zeros_like(self.values)
        decayed = torch.zeros(1, total, dtype=torch.bool, device=first.device)
        start = 0
        for (name, parameter), width in zip(named, self.widths):
            columns = slice(start, start + width)
            with torch.no_grad():
                self.values[:, columns].copy_(parameter.reshape(runs, width))
            parameter.data = self.values[:, columns].view(parameter.shape)
            parameter.grad = self.grads[:, columns].view(parameter.shape)
            decayed[:, columns] = decays(name, parameter)
            start += width
        self.decayed = decayed if bool(decayed.any()) else None
        self.exp_avg = torch.zeros_like(self.values)
        self.exp_avg_sq = torch.zeros_like(self.values)
        self._pointers = [(p.data_ptr(), p.grad.data_ptr()) for p in self.parameters]

    def attached(self) -> bool:
        """Whether every parameter and its gradient still live in this group's buffers (nothing
        replaced their storage: autograd accumulates into an existing `.grad` in place)."""
        return all(
            p.grad is not None and (p.data_ptr(), p.grad.data_ptr()) == pointers
            for p, pointers in zip(self.parameters, self._pointers)
        )

    def views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """Per-parameter views (R, *shape) of a flat (R, P) buffer."""
        out, start = [], 0
        for parameter, width in zip(self.parameters, self.widths):
            out.append(flat[:, start : start + width].view(parameter.shape))
            start += width
        return out


class PackedAdamW:
    """AdamW over packed parameters with per-run learning rates and weight decays.

    `backward(loss)` fills the flat gradient buffer; `clip(max_norms)` clips each run's gradient
    norm; `step(lrs, active)`: lrs (R,) learning rates for this step; runs with active False
    (diverged, frozen) are not updated and their moments do not advance. Construction moves the
    parameters into flat buffers (module docstring), so build the optimizer after the model is on its
    device.
    """

    def __init__(self, named_parameters, weight_decays: Sequence[float], betas=BETAS, eps: float = EPS) -> None:
        by_dtype: dict = {}
        trainable = [(name, parameter) for name, parameter in named_parameters if parameter.requires_grad]
        for name, parameter in trainable:
            by_dtype.setdefault((parameter.dtype, parameter.device), []).append((name, parameter))
        self.groups = [_FlatGroup(named) for named in by_dtype.values()]
        self.parameters: list[torch.nn.Parameter] = [p for group in self.groups for p in group.parameters]
        # state_dict lists moments in the model's parameter order (the layout saved states have).
        where = {id(p): (g, i) for g, group in enumerate(self.groups) for i, p in enumerate(group.parameters)}
        self._order = [where[id(parameter)] for _, parameter in trainable]
        self.weight_decays = torch.tensor([float(w) for w in weight_decays], dtype=torch.float64)
        self.betas, self.eps = betas, eps
        self.steps = torch.zeros(len(weight_decays), dtype=torch.int64)  # per-run update count

    def _check_attached(self) -> None:
        if not all(group.attached() for group in self.groups):
            raise RuntimeError("a parameter's storage or gradient was replaced after PackedAdamW was built")

    def backward(self, loss: torch.Tensor) -> None:
        """loss.backward(), accumulating into the flat gradient buffer."""
        with warnings.catch_warnings():
            # The gradients are strided views of that buffer on purpose; autograd adds into them in
            # place and warns that their layout is not the one it would have chosen.
            warnings.filterwarnings("ignore", message="grad and param do not obey the gradient layout contract")
            loss.backward()

    def zero_grad(self) -> None:
        self._check_attached()
        for group in self.groups:
            group.grads.zero_()

    @torch.no_grad()
    def clip(self, max_norms: torch.Tensor) -> torch.Tensor:
        """Scale each run's gradients so that its global L2 norm is at most max_norms[run] (<= 0: no
        clipping); returns the per-run norms (float64) before clipping."""
        squares = sum(group.grads.pow(2).sum(1, dtype=torch.float64) for group in self.groups)
        norms = (
            squares.sqrt() if isinstance(squares, torch.Tensor) else torch.zeros(len(max_norms), dtype=torch.float64)
        )
        factors = _clip_factors(norms, max_norms)
        for group in self.groups:
            group.grads.mul_(factors.to(group.grads.dtype)[:, None])
        return norms

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
        for group in self.groups:
            values, grad = group.values, group.grads
            device, dtype = values.device, values.dtype

            def per_run(factor: torch.Tensor) -> torch.Tensor:
                return factor.to(device=device, dtype=dtype)[:, None]

            # The same operations whether or not some runs are frozen, so an active run's numbers
            # never depend on the others; frozen runs keep their weights and moments (torch.where).
            mask = None if everyone else active.to(device)[:, None]
            if mask is not None:
                grad = torch.where(mask, grad, torch.zeros((), dtype=dtype, device=device))
            exp_avg = group.exp_avg.lerp(grad, 1 - beta1)
            exp_avg_sq = group.exp_avg_sq.mul(beta2).addcmul_(grad, grad, value=1 - beta2)
            denominator = exp_avg_sq.sqrt().div_(per_run(correction2_sqrt)).add_(self.eps)
            updated = values
            if group.decayed is not None:
                updated = values * torch.where(
                    group.decayed, per_run(decay_factors), torch.ones((), dtype=dtype, device=device)
                )
            updated = updated + exp_avg * per_run(step_sizes) / denominator
            if mask is not None:
                exp_avg = torch.where(mask, exp_avg, group.exp_avg)
                exp_avg_sq = torch.where(mask, exp_avg_sq, group.exp_avg_sq)
                updated = torch.where(mask, updated, values)
            group.exp_avg.copy_(exp_avg)
            group.exp_avg_sq.copy_(exp_avg_sq)
            values.copy_(updated)

    def _moments(self, name: str) -> list[torch.Tensor]:
        views = [group.views(getattr(group, name)) for group in self.groups]
        return [views[g][i] for g, i in self._order]

    def state_dict(self) -> dict:
        """Steps and moments per parameter, in the model's parameter order (the layout saved
        training states have always had)."""
        return {
            "steps": self.steps.clone(),
            "exp_avg": [t.clone() for t in self._moments("exp_avg")],
            "exp_avg_sq": [t.clone() for t in self._moments("exp_avg_sq")],
        }

    def load_state_dict(self, state: dict) -> None:
        self.steps.copy_(state["steps"])
        for name in ("exp_avg", "exp_avg_sq"):
            targets = self._moments(name)
            if len(targets) != len(state[name]) or any(t.shape != s.shape for t, s in zip(targets, state[name])):
                raise ValueError(f"the saved optimizer state's {name} does not match this model's parameters")
            for target, source in zip(targets, state[name]):
                target.copy_(source)


__all__ = ["BETAS", "EPS", "PackedAdamW", "decays"]
