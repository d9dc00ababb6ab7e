//! `irqlab._native`: the Rust side of the Python package. A thin layer over
//! the same library calls the `irqlab` command makes: inputs are the texts
//! of files (so errors name the file, line and column as the CLI does),
//! outputs are the same JSON documents. The GIL is released while Rust
//! works. `irqlab/__init__.py` turns the documents into pandas objects.

use irqlab_analysis::demand::{hyperbolic_load, periodic_demand};
use irqlab_analysis::fit::FitDocument;
use irqlab_analysis::{analyze as analyze_set, parse_task_set, Curve, DemandBound, InputError, Location, Nanos, Test};
use irqlab_sim::{run_machine, run_scenario, RunError, Scenario};
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::path::Path;
use std::sync::atomic::AtomicBool;

create_exception!(
    _native,
    IrqlabInputError,
    PyValueError,
    "Bad input, with the place it was found (file:line:col), as the CLI reports it."
);

/// The exception for bad input: `str()` is the CLI's message (`what` and
/// `  at file:line:col`); `message`, `file`, `line` and `column` are
/// attributes (line and column 0 when the error names a whole file).
fn input_error(py: Python<'_>, e: InputError) -> PyErr {
    let text = match &e.location {
        Some(loc) => format!("{}\n  at {loc}", e.message),
        None => e.message.clone(),
    };
    let err = IrqlabInputError::new_err(text);
    let value = err.value(py);
    let loc = e.location.unwrap_or_else(|| Location::file_only(""));
    // Setting plain attributes on a fresh exception object cannot fail.
    let _ = value.setattr("message", e.message);
    let _ = value.setattr("file", loc.file);
    let _ = value.setattr("line", loc.line);
    let _ = value.setattr("column", loc.col);
    err
}

fn test_named(name: &str) -> PyResult<Test> {
    match name {
        "rta" => Ok(Test::Rta),
        "load" => Ok(Test::Load),
        "edf" => Ok(Test::Edf),
        other => Err(PyValueError::new_err(format!("test {other:?}: expected \"rta\", \"load\" or \"edf\""))),
    }
}

fn bound_named(name: &str) -> PyResult<DemandBound> {
    match name {
        "traditional" => Ok(DemandBound::Traditional),
        "refined" => Ok(DemandBound::Refined),
        "linear" => Ok(DemandBound::Linear),
        other => Err(PyValueError::new_err(format!("bound {other:?}: expected \"traditional\", \"refined\" or \"linear\""))),
    }
}

/// `irqlab analyze`: the `irqlab/analysis/v1` document of the task set in
/// `source` (named `file` in errors); curve files it names are read from
/// `base_dir`.
#[pyfunction]
#[pyo3(signature = (source, file, base_dir, test="rta", bound="refined"))]
fn analyze(py: Python<'_>, source: &str, file: &str, base_dir: &str, test: &str, bound: &str) -> PyResult<String> {
    let (test, bound) = (test_named(test)?, bound_named(bound)?);
    let result = py.allow_threads(|| {
        let mut read_curve = |name: &str| {
            let path = Path::new(base_dir).join(name);
            std::fs::read_to_string(&path).map(|text| (path.display().to_string(), text)).map_err(|e| format!("{}: {e}", path.display()))
        };
        let set = parse_task_set(file, source, &mut read_curve)?;
        let analysis = analyze_set(&set, test, bound)?;
        Ok::<_, InputError>(serde_json::to_string(&analysis).expect("the analysis serialises"))
    });
    result.map_err(|e| input_error(py, e))
}

/// `irqlab fit`: the `irqlab/fit/v1` document of a curve's text (JSON or
/// CSV), minus a baseline curve's if given.
#[pyfunction]
#[pyo3(signature = (curve, curve_name, baseline=None, baseline_name=None))]
fn fit(py: Python<'_>, curve: &str, curve_name: &str, baseline: Option<&str>, baseline_name: Option<&str>) -> PyResult<String> {
    let result = py.allow_threads(|| {
        let measured = Curve::parse(curve_name, curve)?;
        let base_name = baseline_name.unwrap_or("baseline");
        let baseline = baseline.map(|text| Curve::parse(base_name, text)).transpose()?;
        let (doc, _) = FitDocument::fit(&measured, baseline.as_ref(), (curve_name, baseline.as_ref().map(|_| base_name)))
            .map_err(|e| InputError::at(e.to_string(), Location::file_only(curve_name)))?;
        Ok::<_, InputError>(serde_json::to_string(&doc).expect("the fit serialises"))
    });
    result.map_err(|e| input_error(py, e))
}

/// `(window, traditional, refined, linear demand, hyperbolic load)`.
type BoundsRow = (Nanos, Nanos, Nanos, Nanos, f64);

/// The demand bounds of one periodic task (period, wcet in ns) at each
/// window: `(window, traditional, refined, linear, hyperbolic load)` per
/// window (load-bounds paper eqs. 4, 6, 7 and 10).
#[pyfunction]
fn bounds(period_ns: Nanos, wcet_ns: Nanos, windows_ns: Vec<Nanos>) -> PyResult<Vec<BoundsRow>> {
    if period_ns == 0 || wcet_ns > period_ns {
        return Err(PyValueError::new_err(format!("need 0 < wcet <= period (period {period_ns} ns, wcet {wcet_ns} ns)")));
    }
    let u = wcet_ns as f64 / period_ns as f64;
    Ok(windows_ns
        .into_iter()
        .map(|w| {
            let d = |b| periodic_demand(b, period_ns, wcet_ns, w);
            (w, d(DemandBound::Traditional), d(DemandBound::Refined), d(DemandBound::Linear), hyperbolic_load(u, period_ns, w))
        })
        .collect())
}

