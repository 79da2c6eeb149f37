"""Provenance of the run (calbench.report.provenance): git commit and uncommitted changes, the
run's date (SOURCE_DATE_EPOCH), the run-info JSON of the workflow and the config's SHA-256;
and the bibliography (calbench.report.references): every registered calibrator and metric has
its reference, every work the rendered report cites is listed."""

from __future__ import annotations

import hashlib
import html as html_mod
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from calbench.report import provenance as P
from calbench.report import references as B

GIT = shutil.which("git")


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
        "GIT_AUTHOR_DATE": "2020-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2020-01-01T00:00:00Z",
        "HOME": str(repo),
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


@pytest.mark.skipif(GIT is None, reason="git is not installed")
def test_git_state_commit_and_uncommitted_changes(tmp_path):
    repo = tmp_path / "wf"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / ".gitignore").write_text("results/\n")
    (repo / "Snakefile").write_text("rule all:\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    head = _git(repo, "rev-parse", "HEAD")
    clean = P.git_state(repo)
    assert clean == {"commit": head, "dirty": False, "text": f"{head} (clean working tree)"}
    assert re.fullmatch(r"[0-9a-f]{40}", head)
    (repo / "results").mkdir()
    (repo / "results" / "x.csv").write_text("ignored output\n")
    assert P.git_state(repo)["dirty"] is False  # ignored outputs are not changes
    (repo / "Snakefile").write_text("rule all:\n    input: []\n")
    dirty = P.git_state(repo)
    assert dirty["commit"] == head and dirty["dirty"] is True
    assert dirty["text"].endswith("with uncommitted changes")
    # from a sub-folder too
    (repo / "workflow").mkdir()
    assert P.git_state(repo / "workflow")["commit"] == head


def test_outside_git_says_so_and_never_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    folder = tmp_path / "tarball"
    folder.mkdir()
    assert P.git_state(folder) == {"commit": None, "dirty": None, "text": P.NOT_GIT}
    assert P.git_state(tmp_path / "missing")["commit"] is None
    monkeypatch.setenv("PATH", str(tmp_path))  # no git at all
    state = P.git_state(folder)
    assert state["commit"] is None and state["text"].startswith(P.NOT_GIT)
    rows = {r["id"]: r for r in P.run_view(P.run_provenance(None, env={}))}
    assert rows["run-commit"]["value"].startswith("not a git checkout")
    assert "run-dirty" not in rows


def test_run_time_honours_source_date_epoch():
    assert P.run_time({"SOURCE_DATE_EPOCH": "0"}) == {
        "iso": "1970-01-01T00:00:00Z",
        "source": "SOURCE_DATE_EPOCH",
    }
    # 2021-06-01T12:34:56Z = 1622550896 (date -u -d @1622550896)
    assert P.run_time({"SOURCE_DATE_EPOCH": "1622550896"})["iso"] == "2021-06-01T12:34:56Z"
    now = P.run_time({})
    assert now["source"] == "clock" and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", now["iso"])
    with pytest.raises(ValueError, match="SOURCE_DATE_EPOCH must be whole seconds") as exc:
        P.run_time({"SOURCE_DATE_EPOCH": "yesterday"})
    assert "\n" not in str(exc.value)


def test_run_info_file_and_config_digest(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_bytes(b"study: {title: x}\n")
    info = {
        "command": ["snakemake", "--cores", "8", "--configfile", "my config.yaml"],
        "snakemake_version": "9.1.1",
        "config_files": [str(config)],
        "workflow_dir": str(tmp_path),
    }
    path = tmp_path / "run.json"
    path.write_text(json.dumps(info))
    run = P.run_provenance(P.read_run_info(path), env={"SOURCE_DATE_EPOCH": "86400"})
    assert run["config_files"] == [  # relative to the workflow folder: no machine layout
        {"path": "config.yaml", "sha256": hashlib.sha256(b"study: {title: x}\n").hexdigest()}
    ]
    rows = {r["id"]: r for r in P.run_view(run)}
    assert rows["run-command"]["value"] == "snakemake --cores 8 --configfile 'my config.yaml'"
    assert rows["run-snakemake"]["value"] == "9.1.1"
    assert rows["run-date"]["value"] == "1970-01-02T00:00:00Z"
    assert rows["run-date"]["note"] == "from SOURCE_DATE_EPOCH"
    assert rows["run-config-0"]["value"] == hashlib.sha256(b"study: {title: x}\n").hexdigest()
    # without run info: git and date still there, the rest says how to record it
    rows = {r["id"]: r for r in P.run_view(P.run_provenance(None))}
    assert "--run-info" in rows["run-command"]["value"] and "run-date" in rows


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("not json", "is not JSON"),
        ("[]", "must be a JSON object"),
        ('{"cmd": "x"}', r"unknown keys \['cmd'\]"),
        ('{"command": 3}', "command must be a string or a list"),
        ('{"config_files": "c.yaml"}', "config_files must be a list"),
        ('{"snakemake_version": 9}', "snakemake_version must be a string"),
    ],
)
def test_bad_run_info_is_one_line_value_error(tmp_path, content, match):
    path = tmp_path / "run.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=match) as exc:
        P.read_run_info(path)
    assert "\n" not in str(exc.value)


