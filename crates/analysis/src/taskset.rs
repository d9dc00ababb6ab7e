//! Task-set files (TOML): `[[task]]` tables, checked with the place of
//! every bad value.
//!
//! ```toml
//! [[task]]
//! name = "tau1"
//! period = "10ms"
//! wcet = "2ms"
//! deadline = "10ms"         # optional, default: the period
//! priority = 1              # optional, smaller = more urgent; default: file order
//!
//! [[task]]
//! name = "driver"
//! kind = "hyperbolic"       # periodic (default) | sporadic | hyperbolic | curve
//! utilization = 0.5         #   | polling-server | deferrable-server | sporadic-server
//! period = "7.2ms"
//! ```

use crate::curve::Curve;
use crate::envelope::DemandEnvelope;
use crate::input::{InputError, Location};
use crate::task::{Hyperbola, Model, PeriodicTask, Server};
use crate::units::{parse_duration_ns, Nanos};
use serde::Deserialize;
use toml::Spanned;

/// One task of a task set, with where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// Unique within the set.
    pub name: String,
    /// Smaller = more urgent. Tasks of equal priority are assumed to
    /// interfere with each other (FIFO among equals, counted both ways).
    pub priority: i64,
    /// What the task is and how much it demands.
    pub model: Model,
    /// Where it was written.
    pub origin: Origin,
}

/// Where a task's values are in its file, for errors found after parsing
/// (e.g. a test that needs `deadline ≤ period`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Origin {
    /// The `[[task]]` table.
    pub table: Option<Location>,
    /// The `wcet` value.
    pub wcet: Option<Location>,
    /// The `deadline` value (the `period` when the deadline is implicit).
    pub deadline: Option<Location>,
}

/// Tasks in priority order (most urgent first; file order among equals).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaskSet {
    /// Tasks, most urgent first.
    pub tasks: Vec<Task>,
}

impl TaskSet {
    /// Indices of the tasks that can preempt task `k`: higher priority, and
    /// equal priority other than `k` itself.
    pub fn interferers_of(&self, k: usize) -> impl Iterator<Item = usize> + '_ {
        let pk = self.tasks[k].priority;
        self.tasks.iter().enumerate().filter(move |(i, t)| *i != k && t.priority <= pk).map(|(i, _)| i)
    }

    /// Indices of the tasks `k` can preempt (the ones that see `k` as an interferer).
    pub fn interfered_by(&self, k: usize) -> impl Iterator<Item = usize> + '_ {
        let pk = self.tasks[k].priority;
        self.tasks.iter().enumerate().filter(move |(i, t)| *i != k && t.priority >= pk).map(|(i, _)| i)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    #[serde(default)]
    task: Vec<Spanned<TaskSpec>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskSpec {
    name: Option<Spanned<String>>,
    kind: Option<Spanned<String>>,
    period: Option<Spanned<toml::Value>>,
    wcet: Option<Spanned<toml::Value>>,
    deadline: Option<Spanned<toml::Value>>,
    priority: Option<Spanned<i64>>,
    utilization: Option<Spanned<f64>>,
    budget: Option<Spanned<toml::Value>>,
    file: Option<Spanned<String>>,
}

/// What the parser needs from the outside world: the text of a curve file
/// named in a task (`kind = "curve"`, `file = ...`). Returns the name to
/// show in errors and the text, or why it could not be read.
pub type CurveReader<'a> = dyn FnMut(&str) -> Result<(String, String), String> + 'a;

struct Ctx<'a> {
    file: &'a str,
    source: &'a str,
}

