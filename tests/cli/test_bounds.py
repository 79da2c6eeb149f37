"""Every user-controlled size has a bound, checked with a one-line error before work starts:
--dpi, --n-bins, --n-bootstrap, --batch-size, --timeout, model names (CLI and config schema),
JSON arguments and calibrator files, n_bins of metrics and calibrators."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import yaml

from calbench.calibrators import get_calibrator, load_calibrator

REPO = Path(__file__).resolve().parents[2]


def _usage_error(capsys, argv, needle):
    from calbench.cli import main

    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    last = err.strip().splitlines()[-1]
    assert needle in last, err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["plot-reliability", "--logits", "a", "--split", "b", "--calibrator", "c", "--out",
          "o.png", "--dpi", "100000"], "--dpi = 100000 is out of range; use an integer in [10, 1200]"),
        (["plot-reliability", "--logits", "a", "--split", "b", "--calibrator", "c", "--out",
          "o.png", "--n-bins", "10000000"], "--n-bins = 10000000 is out of range"),
        (["plot-reliability", "--logits", "a", "--split", "b", "--calibrator", "c", "--out",
          "o.png", "--n-bins", "0"], "--n-bins = 0 is out of range"),
        (["evaluate", "--logits", "a", "--split", "b", "--calibrator", "c", "--out", "o.csv",
          "--n-bootstrap", "1000000000"], "--n-bootstrap = 1000000000 is out of range"),
        (["download-checkpoint", "--config", "c.yaml", "--model", "a" * 246], "has 246 characters; use at most 64"),
        (["download-checkpoint", "--config", "c.yaml", "--model", "Bad-Name"], "is not a slug"),
        (["download-checkpoint", "--config", "c.yaml", "--model", "m", "--timeout", "1e9"], "--timeout = 1e9 is out of range"),
        (["import-logits", "--config", "c.yaml", "--model", "a" * 65], "has 65 characters"),
    ],
)  # fmt: skip
def test_cli_sizes_are_bounded_before_work_starts(capsys, argv, needle):
    _usage_error(capsys, argv, needle)


def test_config_schema_caps_names_at_64_characters():
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    cfg = yaml.safe_load((REPO / "config" / "test.yaml").read_text())
    name = next(iter(cfg["models"]))
    jsonschema.validate(cfg, schema)
    cfg["models"]["m" * 64] = cfg["models"][name]
    jsonschema.validate(cfg, schema)
    cfg["models"]["m" * 246] = cfg["models"].pop(name)
    with pytest.raises(jsonschema.ValidationError, match="is too long"):
        jsonschema.validate(cfg, schema)


def test_n_bins_is_bounded_in_metrics_and_calibrators():
    from calbench.metrics import ece

    p = np.full((4, 2), 0.5)
    with pytest.raises(ValueError, match="n_bins = 100000000 is too large; use at most 10000"):
        ece(p, [0, 1, 0, 1], n_bins=100_000_000)
    with pytest.raises(ValueError, match="too large"):
        get_calibrator("hist", n_bins=10**9)


def test_deep_or_huge_calibrator_json_is_a_one_line_error(tmp_path, monkeypatch):
    import calbench.calibrators.base as B

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="nests deeper than 32 levels"):
        load_calibrator(deep)
    nested = tmp_path / "nested.json"
    value = 1
    for _ in range(40):
        value = [value]
    nested.write_text(json.dumps({"method": "ts", "params": {"a": value}}))
    with pytest.raises(ValueError, match="nests deeper"):
        load_calibrator(nested)
    monkeypatch.setattr(B, "MAX_JSON_BYTES", 10)
    with pytest.raises(ValueError, match="more than a calibrator file may"):
        load_calibrator(nested)
    with pytest.raises(ValueError, match="is a directory"):
        load_calibrator(tmp_path)


def test_json_arguments_are_bounded(tmp_path):
    from calbench.cli._args import parse_json_arg

    with pytest.raises(ValueError, match="nests"):
        parse_json_arg("[" * 50_000 + "]" * 50_000, "--params")
    with pytest.raises(ValueError, match="is a directory"):
        parse_json_arg(f"@{tmp_path}", "--params")
    with pytest.raises(ValueError, match="does not exist"):
        parse_json_arg(f"@{tmp_path / 'x.json'}", "--params")
