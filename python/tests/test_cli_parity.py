"""The Python package against the `irqlab` command: the same documents on
the shipped inputs, the same errors with the same places."""

import json
import os
import subprocess
from pathlib import Path

import pytest

import irqlab

ROOT = Path(__file__).resolve().parents[2]
CLI = os.environ.get("IRQLAB_BIN", str(ROOT / "target" / "release" / "irqlab"))
TASKSETS = sorted((ROOT / "examples").glob("*.toml"))


def cli_json(*args):
    out = subprocess.run([CLI, *args, "--json", "-"], capture_output=True, text=True)
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("path", TASKSETS, ids=lambda p: p.name)
@pytest.mark.parametrize("test", ["rta", "load", "edf"])
def test_analyze_gives_the_clis_document(path, test):
    try:
        df = irqlab.analyze(path, test=test)
    except irqlab.IrqlabInputError as e:  # a test that does not apply to this set
        out = subprocess.run([CLI, "analyze", str(path), "--test", test], capture_output=True, text=True)
        assert out.returncode == 2 and e.message in out.stderr
        return
    assert df.attrs["document"] == cli_json("analyze", str(path), "--test", test)
    assert list(df["name"]) == [t["name"] for t in df.attrs["document"]["tasks"]]


def test_analyze_takes_a_dict_and_text():
    sets = {"task": [{"name": "drv", "period": "7ms", "wcet": "2ms", "priority": 0},
                     {"name": "t", "period": "8ms", "wcet": "5ms", "priority": 1}]}
    df = irqlab.analyze(sets)
    assert df.attrs["schedulable"] and list(df["name"]) == ["drv", "t"]
    # The load-bounds paper's running example: R = 2 + 5 = 7 ms for the task
    # below the 7 ms / 2 ms one.
    assert list(df["response_time_ns"]) == [2_000_000, 7_000_000]
    assert irqlab.analyze(irqlab.to_toml(sets)).attrs["document"] == df.attrs["document"]


@pytest.mark.parametrize("args", [["examples/curve-nic.json"], ["examples/curve-nic.json", "examples/curve-baseline.csv"]])
def test_fit_gives_the_clis_document(args):
    paths = [str(ROOT / a) for a in args]
    fit = irqlab.fit(paths[0], paths[1] if len(paths) > 1 else None)
    cli = cli_json("fit", paths[0], *(["--baseline", paths[1]] if len(paths) > 1 else []))
    assert fit.document == cli
    assert fit.load(10**18) == pytest.approx(fit.utilization, rel=1e-9)


def test_fit_takes_a_dataframe():
    curve = irqlab.load(ROOT / "examples" / "curve-nic.json")
    from_frame = irqlab.fit(curve.frame("points"))
    assert (from_frame.utilization, from_frame.period_ns) == (irqlab.fit(dict(curve)).utilization, irqlab.fit(dict(curve)).period_ns)


def test_bound_has_the_papers_check_values():
    df = irqlab.bound("7ms", "2ms", ["8ms", "1s"]).set_index("window_ns")
    assert df.loc[8_000_000, "traditional_ns"] == 4_000_000
    assert df.loc[8_000_000, "refined_ns"] == 3_000_000
    assert df.loc[1_000_000_000, "hyperbolic_load"] == pytest.approx(2 / 7, rel=1e-2)


def test_errors_carry_the_clis_message_and_place(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[task]]\nname = "t"\nperiod = "10 parsecs"\nwcet = "1ms"\n')
    out = subprocess.run([CLI, "analyze", str(bad)], capture_output=True, text=True)
    assert out.returncode == 2
    with pytest.raises(irqlab.IrqlabInputError) as info:
        irqlab.analyze(bad)
    e = info.value
    assert (e.file, e.line, e.column) == (str(bad), 3, 10)
    assert f"error: {e.message}\n  at {bad}:3:10" in out.stderr
    with pytest.raises(ValueError, match="expected \"rta\""):
        irqlab.analyze(bad, test="fast")
    with pytest.raises(FileNotFoundError):
        irqlab.analyze("no-such-file.toml")


def test_load_reads_any_document(tmp_path):
    doc = cli_json("analyze", str(ROOT / "examples" / "p7-e2.toml"))
    path = tmp_path / "a.json"
    path.write_text(json.dumps(doc))
    loaded = irqlab.load(path)
    assert loaded.schema == "irqlab/analysis/v1" and loaded.complete
    assert len(loaded.frame("tasks")) == len(doc["tasks"])
    (tmp_path / "x.json").write_text("[1, 2]")
    with pytest.raises(irqlab.IrqlabInputError):
        irqlab.load(tmp_path / "x.json")


@pytest.mark.parametrize("resource", ["disk", "udp"])
def test_idletime_model_gives_the_clis_grid(resource):
    cli = cli_json("idletime-model", "--resource", resource, "--p-steps", "4", "--i-steps", "3")
    df = irqlab.idletime_model(resource, p=cli["intervals_ns"], i=cli["intensities"])
    for pi, p in enumerate(cli["intervals_ns"]):
        for k, i in enumerate(cli["intensities"]):
            row = df[(df["p_ns"] == p) & (df["intensity"] == i)].iloc[0]
            assert (row["foreground_norm"], row["background_norm"]) == (cli["foreground_norm"][pi][k], cli["background_norm"][pi][k])
    with pytest.raises(ValueError, match="intensity"):
        irqlab.idletime_model(resource, i=[1.5])
