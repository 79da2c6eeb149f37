"""README.md's library example runs as written and shows what it claims."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs_and_calibrates(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README.md has no python example"
    namespace: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    out = capsys.readouterr().out
    before, after = map(float, re.search(r"ECE ([0-9.]+) -> ([0-9.]+)", out).groups())
    assert after < before / 2, out
    assert namespace["ts"].temperature_ > 1.2, "logits were built over-confident"