def test_missing_files_named_in_run_info(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        P.read_run_info(tmp_path / "none.json")
    with pytest.raises(ValueError, match="config file .* does not exist"):
        P.run_provenance({"config_files": [str(tmp_path / "gone.yaml")]})


def test_every_calibrator_and_metric_has_a_reference():
    """The registries are the one place: every calibrator class and metric entry carries its
    reference, and every author-year it cites is in the bibliography (a new calibrator or
    metric without one, or citing an unlisted work, fails here)."""
    import re

    pytest.importorskip("torch")
    from calbench.calibrators import REGISTRY
    from calbench.metrics import METRICS

    cal, met = B.calibrator_references(), B.metric_references()
    assert set(cal) == set(REGISTRY) and set(met) == set(METRICS)
    for name in REGISTRY:
        assert name == "uncalibrated" or cal[name], f"calibrator {name} cites no listed work"
    for name, m in METRICS.items():
        years = re.findall(r"(?<!\d)(1[89]\d\d|20\d\d)(?!\d)", m.reference)
        assert len(met[name]) >= len(set(years)) > 0 or name == "accuracy", (name, m.reference)
    cited = [k for refs in cal.values() for k in refs]
    cited += [k for refs in met.values() for k in refs] + list(B.TEXT_CITATIONS)
    cited += [k for refs in B.SECTION_CITATIONS.values() for k in refs]
    assert set(cited) <= set(B.REFERENCES)
    # the methods the brief names: histogram binning, isotonic, soft-binned ECE objectives
    assert cal["hist"] == ("Zadrozny & Elkan 2001",)
    assert cal["iso"] == ("Zadrozny & Elkan 2002",)
    assert cal["ts_sbece"] == ("Karandikar et al. 2021",)
    assert met["ece"] == ("Naeini et al. 2015", "Guo et al. 2017")


def test_cited_keys_known_answers():
    assert B.cited_keys("Naeini, Cooper & Hauskrecht 2015; Guo et al. 2017, eq. 3") == (
        "Naeini et al. 2015",
        "Guo et al. 2017",
    )
    assert B.cited_keys("Brier 1950 divided by K, as Kull et al. 2019 report it") == (
        "Brier 1950",
        "Kull et al. 2019",
    )
    assert B.cited_keys("Kull et al. 2017") == ("Kull et al. 2017",)  # not the 2019 paper
    assert B.cited_keys("") == ()


def test_bibliography_of_a_report():
    refs, cited_for = B.bibliography(
        {"iso": "iso", "my_hist": "hist", "odd": "not_registered"},
        ["ece", "accuracy", "ece"],
        {"iso": "Isotonic", "ece": "ECE"},
    )
    assert cited_for["Zadrozny & Elkan 2002"] == ["Isotonic"]
    assert cited_for["Zadrozny & Elkan 2001"] == ["my_hist"]
    assert cited_for["Naeini et al. 2015"] == ["ECE"]  # once, not per repeat
    assert "Karandikar et al. 2021" not in refs  # ts_sbece not in this report
    assert set(B.TEXT_CITATIONS) <= set(refs)
    assert list(refs)[:2] == ["Davison & Hinkley 1997", "Demšar 2006"]  # sorted by key
    assert "Bohdal et al. 2021" not in refs  # no DECE, no history section
    refs, cited_for = B.bibliography({}, ["dece"], sections=["dece_history"])
    assert cited_for["Bohdal et al. 2021"] == ["dece"]
    assert list(refs).index("Bohdal et al. 2021") == 0
    assert list(refs).index("Demšar 2006") < list(refs).index("Guo et al. 2017")


def test_rendered_report_cites_only_listed_works(tmp_path):
    """Every author-year citation in the text of a rendered report is in its bibliography."""
    pytest.importorskip("jinja2")
    from calbench.report import render
    from calbench.report.context import build_context

    rows = []
    for m in ("a", "b", "c"):
        for c in ("uncalibrated", "ts", "hist", "iso", "ts_sbece"):
            for metric in ("accuracy", "ece", "nll"):
                v = 0.5 + 0.01 * len(c) + 0.03 * ord(m) % 7
                rows.append(
                    {
                        "dataset": "d",
                        "model": m,
                        "method": c,
                        "half": "test",
                        "metric": metric,
                        "value": v,
                        "ci_low": v - 0.01,
                        "ci_high": v + 0.01,
                    }
                )
    spec = {
        "title": "t",
        "protocol": {"n_bins": 15, "plot_bins": 10, "n_bootstrap": 10, "level": 0.95},
        "datasets": {"d": {"display": "D"}},
        "models": {m: {"dataset": "d", "display": {}} for m in "abc"},
        "calibrators": {
            c: {"display": c.upper(), "method": c}
            for c in ("uncalibrated", "ts", "hist", "iso", "ts_sbece")
        },
        "table_metrics": ["accuracy", "ece", "nll"],
    }
    prov = {
        "config": "",
        "packages": {},
        "run": P.run_provenance(None, env={"SOURCE_DATE_EPOCH": "0"}),
    }
    ctx = build_context(rows=rows, compare=[], spec=spec, grids={}, provenance=prov)
    html = render.render_html(ctx)
    body = re.sub(r"<[^>]+>", " ", html.split('id="bibliography"')[0])
    body = re.sub(r"\s+", " ", html_mod.unescape(body))
    cited = set(
        re.findall(r"([A-Z][a-zšäö]+(?: et al\.| & [A-Z][a-z]+)?)(?: \(|,? )(\d{4})[,;)]", body)
    )
    listed = re.findall(r"<dt>([^<]+)</dt>\s*<dd>([^<]+)", html)
    listed = [(html_mod.unescape(k), html_mod.unescape(ref)) for k, ref in listed]
    # each citation's surname (a co-author's where the text names several) and year belong to
    # a listed work
    missing = {
        f"{a} {y}"
        for a, y in cited
        if not any(k.endswith(y) and a.split()[0] in k + ref for k, ref in listed)
    }
    assert cited and not missing, missing
    for key in ("Zadrozny & Elkan 2001", "Zadrozny & Elkan 2002", "Karandikar et al. 2021"):
        assert f"<dt>{key.replace('&', '&amp;')}</dt>" in html
    assert "Cited for: ISO." in html and 'id="run-date"' in html and "1970-01-01T00:00:00Z" in html


def test_render_report_run_info_option(tmp_path, monkeypatch, capsys):
    """``calbench render-report --run-info FILE`` puts the run into the report; a bad file is a
    one-line error, exit status 2."""
    pytest.importorskip("jinja2")
    from calbench.cli import main

    metrics = tmp_path / "metrics.csv"
    lines = ["dataset,model,method,half,metric,value,ci_low,ci_high"]
    for m in ("a", "b"):
        for c, v in (("uncalibrated", 0.1), ("ts", 0.05)):
            lines.append(f"d,{m},{c},test,ece,{v + (m == 'b') * 0.01},,")
    metrics.write_text("\n".join(lines) + "\n")
    spec = {
        "title": "t",
        "protocol": {"n_bins": 15, "plot_bins": 10, "n_bootstrap": 10, "level": 0.95},
        "datasets": {"d": {"display": "D"}},
        "models": {m: {"dataset": "d", "display": {}} for m in "ab"},
        "calibrators": {"uncalibrated": {"display": "U"}, "ts": {"display": "TS"}},
        "table_metrics": ["ece"],
    }
    config = tmp_path / "config.yaml"
    config.write_text("study: {title: t}\n")
    run = tmp_path / "run.json"
    run.write_text(
        json.dumps(
            {
                "command": ["snakemake", "-c2"],
                "snakemake_version": "9.9.9",
                "config_files": [str(config)],
            }
        )
    )
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1622550896")
    out = tmp_path / "report.html"
    argv = [
        "render-report",
        "--metrics",
        str(metrics),
        "--spec",
        json.dumps(spec),
        "--out",
        str(out),
    ]
    assert main([*argv, "--run-info", str(run)]) == 0
    html = out.read_text()
    digest = hashlib.sha256(config.read_bytes()).hexdigest()
    assert "<code>snakemake -c2</code>" in html and "9.9.9" in html and digest in html
    assert re.search(r'<tr id="run-date">.*2021-06-01T12:34:56Z.*\(from SOURCE_DATE_EPOCH\)', html)
    first = html
    assert main([*argv, "--run-info", str(run)]) == 0
    assert out.read_text() == first  # pinned date: the same bytes again
    run.write_text('{"commands": []}')
    capsys.readouterr()
    assert main([*argv, "--run-info", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown keys ['commands']" in err and "\n" not in err


# --- provenance that travels (issue 30 item 6, issue 33 group 11) -----------------------------
def _study(folder: Path) -> list[str]:
    """A tiny study in ``folder`` (metrics, config, benchmarks, the run-info JSON
    with absolute paths, as the workflow writes it); the render-report arguments, relative."""
    metrics = folder / "results" / "metrics.csv"
    metrics.parent.mkdir(parents=True)
    lines = ["dataset,model,method,half,metric,value,ci_low,ci_high"]
    for m in ("a", "b"):
        for c, v in (("uncalibrated", 0.1), ("ts", 0.05)):
            lines.append(f"d,{m},{c},test,ece,{v + (m == 'b') * 0.01},,")
    metrics.write_text("\n".join(lines) + "\n")
    (folder / "config.yaml").write_text("study: {title: t}\n")
    bench = folder / "benchmarks" / "calibrate" / "d"
    bench.mkdir(parents=True)
    (bench / "a.tsv").write_text("s\th:m:s\tmax_rss\n12.5\t0:00:12\t100\n")
    (folder / "run.json").write_text(json.dumps({
        "command": ["snakemake", "--cores", "2", "--configfile", str(folder / "config.yaml"),
                    f"--directory={folder}"],
        "snakemake_version": "9.9.9",
        "config_files": [str(folder / "config.yaml")],
        "workflow_dir": str(folder),
        "benchmarks_dir": "benchmarks",
    }))  # fmt: skip
    spec = {
        "title": "t",
        "protocol": {"n_bins": 15, "plot_bins": 10, "n_bootstrap": 10, "level": 0.95},
        "datasets": {"d": {"display": "D"}},
        "models": {m: {"dataset": "d", "display": {}} for m in "ab"},
        "calibrators": {"uncalibrated": {"display": "U"}, "ts": {"display": "TS"}},
        "table_metrics": ["ece"],
    }
    return ["render-report", "--metrics",
            "results/metrics.csv", "--spec", json.dumps(spec), "--run-info", "run.json",
            "--out", "reports/report.html"]  # fmt: skip


def test_same_study_in_two_folders_gives_byte_identical_reports(tmp_path, monkeypatch):
    pytest.importorskip("jinja2")
    from calbench.cli import main

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1622550896")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    pages = []
    for where in ("alpha_folder/study", "elsewhere/deeper/copy"):
        folder = tmp_path / where
        argv = _study(folder)
        monkeypatch.chdir(folder)
        assert main(argv) == 0
        pages.append((folder / "reports" / "report.html").read_bytes())
    assert pages[0] == pages[1]
    html = pages[0].decode()
    assert str(tmp_path) not in html and "/tmp" not in html and "alpha_folder" not in html
    assert "--configfile config.yaml --directory=." in html
    assert 'id="run-hardware"' in html and "cores; GPU:" in html
    assert re.search(r'id="run-wall">.*left out: SOURCE_DATE_EPOCH is set', html)


def test_wall_time_from_benchmark_files(tmp_path):
    import os

    from calbench.report.machine import hardware, wall_time

    bench = tmp_path / "benchmarks"
    (bench / "r").mkdir(parents=True)
    for name, seconds, end in (("a", 10.0, 1000), ("b", 30.0, 1010), ("c", 5.0, 1100)):
        f = bench / "r" / f"{name}.tsv"
        f.write_text(f"s\th:m:s\tmax_rss\n{seconds}\t0:00:10\t1\n")
        os.utime(f, (end, end))
    (bench / "r" / "broken.tsv").write_text("s\n")  # half-written: skipped
    # jobs ran [990, 1000], [980, 1010], [1095, 1100]: elapsed 1100 - 980, summed 45
    assert wall_time(bench, env={}) == {"elapsed_s": 120.0, "job_s": 45.0, "jobs": 3}
    assert "SOURCE_DATE_EPOCH" in wall_time(bench, env={"SOURCE_DATE_EPOCH": "0"})["note"]
    assert "not recorded" in wall_time(tmp_path / "none", env={})["note"]
    rows = {r["id"]: r for r in P.run_view(P.run_provenance({"benchmarks_dir": str(bench)}, env={}))}
    assert rows["run-wall"]["value"].startswith("0:02:00 elapsed") and "0:00:45 summed over 3 jobs" in rows["run-wall"]["value"]
    hw = hardware()
    assert hw["cores"] == os.cpu_count() and hw["cpu"] and isinstance(hw["gpus"], list)


def test_absolute_paths_are_shown_relative_or_by_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert P.display_path(tmp_path / "c" / "x.yaml") == "c/x.yaml"
    assert P.display_path("/somewhere/else/x.yaml") == ".../x.yaml"
    assert P.display_path("rel/x.yaml") == "rel/x.yaml"
    assert P.display_path("/wf/config/x.yaml", ["/wf"]) == "config/x.yaml"