impl Ctx<'_> {
    fn at<T>(&self, v: &Spanned<T>) -> Location {
        Location::at_span(self.file, self.source, v.span())
    }

    fn err<T>(&self, v: &Spanned<T>, message: impl Into<String>) -> InputError {
        InputError::at(message, self.at(v))
    }

    /// A duration field: a string with a unit, parsed by the shared parser.
    fn duration(&self, v: &Spanned<toml::Value>, field: &str) -> Result<Nanos, InputError> {
        match v.get_ref() {
            toml::Value::String(s) => parse_duration_ns(s).map_err(|e| self.err(v, format!("{field}: {e}"))),
            toml::Value::Integer(n) if *n < 0 => Err(self.err(v, format!("{field}: duration {n} is negative"))),
            toml::Value::Integer(n) => {
                Err(self.err(v, format!("{field}: duration {n} has no unit (write it as a string with a unit, e.g. \"{n}ms\")")))
            }
            toml::Value::Float(x) => {
                Err(self.err(v, format!("{field}: duration {x} has no unit (write it as a string with a unit, e.g. \"{x}ms\")")))
            }
            other => Err(self.err(v, format!("{field}: expected a duration such as \"10ms\", found {}", other.type_str()))),
        }
    }
}

/// Parses a task-set file. `file` names it in errors; `read_curve` loads
/// the curve files that `kind = "curve"` tasks name.
pub fn parse_task_set(file: &str, source: &str, read_curve: &mut CurveReader<'_>) -> Result<TaskSet, InputError> {
    let spec: FileSpec = toml::from_str(source).map_err(|e| InputError::from_toml(file, source, &e))?;
    let ctx = Ctx { file, source };
    if spec.task.is_empty() {
        return Err(InputError::at("the task set has no [[task]] tables", Location::file_only(file)));
    }
    let with_priority = spec.task.iter().filter(|t| t.get_ref().priority.is_some()).count();
    let mut tasks = Vec::with_capacity(spec.task.len());
    let mut names: Vec<(String, Location)> = Vec::new();
    for (index, table) in spec.task.iter().enumerate() {
        let table_at = ctx.at(table);
        let t = table.get_ref();
        let missing = |field: &str| InputError::at(format!("task is missing the field `{field}`"), table_at.clone());
        let name = t.name.as_ref().ok_or_else(|| missing("name"))?;
        if name.get_ref().trim().is_empty() {
            return Err(ctx.err(name, "task name is empty"));
        }
        if let Some((_, first)) = names.iter().find(|(n, _)| n == name.get_ref()) {
            return Err(ctx.err(name, format!("duplicate task name `{}` (first used at {first})", name.get_ref())));
        }
        names.push((name.get_ref().clone(), ctx.at(name)));
        let missing = |field: &str| InputError::at(format!("task `{}` is missing the field `{field}`", name.get_ref()), table_at.clone());
        let priority = match &t.priority {
            Some(p) => *p.get_ref(),
            None if with_priority > 0 => {
                return Err(InputError::at(
                    format!("task `{}` has no priority, but others do: give every task a priority or none", name.get_ref()),
                    table_at,
                ))
            }
            None => index as i64,
        };
        let kind = t.kind.as_ref().map_or("periodic", |k| k.get_ref().as_str());
        let allowed: &[&str] = match kind {
            "periodic" | "sporadic" => &["period", "wcet", "deadline"],
            "hyperbolic" => &["utilization", "period"],
            "curve" => &["file"],
            "polling-server" | "deferrable-server" | "sporadic-server" => &["budget", "period"],
            other => {
                return Err(ctx.err(
                    t.kind.as_ref().expect("kind given"),
                    format!(
                        "unknown task kind `{other}` (periodic, sporadic, hyperbolic, curve, polling-server, deferrable-server, sporadic-server)"
                    ),
                ))
            }
        };
        reject_fields_not_in(&ctx, t, kind, allowed)?;
        let positive = |v: &Spanned<toml::Value>, field: &str| -> Result<Nanos, InputError> {
            let ns = ctx.duration(v, field)?;
            if ns == 0 {
                return Err(ctx.err(v, format!("{field} must be longer than 0")));
            }
            Ok(ns)
        };
        let mut origin = Origin { table: Some(table_at.clone()), wcet: None, deadline: None };
        let model = match kind {
            "periodic" | "sporadic" => {
                let period_v = t.period.as_ref().ok_or_else(|| missing("period"))?;
                let wcet_v = t.wcet.as_ref().ok_or_else(|| missing("wcet"))?;
                let period_ns = positive(period_v, "period")?;
                let wcet_ns = positive(wcet_v, "wcet")?;
                if wcet_ns > period_ns {
                    return Err(ctx.err(
                        wcet_v,
                        format!(
                            "wcet ({}) is longer than the period ({}): the task needs more than the whole CPU",
                            crate::format_ns(wcet_ns),
                            crate::format_ns(period_ns)
                        ),
                    ));
                }
                let deadline_ns = match &t.deadline {
                    Some(d) => positive(d, "deadline")?,
                    None => period_ns,
                };
                origin.wcet = Some(ctx.at(wcet_v));
                origin.deadline = Some(t.deadline.as_ref().map_or_else(|| ctx.at(period_v), |d| ctx.at(d)));
                Model::Periodic(PeriodicTask { period_ns, wcet_ns, deadline_ns })
            }
            "hyperbolic" => {
                let u = t.utilization.as_ref().ok_or_else(|| missing("utilization"))?;
                if !u.get_ref().is_finite() || !(0.0..=1.0).contains(u.get_ref()) {
                    return Err(ctx.err(u, format!("utilization {} is outside [0, 1]", u.get_ref())));
                }
                let period_v = t.period.as_ref().ok_or_else(|| missing("period"))?;
                Model::Hyperbolic(Hyperbola { utilization: *u.get_ref(), period_ns: positive(period_v, "period")? })
            }
            "curve" => {
                let path = t.file.as_ref().ok_or_else(|| missing("file"))?;
                let (shown, text) = read_curve(path.get_ref())
                    .map_err(|why| ctx.err(path, format!("cannot read curve file `{}`: {why}", path.get_ref())))?;
                let curve = Curve::parse(&shown, &text)?;
                Model::Curve(DemandEnvelope::from_curve(&curve))
            }
            _ => {
                let budget_v = t.budget.as_ref().ok_or_else(|| missing("budget"))?;
                let period_v = t.period.as_ref().ok_or_else(|| missing("period"))?;
                let budget_ns = positive(budget_v, "budget")?;
                let period_ns = positive(period_v, "period")?;
                if budget_ns > period_ns {
                    return Err(ctx.err(budget_v, "budget is longer than the period"));
                }
                let server = Server { budget_ns, period_ns };
                match kind {
                    "polling-server" => Model::PollingServer(server),
                    "deferrable-server" => Model::DeferrableServer(server),
                    _ => Model::SporadicServer(server),
                }
            }
        };
        tasks.push(Task { name: name.get_ref().clone(), priority, model, origin });
    }
    // Stable: file order among equal priorities.
    tasks.sort_by_key(|t| t.priority);
    Ok(TaskSet { tasks })
}

