"""calbench._torch.eager_optimizers: no torch._dynamo import, identical optimisation."""

import subprocess
import sys

SCRIPT = """
import sys, json, torch
from calbench._torch import eager_optimizers
if sys.argv[1] == "eager":
    eager_optimizers(torch.optim.LBFGS)
else:
    import torch._dynamo  # the import torch's own wrapper would make
torch.manual_seed(0)
z = torch.randn(200, 5)
y = torch.randint(0, 5, (200,))
a = torch.ones(1, requires_grad=True)
opt = torch.optim.LBFGS([a], lr=1.0, max_iter=100)
def closure():
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(z * a, y)
    loss.backward()
    return loss
opt.step(closure)
print(json.dumps({"dynamo": "torch._dynamo" in sys.modules, "a": a.item()}))
"""


def _last_line(code, *args):
    """The last line ``code`` prints, run in a fresh interpreter (whose imports are its own)."""
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
    )
    return out.stdout.strip().splitlines()[-1]


def _run(mode, script=SCRIPT):
    import json

    return json.loads(_last_line(script, mode))


def test_optimizers_run_without_the_compiler_import_and_give_identical_results():
    eager, reference = _run("eager"), _run("reference")
    assert eager["dynamo"] is False and reference["dynamo"] is True
    assert eager["a"] == reference["a"] != 1.0


def test_scaling_fit_does_not_import_the_compiler():
    code = (
        "import sys, numpy as np\n"
        "from calbench.calibrators import get_calibrator\n"
        "rng = np.random.default_rng(0)\n"
        "z = rng.normal(size=(300, 4)).astype('float32'); y = rng.integers(0, 4, 300)\n"
        "get_calibrator('ts').fit(z, y)\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    assert _last_line(code) == "False"


STEP_SCRIPT = """
import sys, json, torch
from calbench._torch import eager_optimizers, eager_step
mode = sys.argv[1]
eager_optimizers(torch.optim.SGD, torch.optim.Adam)
def run(cls, **kw):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(20, 30), torch.nn.ReLU(), torch.nn.Linear(30, 5))
    opt = cls(m.parameters(), lr=0.05, **kw)
    x, y = torch.randn(64, 20), torch.randint(0, 5, (64,))
    for _ in range(15):
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(m(x), y).backward()
        eager_step(opt) if mode == "eager" else opt.step()
    return [float(v) for p in m.parameters() for v in p.detach().flatten()]
out = {"sgd": run(torch.optim.SGD, momentum=0.9, weight_decay=5e-4), "adam": run(torch.optim.Adam)}
out["dynamo"] = "torch._dynamo" in sys.modules
print(json.dumps(out))
"""


def test_eager_step_gives_bit_identical_parameters_without_the_compiler_import():
    runs = {mode: _run(mode, STEP_SCRIPT) for mode in ("eager", "reference")}
    assert runs["eager"]["dynamo"] is False and runs["reference"]["dynamo"] is True
    for opt in ("sgd", "adam"):
        assert runs["eager"][opt] == runs["reference"][opt]
        assert len(set(runs["eager"][opt])) > 100  # the parameters did move


def test_eager_step_runs_registered_step_hooks():
    import torch

    from calbench._torch import eager_step

    w = torch.ones(2, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.5)
    calls = []
    opt.register_step_post_hook(lambda *a: calls.append("post"))
    w.sum().backward()
    eager_step(opt)
    assert calls == ["post"] and torch.equal(w.detach(), torch.full((2,), 0.5))


def test_sbece_fit_and_a_training_step_do_not_import_the_compiler():
    code = (
        "import sys, numpy as np, torch\n"
        "from calbench.calibrators import get_calibrator\n"
        "from calbench.training.steps import make_optimizer\n"
        "from calbench.training.options import TrainingConfig\n"
        "rng = np.random.default_rng(0)\n"
        "z = rng.normal(size=(300, 4)); y = rng.integers(0, 4, 300)\n"
        "get_calibrator('ts_sbece', n_steps=5).fit(z, y)\n"
        "m = torch.nn.Linear(3, 2)\n"
        "opt = make_optimizer(TrainingConfig(), m.parameters())\n"
        "from calbench._torch import eager_step\n"
        "m(torch.ones(1, 3)).sum().backward(); eager_step(opt)\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    assert _last_line(code) == "False"
