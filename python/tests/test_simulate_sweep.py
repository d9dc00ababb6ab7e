"""simulate() against `irqlab sim`, and sweep() on every backend."""

import json
import os
import subprocess
from pathlib import Path

import pytest

import irqlab

ROOT = Path(__file__).resolve().parents[2]
CLI = os.environ.get("IRQLAB_BIN", str(ROOT / "target" / "release" / "irqlab"))
SCENARIOS = sorted((ROOT / "scenarios").glob("*/*.toml"))
FLOOD = ROOT / "scenarios" / "bh-threshold" / "flood-bh-scheduler.toml"


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_simulate_gives_the_clis_document(path):
    cli = subprocess.run([CLI, "sim", str(path), "--duration", "0.3s", "--seed", "7", "--json", "-"], capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    result = irqlab.simulate(path, seed=7, duration="0.3s")
    assert dict(result) == json.loads(cli.stdout)
    if result.schema == "irqlab/sim-machine/v1":
        # Several CPUs: each CPU's document, as one CPU's run writes it.
        assert len(result["cpus"]) == result["cores"] > 1
        cpu0 = irqlab.SimResult(result["cpus"][0]["sim"])
        assert cpu0.schema == "irqlab/sim/v2" and cpu0.cpus.loc[0, "run_ns"] == cpu0["cpu"]["run_ns"]
        return
    assert list(result.tasks["name"]) == [t["name"] for t in result["tasks"]]
    assert result.schema == "irqlab/sim/v2"
    assert result.cpus.loc[0, "run_ns"] == result["cpu"]["run_ns"]
    assert "cpu_ns" not in result.tasks.columns and "task_ns" not in result.cpus.columns


V1 = ROOT / "crates" / "sim" / "tests" / "data" / "ping-flood-v1.json"


def test_a_v1_document_loads_with_v2_names():
    # `irqlab sim scenarios/examples/ping-flood.toml --duration 20ms` as
    # irqlab/sim/v1 wrote it: a task's run time was `cpu_ns`, the CPU's `task_ns`.
    raw = json.loads(V1.read_text())
    assert raw["schema"] == "irqlab/sim/v1" and "cpu_ns" in raw["tasks"][1] and "task_ns" in raw["cpu"]
    doc = irqlab.load(V1)
    assert isinstance(doc, irqlab.SimResult) and doc.schema == "irqlab/sim/v1"
    tasks = doc.tasks.set_index("name")
    assert "cpu_ns" not in tasks.columns
    assert tasks.loc["tau1", "run_ns"] == 4_000_000 and tasks.loc["tau1", "stolen_ns"] == 4_052_500
    assert "task_ns" not in doc.cpus.columns and doc.cpus.loc[0, "run_ns"] == 8_000_000
    assert doc.summary()["task.tau1.run_ns"] == 4_000_000 and doc.summary()["cpu.run_ns"] == 8_000_000
    # The same names as a v2 document of the same scenario.
    v2 = irqlab.simulate(ROOT / "scenarios" / "examples" / "ping-flood.toml", duration="20ms")
    assert set(doc["cpu"]) == set(v2["cpu"]) and set(doc["tasks"][1]) == set(v2["tasks"][1])


def test_simulate_takes_a_dict_and_reports_errors_with_their_place(tmp_path):
    import tomllib

    doc = tomllib.loads(FLOOD.read_text())
    assert irqlab.simulate(doc, duration="0.1s")["events"] > 0
    bad = tmp_path / "bad.toml"
    bad.write_text(FLOOD.read_text().replace('kind = "constant"', 'kind = "constant"\nburst = "1ms"', 1))
    cli = subprocess.run([CLI, "sim", str(bad)], capture_output=True, text=True)
    with pytest.raises(irqlab.IrqlabInputError) as info:
        irqlab.simulate(bad)
    e = info.value
    assert cli.returncode == 2 and f"at {bad}:{e.line}:{e.column}" in cli.stderr and e.message in cli.stderr
    assert "valid keys" in e.message


GRID = {"policy.gain": [0.1, 0.5], "policy.window": [10, 50, 100]}


def test_sweep_rows_are_the_runs():
    df = irqlab.sweep(FLOOD, GRID, seeds=[1, 2], duration="0.2s")
    assert len(df) == 2 * 3 * 2
    assert list(df.columns[:3]) == ["policy.gain", "policy.window", "seed"]
    one = irqlab.simulate(irqlab.to_toml(_with(FLOOD, gain=0.5, window=50)), seed=2, duration="0.2s").summary()
    row = df[(df["policy.gain"] == 0.5) & (df["policy.window"] == 50) & (df["seed"] == 2)].iloc[0]
    assert {k: row[k] for k in one} == one


def _with(path, **policy):
    import tomllib

    doc = tomllib.loads(path.read_text())
    doc["policy"].update(policy)
    return doc


@pytest.mark.parametrize("backend", ["processes", "ray"])
def test_every_backend_gives_the_same_rows(backend):
    if backend == "ray":
        pytest.importorskip("ray", reason="Ray is installed by scripts/install-python.sh")
    serial = irqlab.sweep(FLOOD, GRID, seeds=[1, 2], duration="0.2s")
    other = irqlab.sweep(FLOOD, GRID, seeds=[1, 2], duration="0.2s", backend=backend)
    assert other.equals(serial)


def test_bad_grids_fail_before_any_run():
    with pytest.raises(KeyError, match=r"no key 'gian'.*keys there: .*gain"):
        irqlab.sweep(FLOOD, {"policy.gian": [0.1]})
    with pytest.raises(KeyError, match="no item 'nobody'"):
        irqlab.sweep(FLOOD, {"task.nobody.exec": ["1ms"]})
    with pytest.raises(TypeError, match="cannot replace"):
        irqlab.sweep(FLOOD, {"policy.period": [5]})
    with pytest.raises(ValueError, match="backend"):
        irqlab.sweep(FLOOD, {"policy.gain": [0.1]}, backend="cluster")


def test_ray_retries_a_dead_worker_and_names_a_run_that_keeps_dying(tmp_path):
    pytest.importorskip("ray", reason="Ray is installed by scripts/install-python.sh")
    marker = str(tmp_path / "died-once")

    def dies_once(job):  # the worker process exits in the middle of run x = 1, once
        import os

        if job[2]["x"] == 1 and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)
        return {"x": job[2]["x"]}

    rows = irqlab._ray_runs([("", "", {"x": x}, 1, None) for x in range(3)], None, run=dies_once)
    assert [r["x"] for r in rows] == [0, 1, 2] and os.path.exists(marker)

    def always_dies(job):
        import os

        os._exit(1)

    with pytest.raises(RuntimeError, match=r"sweep run \{'x': 7\} seed 1 failed on Ray"):
        irqlab._ray_runs([("", "", {"x": 7}, 1, None)], None, run=always_dies)
