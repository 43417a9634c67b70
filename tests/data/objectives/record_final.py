"""Record a tiny pack's numbers with the code as it is (the objective fixture)."""
import hashlib, json, sys
import torch
from formal_rope.training.config import RunConfig
from formal_rope.runs.pack import run_pack

torch.set_num_threads(1)
base = dict(language="Σ*abΣ*", alphabet=("a","b","c"), layers=2, d_model=16, heads=2, steps=30,
            batch_size=16, test_min_length=41, test_max_length=44, n_per_length=16)
configs = [RunConfig(**base, seed=1, lr=1e-3, pe="nope"), RunConfig(**base, seed=2, lr=3e-4, pe="rope")]
losses = []
results, model = run_pack(configs, on_step=lambda step, ls: losses.append([float(x).hex() for x in ls]))
weights = hashlib.sha256()
for name, p in sorted(model.state_dict().items()):
    weights.update(name.encode()); weights.update(p.detach().contiguous().numpy().tobytes())
out = {"configs": [c.to_dict() for c in configs], "run_ids": [c.run_id() for c in configs],
       "step_losses": losses, "final_loss": [float(r.final_loss).hex() for r in results],
       "n_star": [r.n_star for r in results], "accuracy": [float(r.accuracy).hex() for r in results],
       "per_length": [[float(l.accuracy).hex() for l in r.per_length] for r in results],
       "curve_loss": [[float(x).hex() for x in r.curve.to_dict().get("loss", [])] if r.curve else None for r in results],
       "weights_sha256": weights.hexdigest()}
json.dump(out, open(sys.argv[1], "w"), indent=1)
print(out["run_ids"], out["n_star"], out["weights_sha256"])
