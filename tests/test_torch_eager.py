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


def _run(mode):
    import json

    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


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
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"