/// `irqlab sim`: the `irqlab/sim/v2` document of the scenario in `source`
/// (named `file` in errors), or `irqlab/sim-machine/v1` for a scenario of
/// several CPUs, with `seed` and `duration_ns` overriding its [run]
/// values. A run whose conservation checks fail raises, as the command
/// exits 1.
#[pyfunction]
#[pyo3(signature = (source, file, seed=None, duration_ns=None))]
fn simulate(py: Python<'_>, source: &str, file: &str, seed: Option<u64>, duration_ns: Option<Nanos>) -> PyResult<String> {
    if let Some(d) = duration_ns {
        if d == 0 || d > irqlab_sim::scenario::MAX_DURATION_NS {
            return Err(PyValueError::new_err(format!("duration {d} ns: expected more than 0 and at most 1000000 s")));
        }
    }
    let result = py.allow_threads(|| {
        let sc = Scenario::parse(file, source)?;
        let params = sc.run_params(seed, duration_ns)?;
        let stop = AtomicBool::new(false);
        if sc.cores() > 1 {
            let machine = run_machine(&sc, params, &stop, |_| {})?;
            let ok = machine.conservation.ok();
            return Ok::<_, RunError>((serde_json::to_string(&machine).expect("the result serialises"), ok));
        }
        let out = run_scenario(&sc, params, false, &stop, |_| {})?;
        let c = &out.result.conservation;
        let ok = c.cpu_time_ok && c.packets_ok && c.devices_ok;
        Ok((serde_json::to_string(&out.result).expect("the result serialises"), ok))
    });
    let (json, conserved) = result.map_err(|e| match e {
        RunError::Input(e) => input_error(py, e),
        RunError::Sim(e) => PyRuntimeError::new_err(e.to_string()),
    })?;
    if !conserved {
        return Err(PyRuntimeError::new_err(format!("{file}: conservation check failed (see \"conservation\" in the result)")));
    }
    Ok(json)
}

/// `(p, intensity, foreground_norm, background_norm, foreground, background)`.
type ModelCell = (Nanos, f64, f64, f64, f64, f64);

/// `irqlab idletime-model`: the dissertation's throughput model (§4.4) on
/// a grid, `(p_ns, intensity, foreground_norm, background_norm, foreground,
/// background)` per cell. `resource` is "disk", "udp" or the text of a
/// baseline CSV named `file`; `service_ns` overrides the service time
/// (default: the measured one for disk/udp, 1/r_max for a table).
#[pyfunction]
#[pyo3(signature = (resource, file, intervals_ns, intensities, service_ns=None, alpha=1.0, t_max_ns=None))]
#[allow(clippy::too_many_arguments)]
fn idletime_model(
    py: Python<'_>,
    resource: &str,
    file: &str,
    intervals_ns: Vec<Nanos>,
    intensities: Vec<f64>,
    service_ns: Option<Nanos>,
    alpha: f64,
    t_max_ns: Option<Nanos>,
) -> PyResult<Vec<ModelCell>> {
    use irqlab_analysis::idletime::{predict_grid, BaselineTable, ModelParams, Resource, ServiceTime, T_MAX_NS};
    if !(0.0..=1.0).contains(&alpha) {
        return Err(PyValueError::new_err(format!("alpha {alpha}: expected a number in 0..1")));
    }
    if let Some(i) = intensities.iter().find(|i| !(**i > 0.0 && **i <= 1.0)) {
        return Err(PyValueError::new_err(format!("intensity {i}: expected a fraction in (0, 1]")));
    }
    let (table, mut params) = match resource {
        "disk" => (Resource::Disk.table(), Resource::Disk.params()),
        "udp" => (Resource::Udp.table(), Resource::Udp.params()),
        text => (
            BaselineTable::parse_csv(file, file, text).map_err(|e| input_error(py, e))?,
            ModelParams { service: ServiceTime::InverseRmax, t_max_ns: T_MAX_NS, alpha: 1.0 },
        ),
    };
    if let Some(ns) = service_ns {
        params.service = ServiceTime::Fixed(ns);
    }
    params.alpha = alpha;
    if let Some(t) = t_max_ns {
        params.t_max_ns = t;
    }
    Ok(py.allow_threads(|| {
        let grid = predict_grid(&table, &params, &intervals_ns, &intensities);
        grid.iter().flatten().map(|c| (c.p_ns, c.intensity, c.foreground_norm, c.background_norm, c.foreground, c.background)).collect()
    }))
}

/// A duration with a unit ("10ms", "2.5us") in nanoseconds, by the parser
/// every irqlab input uses.
#[pyfunction]
fn parse_duration(text: &str) -> PyResult<Nanos> {
    irqlab_analysis::parse_duration_ns(text).map_err(|e| PyValueError::new_err(e.to_string()))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("IrqlabInputError", m.py().get_type::<IrqlabInputError>())?;
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    m.add_function(wrap_pyfunction!(fit, m)?)?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(bounds, m)?)?;
    m.add_function(wrap_pyfunction!(idletime_model, m)?)?;
    m.add_function(wrap_pyfunction!(parse_duration, m)?)?;
    Ok(())
}
