"""irqlab from Python: the analysis of the `irqlab` command at Rust speed,
with results as pandas objects.

The work is done by the same Rust code the command runs (the native module
`irqlab._native`); this module only turns inputs into the texts the command
reads and the JSON documents it writes into DataFrames. Bad input raises
`IrqlabInputError` with the command's message and its place (`file`,
`line`, `column`).

    >>> import irqlab
    >>> df = irqlab.analyze("examples/p7-e2.toml")
    >>> df[["name", "response_time_ns", "schedulable"]]
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence, Tuple, Union

import pandas as pd

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

from . import _native
from ._native import IrqlabInputError

__all__ = [
    "IrqlabInputError",
    "Fit",
    "Document",
    "SimResult",
    "analyze",
    "fit",
    "bound",
    "load",
    "simulate",
    "sweep",
    "idletime_model",
    "parse_duration",
    "to_toml",
]

Source = Union[str, os.PathLike, Mapping[str, Any]]


def parse_duration(text: Union[str, int]) -> int:
    """A duration in nanoseconds: "10ms", "2.5us" (the parser of every irqlab input), or an int taken as ns."""
    if isinstance(text, int):
        return text
    return _native.parse_duration(text)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{value!r} has no TOML form")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string uses the same escapes
    if isinstance(value, Sequence):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"{type(value).__name__} {value!r} cannot be written to TOML")


def _is_table_array(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str) and len(value) > 0 and all(isinstance(v, Mapping) for v in value)


def to_toml(doc: Mapping[str, Any], _prefix: str = "") -> str:
    """A dict as TOML, the way irqlab's inputs are written: scalars first,
    then sub-tables as [section] and lists of tables as [[section]]."""
    lines = []
    for key, value in doc.items():
        if not isinstance(value, Mapping) and not _is_table_array(value):
            lines.append(f"{json.dumps(str(key))} = {_toml_value(value)}")
    for key, value in doc.items():
        name = f"{_prefix}{json.dumps(str(key))}"
        if isinstance(value, Mapping):
            lines += ["", f"[{name}]", to_toml(value, name + ".")]
        elif _is_table_array(value):
            for item in value:
                lines += ["", f"[[{name}]]", to_toml(item, name + ".")]
    return "\n".join(line for line in lines if line is not None).strip("\n") + "\n"


def _read_source(source: Source, what: str) -> Tuple[str, str, str]:
    """(text, name for errors, directory for files it names)."""
    if isinstance(source, Mapping):
        return to_toml(source), f"<{what} dict>", os.getcwd()
    if isinstance(source, os.PathLike) or (isinstance(source, str) and "\n" not in source and os.path.exists(source)):
        path = Path(source)
        return path.read_text(encoding="utf-8"), str(source), str(path.parent)
    if isinstance(source, str) and ("\n" in source or "=" in source):
        return source, f"<{what} text>", os.getcwd()
    raise FileNotFoundError(f"{what} {source!r}: no such file (pass a path, TOML text or a dict)")


def analyze(taskset: Source, test: str = "rta", bound: str = "refined") -> pd.DataFrame:
    """`irqlab analyze`: one row per analysed task (name, priority, schedulable,
    response_time_ns, slack_ns, load, wcet_margin, ...) in priority order.

    `taskset` is a task-set file, its TOML text, or a dict of the same shape
    ({"task": [{"name": ..., "period": "10ms", ...}]}). `test` is "rta",
    "load" or "edf"; `bound` "refined", "traditional" or "linear". The whole
    `irqlab/analysis/v1` document is in `df.attrs["document"]`, and
    `df.attrs["schedulable"]` says whether every task is.
    """
    text, name, base = _read_source(taskset, "task set")
    doc = json.loads(_native.analyze(text, name, base, test, bound))
    df = pd.DataFrame(doc["tasks"])
    df.attrs["document"] = doc
    df.attrs["schedulable"] = doc["schedulable"]
    return df


@dataclass(frozen=True)
class Fit:
    """The hyperbolic load bound fitted to a curve (load-bounds paper eq. 10)."""

    utilization: float
    period_ns: int
    wcet_ns: int
    points: int
    document: Mapping[str, Any]

    def load(self, window_ns: Union[int, str]) -> float:
        """The bound at a window: min(1, u + u (1 - u) p / window)."""
        w = parse_duration(window_ns)
        if self.utilization >= 1.0 or w == 0:
            return 1.0
        u = self.utilization
        return min(1.0, u + u * (1.0 - u) * self.period_ns / w)


def _curve_text(curve: Any, what: str) -> Tuple[str, str]:
    if isinstance(curve, pd.DataFrame):
        return curve[["window_ns", "max_load"]].to_csv(index=False), f"<{what} DataFrame>"
    if isinstance(curve, Mapping):
        return json.dumps(curve), f"<{what} dict>"
    if isinstance(curve, (os.PathLike, str)) and os.path.exists(curve):
        return Path(curve).read_text(encoding="utf-8"), str(curve)
    if isinstance(curve, str):
        return curve, f"<{what} text>"
    if isinstance(curve, Iterable):
        return "window_ns,max_load\n" + "".join(f"{w},{load!r}\n" for w, load in curve), f"<{what} points>"
    raise TypeError(f"{what}: expected a file, a DataFrame with window_ns and max_load, a curve document or (window_ns, max_load) pairs")


def fit(curve: Any, baseline: Any = None) -> Fit:
    """`irqlab fit`: the hyperbola over a measured curve, minus an idle
    baseline if given. A curve is a file (JSON `irqlab/curve/v1` or CSV), a
    DataFrame with `window_ns` and `max_load`, a curve document (dict) or
    (window_ns, max_load) pairs."""
    text, name = _curve_text(curve, "curve")
    base_text, base_name = _curve_text(baseline, "baseline") if baseline is not None else (None, None)
    doc = json.loads(_native.fit(text, name, base_text, base_name))
    return Fit(doc["utilization"], doc["period_ns"], doc["wcet_ns"], doc["points"], doc)


def bound(period: Union[int, str], wcet: Union[int, str], windows: Optional[Iterable[Union[int, str]]] = None) -> pd.DataFrame:
    """`irqlab bound`: the demand (ns) of one periodic task at each window
    under eqs. 4 (traditional), 6 (refined) and 7 (linear), and the loads
    (demand / window) with the hyperbolic load of eq. 10. Windows default to
    20 log-spaced lengths from wcet/4 to 8 periods."""
    p, e = parse_duration(period), parse_duration(wcet)
    if windows is None:
        lo, hi = max(e // 4, 1), max(p * 8, 2)
        windows = sorted({round(lo * (hi / lo) ** (i / 19)) for i in range(20)})
    rows = _native.bounds(p, e, [parse_duration(w) for w in windows])
    df = pd.DataFrame(rows, columns=["window_ns", "traditional_ns", "refined_ns", "linear_ns", "hyperbolic_load"])
    for b in ("traditional", "refined", "linear"):
        df[f"{b}_load"] = df[f"{b}_ns"] / df["window_ns"].where(df["window_ns"] > 0)
    return df


class Document(dict):
    """An irqlab JSON document (any schema, live ones included) as a dict,
    with `schema`, `complete` and `frame(key)` for its lists of records."""

    @property
    def schema(self) -> str:
        return self.get("schema", "")

    @property
    def complete(self) -> bool:
        """False when the run that wrote it was interrupted."""
        return self.get("complete", True) is not False

    def frame(self, key: str) -> pd.DataFrame:
        """A list of records in the document (e.g. "points" of a curve,
        "tasks" of a simulation or an analysis) as a DataFrame."""
        value = self.get(key)
        if not isinstance(value, list):
            raise KeyError(f"{self.schema or 'document'}: {key!r} is not a list of records (keys: {', '.join(self)})")
        return pd.DataFrame(value)


def load(path: Union[str, os.PathLike]) -> Document:
    """Reads any irqlab JSON document (`"schema": "irqlab/<kind>/v<N>"`). A
    simulation's (`irqlab/sim/v2`, or v1 read with v2's names) is a
    `SimResult`."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("irqlab/"):
        raise IrqlabInputError(f"{path}: not an irqlab document (no \"schema\": \"irqlab/...\")")
    if str(doc["schema"]).startswith("irqlab/sim/"):
        return SimResult(doc)
    return Document(doc)