fn reject_fields_not_in(ctx: &Ctx<'_>, t: &TaskSpec, kind: &str, allowed: &[&str]) -> Result<(), InputError> {
    let present: [(&str, Option<Location>); 6] = [
        ("period", t.period.as_ref().map(|v| ctx.at(v))),
        ("wcet", t.wcet.as_ref().map(|v| ctx.at(v))),
        ("deadline", t.deadline.as_ref().map(|v| ctx.at(v))),
        ("utilization", t.utilization.as_ref().map(|v| ctx.at(v))),
        ("budget", t.budget.as_ref().map(|v| ctx.at(v))),
        ("file", t.file.as_ref().map(|v| ctx.at(v))),
    ];
    for (field, at) in present {
        if let Some(at) = at {
            if !allowed.contains(&field) {
                return Err(InputError::at(
                    format!("field `{field}` does not apply to a task of kind `{kind}` (it takes {})", allowed.join(", ")),
                    at,
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> Result<TaskSet, InputError> {
        parse_task_set("t.toml", src, &mut |_| Err("no files in this test".to_string()))
    }

    fn err_at(src: &str) -> (String, String) {
        let e = parse(src).unwrap_err();
        (e.message.clone(), e.location.map(|l| l.to_string()).unwrap_or_default())
    }

    #[test]
    fn parses_every_kind_in_priority_order() {
        let curve = "window_ns,max_load\n1000,0.5\n";
        let src = r#"
[[task]]
name = "low"
period = "10ms"
wcet = "2ms"
deadline = "12ms"
priority = 5

[[task]]
name = "driver"
kind = "hyperbolic"
utilization = 0.5
period = "7.2ms"
priority = 1

[[task]]
name = "measured"
kind = "curve"
file = "c.csv"
priority = 2

[[task]]
name = "ds"
kind = "deferrable-server"
budget = "1ms"
period = "10ms"
priority = 3
"#;
        let set = parse_task_set("t.toml", src, &mut |p| Ok((p.to_string(), curve.to_string()))).unwrap();
        let names: Vec<_> = set.tasks.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["driver", "measured", "ds", "low"]);
        assert_eq!(
            set.tasks[3].model,
            Model::Periodic(PeriodicTask { period_ns: 10_000_000, wcet_ns: 2_000_000, deadline_ns: 12_000_000 })
        );
        assert_eq!(set.interferers_of(3).count(), 3);
    }

    #[test]
    fn bad_values_are_located() {
        let cases = [
            // missing field → the task's table
            ("[[task]]\nname = \"a\"\nperiod = \"10ms\"\n", "missing the field `wcet`", "t.toml:1:"),
            // unit-less duration (string and integer)
            ("[[task]]\nname = \"a\"\nperiod = \"10\"\nwcet = \"1ms\"\n", "no unit", "t.toml:3:10"),
            ("[[task]]\nname = \"a\"\nperiod = 10\nwcet = \"1ms\"\n", "no unit", "t.toml:3:10"),
            // negative
            ("[[task]]\nname = \"a\"\nperiod = \"10ms\"\nwcet = \"-1ms\"\n", "negative", "t.toml:4:8"),
            // wcet > period
            ("[[task]]\nname = \"a\"\nperiod = \"1ms\"\nwcet = \"2ms\"\n", "longer than the period", "t.toml:4:8"),
            // unknown kind
            ("[[task]]\nname = \"a\"\nkind = \"weird\"\n", "unknown task kind", "t.toml:3:8"),
            // duplicate name → second one, naming the first
            (
                "[[task]]\nname = \"a\"\nperiod = \"1ms\"\nwcet = \"1us\"\n[[task]]\nname = \"a\"\nperiod = \"1ms\"\nwcet = \"1us\"\n",
                "duplicate task name `a` (first used at t.toml:2:8)",
                "t.toml:6:8",
            ),
            // a typo in a field name (serde) is located too
            ("[[task]]\nname = \"a\"\nperiod = \"1ms\"\nwcet = \"1us\"\nwcte = 3\n", "unknown field", "t.toml:5:1"),
            // field of another kind
            ("[[task]]\nname = \"a\"\nperiod = \"1ms\"\nwcet = \"1us\"\nbudget = \"1us\"\n", "does not apply", "t.toml:5:10"),
            ("[[task]]\nname = \"a\"\nkind = \"hyperbolic\"\nutilization = 1.5\nperiod = \"1ms\"\n", "outside [0, 1]", "t.toml:4:15"),
        ];
        for (src, message, at) in cases {
            let (m, l) = err_at(src);
            assert!(m.contains(message), "{src:?}: message {m:?}");
            assert!(l.starts_with(at), "{src:?}: location {l:?}, expected {at}");
        }
    }

    #[test]
    fn unreadable_curve_points_at_the_file_value() {
        let src = "[[task]]\nname = \"c\"\nkind = \"curve\"\nfile = \"nope.csv\"\n";
        let (m, l) = err_at(src);
        assert!(m.contains("nope.csv"));
        assert_eq!(l, "t.toml:4:8");
    }

    #[test]
    fn priorities_are_all_or_none() {
        let src = "[[task]]\nname = \"a\"\nperiod = \"1ms\"\nwcet = \"1us\"\npriority = 1\n[[task]]\nname = \"b\"\nperiod = \"1ms\"\nwcet = \"1us\"\n";
        let (m, l) = err_at(src);
        assert!(m.contains("priority"));
        assert!(l.starts_with("t.toml:6:"), "{l}");
    }
}