# What irqlab/sim/v2 renamed (the CPU-time names the live accounting's
# irqlab/accounting/v1 uses too; docs/conventions.md, Document versions): per task
# and in the CPU split, old name -> new name.
_SIM_V1_RENAMED = {"tasks": {"cpu_ns": "run_ns"}, "cpu": {"task_ns": "run_ns"}}


def _renamed(record: Any, names: Mapping[str, str]) -> Any:
    if not isinstance(record, Mapping):
        return record
    return {names.get(key, key): value for key, value in record.items()}


class SimResult(Document):
    """The `irqlab/sim/v2` document of one simulation, with its tables as
    DataFrames: `tasks` (run, stolen and charged time, jobs, misses, response
    times per task), `cpus` (where the CPU went, per context) and `devices`
    (the NICs' and other devices' counters).

    Run and stolen time have the live accounting's names: a task's `run_ns`,
    `stolen_ns`, `stolen_hardirq_ns`, `stolen_softirq_ns`, the CPU's
    `run_ns`, `idle_ns`, `hardirq_ns`, `softirq_ns`. An `irqlab/sim/v1`
    document (a task's `cpu_ns`, the CPU's `task_ns`) is read with those
    names; its `schema` stays as written."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.schema == "irqlab/sim/v1":
            if isinstance(self.get("tasks"), list):
                self["tasks"] = [_renamed(t, _SIM_V1_RENAMED["tasks"]) for t in self["tasks"]]
            if "cpu" in self:
                self["cpu"] = _renamed(self["cpu"], _SIM_V1_RENAMED["cpu"])

    @property
    def tasks(self) -> pd.DataFrame:
        return self.frame("tasks")

    @property
    def cpus(self) -> pd.DataFrame:
        return pd.DataFrame([self.get("cpu", {})])

    @property
    def devices(self) -> pd.DataFrame:
        rows = [dict(kind="nic", **n) for n in self.get("nics", [])] + [dict(kind="device", **d) for d in self.get("devices", [])]
        return pd.json_normalize(rows)

    def summary(self) -> dict:
        """One flat record of the run: per task `task.<name>.<field>` for its
        numbers (`task.<name>.run_ns`, ...), and the CPU split as
        `cpu.<context>_ns` (`cpu.run_ns`, `cpu.softirq_ns`, ...)."""
        out = {"events": self.get("events"), "complete": self.complete}
        for t in self.get("tasks", []):
            for key, value in t.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    out[f"task.{t['name']}.{key}"] = value
        for key, value in self.get("cpu", {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[f"cpu.{key}"] = value
        return out


def _scenario_text(scenario: Source) -> Tuple[str, str]:
    text, name, _ = _read_source(scenario, "scenario")
    return text, name


def simulate(scenario: Source, seed: Optional[int] = None, duration: Union[None, int, str] = None) -> Union[SimResult, Document]:
    """`irqlab sim`: runs a scenario (a file, its TOML text, or a dict of the
    file's shape) and returns its document. `seed` and `duration` override
    the scenario's [run] values. The simulation is the command's: same
    scenario and seed, same numbers. A scenario of several CPUs
    (`[machine] cores = N`) gives the command's `irqlab/sim-machine/v1` as a
    `Document`: `doc["cpus"][n]["sim"]` is CPU n's `irqlab/sim/v2`
    (`SimResult(doc["cpus"][n]["sim"])` for its frames)."""
    text, name = _scenario_text(scenario)
    ns = None if duration is None else parse_duration(duration)
    doc = json.loads(_native.simulate(text, name, seed, ns))
    return SimResult(doc) if str(doc.get("schema", "")).startswith("irqlab/sim/") else Document(doc)


def _set_key(doc: Any, key: str, value: Any) -> None:
    """Sets the dotted `key` ("policy.budget", "task.tau2.exec": a list of
    tables is indexed by position or by its items' `name`) in a scenario
    dict. The key must exist, and a value replaces one of the same kind."""
    parts = key.split(".")
    node = doc
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        where = ".".join(parts[:depth]) or "the scenario"
        if isinstance(node, list):
            names = [item.get("name") for item in node if isinstance(item, Mapping)]
            if part.isdigit() and int(part) < len(node):
                index = int(part)
            elif part in names:
                index = names.index(part)
            else:
                raise KeyError(f"grid key {key!r}: {where} has no item {part!r} (items: {', '.join(map(str, names)) or 'none'})")
            if last:
                raise KeyError(f"grid key {key!r} names a whole table, not a value")
            node = node[index]
            continue
        if not isinstance(node, Mapping) or part not in node:
            valid = ", ".join(sorted(node)) if isinstance(node, Mapping) else "none"
            raise KeyError(f"grid key {key!r}: {where} has no key {part!r} (keys there: {valid})")
        if last:
            old = node[part]
            if isinstance(old, (Mapping, list)) or (isinstance(old, str) != isinstance(value, str)) or isinstance(value, (Mapping, list)):
                raise TypeError(f"grid key {key!r}: {value!r} cannot replace {old!r}")
            node[part] = value
        else:
            node = node[part]


def _one_run(job: Tuple[Mapping[str, Any], str, Mapping[str, Any], Optional[int], Optional[int]]) -> dict:
    """One run of a sweep: the parsed scenario with `params` set (a
    top-level function: process and Ray workers import it)."""
    doc, name, params, seed, duration = job
    run = copy.deepcopy(doc)
    for key, value in params.items():
        _set_key(run, key, value)
    result = SimResult(json.loads(_native.simulate(to_toml(run), name, seed, duration)))
    return {**params, "seed": seed, **result.summary()}


def sweep(
    scenario: Source,
    grid: Mapping[str, Sequence[Any]],
    seeds: Iterable[int] = (1,),
    duration: Union[None, int, str] = None,
    backend: str = "serial",
    ray_address: Optional[str] = None,
) -> pd.DataFrame:
    """Runs `scenario` at every point of `grid` (dotted scenario keys to the
    values to try, e.g. {"policy.gain": [0.1, 0.25]}) for every seed: one row
    per run, the parameters and the run's summary. `backend` is "serial",
    "processes" (one worker per core) or "ray" (a running cluster at
    `ray_address`, or a local one started for the sweep); every backend gives
    the same rows in the same order."""
    text, name = _scenario_text(scenario)
    ns = None if duration is None else parse_duration(duration)
    keys = list(grid)
    doc = tomllib.loads(text)
    # Check every key and value before the first run: a typo fails at once.
    probe = copy.deepcopy(doc)
    for key in keys:
        for value in grid[key]:
            _set_key(probe, key, value)
    jobs = [(doc, name, dict(zip(keys, values)), seed, ns) for values in itertools.product(*(grid[k] for k in keys)) for seed in seeds]
    if backend == "serial":
        rows = [_one_run(job) for job in jobs]
    elif backend == "processes":
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor() as pool:
            rows = list(pool.map(_one_run, jobs))
    elif backend == "ray":
        rows = _ray_runs(jobs, ray_address)
    else:
        raise ValueError(f"backend {backend!r}: expected \"serial\", \"processes\" or \"ray\"")
    return pd.DataFrame(rows)


def _ray_runs(jobs, address, run=None):
    try:
        import ray
    except ImportError as e:
        raise ImportError("backend=\"ray\" needs Ray (pip install ray)") from e
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    try:
        remote = ray.remote(max_retries=2)(run or _one_run)
        # A worker that dies is retried (max_retries); a run that still fails
        # raises here, naming it, instead of leaving a row out.
        refs = [remote.remote(job) for job in jobs]
        rows = []
        for job, ref in zip(jobs, refs):
            try:
                rows.append(ray.get(ref))
            except Exception as e:  # noqa: BLE001 - re-raised with the run named
                raise RuntimeError(f"sweep run {job[2]} seed {job[3]} failed on Ray: {e}") from e
        return rows
    finally:
        if started:
            ray.shutdown()


def idletime_model(
    resource: Union[str, os.PathLike] = "disk",
    p: Optional[Iterable[Union[int, str]]] = None,
    i: Optional[Iterable[float]] = None,
    service: Union[None, int, str] = None,
    alpha: float = 1.0,
    t_max: Union[int, str] = "100ms",
) -> pd.DataFrame:
    """`irqlab idletime-model`: the idletime dissertation's throughput model
    (§4.4) over preemption intervals `p` and foreground intensities `i`
    (fractions), one row per cell: normalised foreground (% of r(i)) and
    background (% of r_max) throughput, and the raw ones. `resource` is
    "disk", "udp" or a baseline CSV file (`intensity_pct,throughput`)."""
    if str(resource) in ("disk", "udp"):
        text, name = str(resource), str(resource)
        default_hi = 200_000_000 if resource == "disk" else 5_000_000
    else:
        text, name = Path(resource).read_text(encoding="utf-8"), str(resource)
        default_hi = 2 * parse_duration(t_max)
    ps = [parse_duration(x) for x in p] if p is not None else [round(default_hi * k / 10) for k in range(11)]
    intensities = list(i) if i is not None else [0.01 + 0.11 * k for k in range(10)]
    rows = _native.idletime_model(text, name, ps, intensities, None if service is None else parse_duration(service), alpha, parse_duration(t_max))
    return pd.DataFrame(rows, columns=["p_ns", "intensity", "foreground_norm", "background_norm", "foreground", "background"])
