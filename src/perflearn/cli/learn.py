"""Learning commands: fit, evaluate, predict, recommend, rules, cluster.

Every command reads its runs either from the results store (``--experiment NAME``,
``--store FILE``) or from a CSV (``--csv FILE``, one row per run, knob columns +
metric columns).
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.table import Table

from perflearn.errors import UsageError

from . import terminal
from .app import DEFAULT_STORE, StoreOpt, app, check_output, check_png, one_file_each

if TYPE_CHECKING:
    import pandas as pd

    from perflearn.store import Dataset

# -- shared options -------------------------------------------------------------------------

CsvOpt = Annotated[Optional[Path], typer.Option("--csv", help="Read runs from this CSV (one row per run).")]
ExperimentOpt = Annotated[Optional[str], typer.Option("--experiment", "-e", help="Read runs of this stored experiment.")]
TargetOpt = Annotated[str, typer.Option("--target", "-t", help="Metric to model.")]
FeaturesOpt = Annotated[Optional[str], typer.Option("--features", "-f", help="Comma-separated features (default: all knobs and context).")]
MetricsOpt = Annotated[Optional[str], typer.Option("--metrics", "-m", help="CSV: comma-separated metric columns (default: the target and any constrained metric; quote a name that holds a comma, as in the CSV).")]
ContextColsOpt = Annotated[Optional[str], typer.Option("--context-cols", help="CSV: comma-separated context columns (situation, not choice).")]
WhereOpt = Annotated[Optional[str], typer.Option("--where", help="Keep only the rows where this holds: a pandas expression over the CSV's columns or the experiment's knobs, metrics and context (e.g. \"settled and policy == 'sweep'\").")]
PerSampleOpt = Annotated[bool, typer.Option("--per-sample", help="Experiment: one row per sample time of each run (e.g. every wire interval); sampled signals are metrics, or features when named in --context-cols.")]
FamilyOpt = Annotated[str, typer.Option("--family", help="cart, rf, gbm, svr, mlp, linear, bayes, knn, gp, or auto (chosen by CV).")]
FamiliesOpt = Annotated[Optional[str], typer.Option("--families", help="auto: choose only among these families, comma-separated (e.g. rf,gbm,gp; default: all).")]
SeedOpt = Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1, help="Random seed (0 to 2^32 - 1, as scikit-learn takes).")]
QuantileOpt = Annotated[Optional[float], typer.Option("--quantile", help="Model this quantile of the target instead of its middle (e.g. 0.9: nine values in ten at or under it): rf (a quantile regression forest) or gbm (pinball loss). Judged by coverage and pinball loss.")]
ParamOpt = Annotated[Optional[list[str]], typer.Option("--param", help="A hyperparameter of --family as NAME=VALUE, repeatable (e.g. n_estimators=200, max_depth=None, hidden_layer_sizes=32,32).")]
AnyCombinationOpt = Annotated[bool, typer.Option(
    "--any-combination", help="Search every combination of the knobs' values: no one-hot groups inferred from the "
    "runs, no design constraints of the stored spec.")]


def _split(value: str | list[str] | None, where: str | None = None) -> list[str] | None:
    """``value``'s comma-separated items; with ``where`` (the option), given but naming nothing
    or with an empty item is refused (``-f ''`` modelled every feature, ``-f a,,b`` read a,b)."""
    from perflearn.store.dataset import split_list

    return split_list(value, where)


SHOWN = 50  # predictions printed to the terminal; --out writes them all


def _say_left_out(runs: int, target: str, why: str = "", unit: str = "run") -> None:
    """Runs (or, per sample, samples) a model did not learn from, by cause, said by every
    command that fits one (recommend, rules and cluster said nothing of 10 failed runs,
    session 46's review)."""
    if runs:
        terminal.warn(f"{runs} {unit}(s) left out: {why}" if why else
                      f"{runs} {unit}(s) left out (failed, or NULL {target} or feature)")  # a model saved before causes


def _in(unit: str) -> str:
    """" (ms)" after a value in the target's unit, when the data gave one."""
    return f" ({unit})" if unit else ""


def _band_errors(cv: dict) -> str:
    """What a calibrated band rests on: "58 out-of-fold errors", or its runs' or configurations'
    for grouped rows (samples of runs, repeats of configurations)."""
    band = cv["band"]
    if band.get("rows"):
        return f"{band['n']} {cv.get('folds_by') or 'run'}s' ({band['rows']} rows') out-of-fold errors"
    return f"{band['n']} out-of-fold errors"


def _say_constant(schema) -> None:
    """Features that never varied: nothing can be learnt of them (a constant column got no word)."""
    const = schema.constant()
    if const:
        terminal.warn(f"{len(const)} feature(s) with one value in every run used: "
                      + ", ".join(f"{f}={v}" for f, v in const.items())
                      + "; the model cannot learn their effect (a prediction at another value is a guess)")


def _say_csv_columns(csv: Path | None, named: list[str] | None, ds: "Dataset") -> None:
    """On a CSV without -m every column but the target is a knob: said, once every check has passed (an
    error stays one line), so that a measured one left unnamed shows (recommend set lat_ms=0.1957 as a
    setting; evaluate learnt iops from p95, unsaid)."""
    if csv is None or named or not ds.knobs:
        return
    terminal.info(f"knobs: {', '.join(ds.knobs)} (every column of {csv.name} but the metrics "
                  f"({', '.join(ds.metrics)})" + (f" and context ({', '.join(ds.context)})" if ds.context else "")
                  + "); name a measured column with -m")


def _families(value: str | None) -> list[str] | None:
    """--families as a list; given but empty is an error, not "all"."""
    families = _split(value)
    if value is not None and not families:
        raise UsageError("no candidate family given (e.g. rf,gbm,gp)", where="--families")
    if value is not None and any(not name.strip() for name in value.split(",")):  # rf,,knn: read as rf,knn
        raise UsageError(f"an empty family name in {value!r} (e.g. rf,gbm,gp)", where="--families")
    # a family named twice was two candidates, averaged with itself at twice its weight
    return list(dict.fromkeys(families)) if families else families


def _same_file(output: Path, given: Path) -> bool:
    """Whether ``output`` names the file ``given`` (through a link, or ./ and ../, too); a file not
    there yet is no input to overwrite (its own error comes when it is read)."""
    return output.exists() and given.exists() and os.path.samefile(output, given)


def _refuse_overwriting_inputs(outputs: list[Path | None], where: str, inputs: dict[str, Path | None]) -> None:
    """Refuse, before any work, an output that is the same file as an input (``inputs``: what
    the file is, "the --csv file" -> its path). It was overwritten, unsaid: `predict m --points
    p.csv -o p.csv`, `cluster --csv c.csv -o c.csv` (session 57's audit)."""
    for output in outputs:
        for what, given in inputs.items():
            if output is not None and given is not None and _same_file(output, given):
                raise UsageError(f"{str(output)!r} is also {what}: writing it would overwrite it; give another file",
                                 where=where)


def _source_files(csv: Path | None, experiment: str | None, store: Path) -> dict[str, Path | None]:
    """The files a command reads its runs from: the CSV, or the store of a stored experiment."""
    return {"the --csv file": csv, "the --store file": store if experiment is not None else None}


EXPORTED = {"run_id", "point_id", "rep", "status"}  # the columns `perflearn export` writes before knobs and metrics


def load_dataset(
    csv: Path | None,
    experiment: str | None,
    store: Path,
    metrics: list[str],
    context_cols: list[str] | None = None,
    per_sample: bool = False,
    warmup: float = 0.0,
    rows: str | None = None,
    named: list[str] | None = None,
) -> "Dataset":
    """The runs to learn from: a CSV or a stored experiment (exactly one). With
    ``per_sample``, a stored experiment gives one row per run and sample time (its
    collectors' time series, e.g. every wire interval), and sampled signals named in
    ``context_cols`` are features rather than metrics. ``rows``: keep only the rows
    where this pandas expression holds (``--where``)."""
    from perflearn.store import Dataset
    from perflearn.store.dataset import no_column

    if csv is not None and experiment is not None:
        raise UsageError("give either --csv or --experiment, not both", where="arguments")
    if csv is None and experiment is None:
        raise UsageError("say where the runs are: --csv FILE or --experiment NAME [--store FILE]", where="arguments")
    if per_sample and csv is not None:
        raise UsageError("--per-sample reads the time series of a stored experiment; a CSV has one row per run "
                         "already", where="arguments")
    if csv is not None:
        head = _csv_columns(csv)
        missing = [m for m in metrics if m not in head]
        if missing:
            raise UsageError(no_column(missing[0], head), where=str(csv))
        # every other column of a CSV is a knob, kept in the frame: --where sees them all
        dataset = Dataset.from_csv(csv, metrics=metrics, context=context_cols)
        for note in dataset.notes:
            terminal.warn(note)
        if EXPORTED <= set(head) and len(metrics) == 1:  # its other metrics would be features, the target's kin
            terminal.warn(f"{csv.name} has the columns of `perflearn export`: every column but {metrics[0]} is taken "
                          f"as a knob ({', '.join(dataset.knobs)}); name its other metrics with -m, or read the "
                          "experiment from its store with -e")
        return _keep_rows(dataset, rows)
    try:
        from perflearn.store import open_store  # type: ignore[attr-defined]
    except ImportError:
        raise UsageError("the results store is not available in this build; use --csv", where=str(store)) from None
    if not Path(store).exists():
        raise UsageError("no such store (run an experiment first, or pass --store)", where=str(store))
    with open_store(store) as s:
        ds = s.dataset(experiment)
        if not per_sample:  # its sampled signals are known only below
            _check_named_metrics(ds, experiment, named or [])
        if per_sample:
            sampled = s.samples(experiment)
            names = set(sampled["metric"])
            ds = ds.per_sample(sampled, [c for c in context_cols or [] if c in names], warmup)
            context_cols = [c for c in context_cols or [] if c not in names]
            missing = [m for m in metrics if m not in ds.metrics and m not in ds.context]
            if missing:
                raise UsageError(f"no sampled signal {missing[0]!r} (sampled: {', '.join(sorted(names))})",
                                 where="--per-sample")
    if context_cols:
        for c in context_cols:
            if c in metrics:
                raise UsageError(f"{c!r} is modelled (a target or a constraint): it cannot also be a feature",
                                 where="--context-cols")
            if c in ds.metrics:  # a counter measured in each run (NiMC's features): measured, not chosen
                ds.metrics = [m for m in ds.metrics if m != c]
                ds.kinds[c] = "numeric"
            elif c not in ds.knobs and c not in ds.context:
                raise UsageError(f"no feature {c!r} (features: {', '.join(ds.features)}; metrics: "
                                 f"{', '.join(ds.metrics) or 'none'})", where="--context-cols")
        ds.knobs = [k for k in ds.knobs if k not in context_cols]
        ds.context = [*ds.context, *[c for c in context_cols if c not in ds.context]]
    return _keep_rows(ds, rows)


def _check_named_metrics(ds: "Dataset", experiment: str, named: list[str]) -> None:
    """-m over a stored experiment, which knows its metrics: a name that is none of them is
    refused, one line. An unknown one was ignored, unsaid, before session 52; a knob or context
    column until session 57's audit (`rules -e sweep1 -t p95 -m rate`, rate a knob: the rules
    were of rate all the same), where over a CSV -m makes a column a metric."""
    for name in named:
        if name in ds.metrics:
            continue
        what = "a knob" if name in ds.knobs else "a context column" if name in ds.context else None
        metrics = ", ".join(ds.metrics) or "none"
        if what is None:
            raise UsageError(f"experiment {experiment!r} has no metric {name!r} (metrics: {metrics})",
                             where="--metrics")
        raise UsageError(f"{name!r} is {what} of experiment {experiment!r}, not a metric (metrics: {metrics})",
                         where="--metrics")


def _keep_rows(ds: "Dataset", expression: str | None) -> "Dataset":
    """``ds`` with only the rows where ``expression`` holds (all of them for None); a bad
    expression, or one no row meets, is one line naming it."""
    if expression is None:
        return ds
    frame = ds.frame
    try:
        # eval, not query: query takes values that are not true/false as row labels (a 0/1 column
        # "settled" kept rows 0 and 1, twelve times each)
        held = frame.eval(expression, engine="python")
    except Exception as exc:  # pandas raises what the expression's evaluation raises
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"cannot keep the rows where {expression!r}: {why}", where="--where") from None
    kept = frame[_row_mask(held, frame, expression)]
    if kept.empty:
        raise UsageError(f"no row of {len(frame)} has {expression!r}", where="--where")
    terminal.info(f"--where: {len(kept)} of {len(frame)} rows")
    ds.frame = kept.reset_index(drop=True)
    return ds


def _row_mask(held, frame, expression: str):
    """Whether each row of ``frame`` is kept: ``held``, what ``expression`` gave, must be true or
    false (or missing: not kept) for each row, or one truth for all of them."""
    import numpy as np
    import pandas as pd

    if isinstance(held, (bool, np.bool_)):
        return pd.Series(bool(held), index=frame.index)
    if isinstance(held, pd.Series) and held.index.equals(frame.index):
        given = held.dropna()
        if held.dtype == bool or str(held.dtype) == "boolean" or \
                given.map(lambda v: isinstance(v, (bool, np.bool_))).all():
            return held.fillna(False).astype(bool)
        if pd.api.types.is_numeric_dtype(held) and given.isin([0, 1]).all():  # a flag stored as 0/1: a store's
            return held == 1  # samples are numbers (settled read 0.0 and the hint, "settled == 0.0", kept the unsettled)
        first = given.iloc[0].item() if len(given) and hasattr(given.iloc[0], "item") else \
            given.iloc[0] if len(given) else None
        what, example = (f"values such as {first!r}", f"{expression} == {first!r}") if first is not None else \
            ("no value", f"{expression} == 1")
    else:
        what, example = type(held).__name__, f"{expression} == 1"
    raise UsageError(f"{expression!r} is not true or false for each row (it gives {what}): compare it, "
                     f"e.g. {example!r}", where="--where")


def _csv_columns(path: Path) -> list[str]:
    from perflearn.store.dataset import csv_errors, csv_header

    with csv_errors(path):
        return csv_header(path)  # a column named twice is refused: pandas would read the second "a" as "a.1"


def _fmt(v, digits: int = 4) -> str:
    import numpy as np

    if v is None:
        return "-"
    if isinstance(v, (float, np.floating)):
        if not np.isfinite(v):
            return "nan"
        return f"{v:.{digits}g}"
    return str(v)


def _frame_table(df: "pd.DataFrame", title: str | None = None, exact: tuple | list = ()) -> Table:
    """A table of ``df``, numbers to 4 significant digits but the ``exact`` columns (knob
    settings: 65536 is to be copied as 65536, not 6.554e+04)."""
    import pandas as pd

    table = Table(title=title, title_justify="left")
    for c in df.columns:
        table.add_column(str(c), justify="right" if pd.api.types.is_numeric_dtype(df[c]) else "left")
    for row in df.itertuples(index=False):
        table.add_row(*[_fmt(v, 12 if c in exact else 4) for c, v in zip(df.columns, row)])
    return table


# why a split has no value of a metric
_undefined = {"r2": "their held-out target is one value", "mre": "their held-out target is 0 in every run",
              "rmse": "no held-out prediction"}


def _undefined_in_splits(label: str, metric: str, defined: int, splits: int) -> str:
    """Why a metric's mean over the splits leaves some out, or is n/a: undefined in every split
    (R² of one held-out run each, -k N over N runs) showed n/a without a word, where undefined in
    some was said (session 57's audit)."""
    if not defined:
        return (f"{label} is undefined in every one of the {splits} splits ({_undefined[metric]}): its mean and std "
                "are n/a; the pooled column is over every held-out prediction at once")
    return (f"{label} is undefined in {splits - defined} of the {splits} splits ({_undefined[metric]}): its mean "
            f"and std are over the other {defined}")


def _log_opt(value: str) -> bool | str:
    v = value.lower()
    if v in ("auto",):
        return "auto"
    if v in ("yes", "true", "on", "1"):
        return True
    if v in ("no", "false", "off", "0"):
        return False
    raise UsageError(f"must be auto, yes or no, got {value!r}", where="--log-target")


def _pairs(items: list[str] | None, where: str) -> dict[str, object]:
    out: dict[str, object] = {}
    for part in _split(items, where) or []:  # an item holding a comma is quoted whole: '"b=u,v"'
        if "=" not in part:
            quoted = "; an item that holds a comma is quoted whole: '\"b=u,v\"'" if any("," in item for item in items or []) else ""
            raise UsageError(f"{part!r} is not NAME=VALUE{quoted}", where=where)
        k, v = part.split("=", 1)
        k, value = k.strip(), _value(v.strip())
        if k in out:  # the last one would win silently
            raise UsageError(f"{k!r} is given twice ({k}={out[k]}, {k}={v.strip()})", where=where)
        if isinstance(value, float) and not math.isfinite(value):  # nan/inf would predict as a missing value
            raise UsageError(f"{k} needs a finite number, got {v.strip()}", where=where)
        out[k] = value
    return out


def _hyper(items: list[str] | None) -> dict[str, object]:
    """--param NAME=VALUE items: VALUE a Python literal (4, 0.5, None, True, 32,32) or else a string."""
    import ast

    out: dict[str, object] = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        if not sep or not name.strip() or not text.strip():
            raise UsageError(f"{item!r} is not NAME=VALUE", where="--param")
        try:
            out[name.strip()] = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            out[name.strip()] = text.strip()
    return out


def _with_quantile(params: dict[str, object], quantile: float | None, family: str) -> dict[str, object]:
    """--param items plus --quantile, checked here so that its errors name --quantile."""
    from perflearn.learn.models import quantile_of

    if quantile is None:
        if family == "gbm" and params.get("loss") == "quantile":  # else judged and banded as a middle model
            raise UsageError("loss=quantile: give --quantile Q instead (a quantile model is judged by its own loss)",
                             where="--param")
        return params
    # what --quantile sets: the user's own value was replaced without a word (model.json still showed it)
    clash = [k for k in ("quantile", "loss", "alpha", "default_quantiles") if k in params]
    if clash:
        raise UsageError(f"{clash[0]}={params[clash[0]]} and --quantile both set the loss; give --quantile alone",
                         where="--param")
    if family == "auto":
        raise UsageError("needs --family rf or gbm (auto chooses by relative error, not by a quantile's loss)",
                         where="--quantile")
    try:
        return {**params, "quantile": quantile_of(family, quantile)}
    except ValueError as exc:
        raise UsageError(str(exc).removeprefix("quantile: "), where="--quantile") from None


def _value(v: str):
    from perflearn.learn.features import given_value  # decide's API reads its context the same way

    return given_value(v)


# -- fit ---------------------------------------------------------------------------------------


@app.command()
def fit(
    target: TargetOpt,
    out: Annotated[Path, typer.Option("--out", "-o", help="Model directory to write.")] = Path("perflearn.model"),
    csv: CsvOpt = None,
    experiment: ExperimentOpt = None,
    store: StoreOpt = DEFAULT_STORE,
    features: FeaturesOpt = None,
    metrics: MetricsOpt = None,
    context_cols: ContextColsOpt = None,
    family: FamilyOpt = "auto",
    families: FamiliesOpt = None,
    log_target: Annotated[str, typer.Option("--log-target", help="auto, yes or no.")] = "auto",
    cv: Annotated[Optional[int], typer.Option("--cv", help="Cross-validation folds (default 5, or one per run, or "
                                              "configuration when repeated, if fewer).")] = None,
    ensemble: Annotated[Optional[int], typer.Option("--ensemble", help="auto: average a greedy ensemble of this many picks (1 = best single; default: perflearn's choice).")] = None,
    point: Annotated[str, typer.Option("--point", help="auto: the point predicted. median: exp(mean of log y); relative: the point minimising the expected relative error (below the median when unsure); auto: relative on small data, else median.")] = "auto",
    weights: Annotated[str, typer.Option("--weights", help="auto: how candidates are combined. near-ties: equal average of those within 20% of the best CV error (geometric when scored by relative error); inverse: every candidate, weighted by 1/CV error^2; auto: inverse on small data, else near-ties.")] = "auto",
    per_sample: PerSampleOpt = False,
    warmup: Annotated[float, typer.Option("--warmup", help="--per-sample: leave out samples of each run's first SECONDS (e.g. a preload).")] = 0.0,
    where: WhereOpt = None,
    param: ParamOpt = None,
    quantile: QuantileOpt = None,
    seed: SeedOpt = 0,
) -> None:
    """Fit a performance model of TARGET and save it as a directory."""
    from perflearn.learn.model import Model, fit as fit_model

    check_output(out, "--out", directory=True)
    Model.check_destination(out)
    _refuse_overwriting_inputs([out / name for name in Model.FILES], "--out", _source_files(csv, experiment, store))
    if warmup and not per_sample:
        raise UsageError("--warmup applies to samples: add --per-sample", where="arguments")
    params, candidates = _with_quantile(_hyper(param), quantile, family), _families(families)
    if family != "auto":  # auto's own: taken and ignored with one family (session 46's review)
        given = [o for o, v in (("--ensemble", ensemble is not None), ("--point", point != "auto"),
                                ("--weights", weights != "auto")) if v]
        if given:
            raise UsageError(f"applies to auto's choice; --family {family} is one family already",
                             where=given[0])
    mets, ctx = _split(metrics, "--metrics"), _split(context_cols, "--context-cols")
    ds = load_dataset(csv, experiment, store, mets or [target], ctx, per_sample, warmup,
                      where, named=mets)
    if per_sample:
        terminal.info(f"{len(ds.frame)} samples of {ds.frame['run_id'].nunique()} runs; cross-validation folds keep "
                      "each run's samples together (each configuration's runs, where one was repeated)")
    model = fit_model(ds, target, _split(features, "--features"), family, params=params, log_target=_log_opt(log_target),
                      cv=cv, random_state=seed, families=candidates, ensemble=ensemble, point=point,
                      weights=weights)
    model.save(out)
    if model.n_excluded:
        _say_left_out(model.n_excluded, target, model.excluded_why, "sample" if per_sample else "run")
    _say_constant(model.schema)
    wide = model.cv.get("left_out")
    if wide:  # see learn.models.AUTO_MAX_WIDTH
        terminal.info(f"auto did not try {', '.join(wide['candidates'])}: the model input is {wide['width']} columns "
                      f"wide (one per numeric feature and category), above {wide['max_width']}, where their cost "
                      "grows faster than the width; ask for one with --family")
    _print_model(model, out, int(ds.frame["run_id"].nunique()) if per_sample else 0)


def _print_model(model, out: Path, per_sample_runs: int = 0) -> None:
    table = Table(title=f"model of {model.target}", title_justify="left", show_header=False)
    table.add_column("key")
    table.add_column("value")
    params = ", ".join(f"{k}={v}" for k, v in model.params.items()) or "defaults"
    if len(model.cv.get("members") or []) > 1:  # the best member's alone read as the ensemble's
        params = "each member's, in its name above"
    table.add_row("family", model.chosen)
    table.add_row("parameters", params)
    if model.cv.get("point") == "relative":
        table.add_row("point", "relative: minimises the expected relative error (below the median when unsure)")
    if model.cv.get("raw_set_aside"):
        table.add_row("raw target", "set aside: none beat the best log-target candidate by 2 standard errors")
    if model.cv.get("bounds"):
        lo, hi = model.cv["bounds"]
        table.add_row("kept within", f"{_fmt(lo)} .. {_fmt(hi)} (the training range widened by its width, log scale)")
    table.add_row("features", ", ".join(model.features))
    if per_sample_runs:  # a row is a sample: 46 "runs" were 6 runs' samples (session 46's review)
        table.add_row("samples used", f"{model.n_train} of {per_sample_runs} runs ({model.n_excluded} samples left out)")
    else:
        table.add_row("runs used", f"{model.n_train} ({model.n_excluded} left out)")
    cv = model.cv
    by_run = f", folds by {cv['folds_by']} ({cv.get('units', cv.get('runs'))} {cv['folds_by']}s)" if cv.get("folds_by") else ""
    if model.quantile is not None:  # a quantile is judged by how often values fall under it
        table.add_row("predicts", f"the {model.quantile:g} quantile of {model.target}")
        table.add_row(f"{cv.get('folds', '?')}-fold CV{by_run}",
                      f"coverage {_fmt(cv.get('coverage'))} (goal {model.quantile:g})  pinball {_fmt(cv.get('pinball'))}")
    else:
        table.add_row(f"{cv.get('folds', '?')}-fold CV{by_run}",
                      f"MRE {_fmt(cv.get('mre'))}%  R² {_fmt(cv.get('r2'))}  RMSE {_fmt(cv.get('rmse'))}"
                      + _in(model.schema.unit))
    if model.cv.get("candidates"):  # auto: its choice was scored on these very folds (9 runs: 2.4 % here, 15 % on the rest)
        table.add_row("", "optimistic: auto chose on these folds; `perflearn evaluate` refits the choice in each split")
    band = cv.get("band")
    if band:  # what predict's lo/hi span at least (learn.uncertainty.band_calibration)
        if band["scale"] == "log":
            width = f"x{math.exp(band['lo']):.3g} .. x{math.exp(band['hi']):.3g} of the prediction"
        else:
            width = f"{band['lo']:+.4g} .. {band['hi']:+.4g} around the prediction"
        table.add_row("90 % band", f"at least {width} (from {_band_errors(cv)})")
    if "oob" in cv:
        table.add_row("out-of-bag", f"R² {_fmt(cv['oob']['r2'])}  MRE {_fmt(cv['oob']['mre'])}%")
    imp = cv.get("importance") or {}
    if imp:
        table.add_row("importance", ", ".join(f"{k} {v:.2f}" for k, v in list(imp.items())[:8]))
    table.add_row("saved", str(out))
    terminal.out.print(table)
    cands = cv.get("candidates")
    if cands:
        ranked = sorted(cands, key=lambda c: c["score"])[:5]
        t = Table(title=f"auto: top candidates, CV {cv.get('selected_by', 'score')}", title_justify="left")
        t.add_column("candidate")
        t.add_column(str(cv.get("selected_by", "score")).upper(), justify="right")
        aside = cv.get("raw_set_aside")  # a raw-target candidate ranked first but not chosen: say why
        for c in ranked:
            raw = aside and not c["candidate"].endswith(" log")
            t.add_row(c["candidate"] + (" (raw target: set aside)" if raw else ""), _fmt(c["score"]))
        terminal.out.print(t)


# -- evaluate ---------------------------------------------------------------------------------


@app.command()
def evaluate(
    target: TargetOpt,
    csv: CsvOpt = None,
    experiment: ExperimentOpt = None,
    store: StoreOpt = DEFAULT_STORE,
    features: FeaturesOpt = None,
    metrics: MetricsOpt = None,
    context_cols: ContextColsOpt = None,
    family: FamilyOpt = "auto",
    families: FamiliesOpt = None,
    log_target: Annotated[str, typer.Option("--log-target", help="auto, yes or no.")] = "auto",
    scheme: Annotated[str, typer.Option("--scheme", help="kfold or random (repeated random splits).")] = "kfold",
    folds: Annotated[Optional[int], typer.Option("--folds", "-k", help="k of k-fold (default 5).")] = None,
    repeats: Annotated[int, typer.Option("--repeats", help="Repetitions of k-fold, or number of random splits.")] = 1,
    test_size: Annotated[Optional[float], typer.Option("--test-size", help="Random splits: test fraction (default 0.25).")] = None,
    curve: Annotated[str, typer.Option("--curve", help="Learning curve: none, inverse-kfold (Kunkel) or fraction.")] = "none",
    figures: Annotated[Optional[Path], typer.Option("--figures", help="Write PNG figures and an HTML page here.")] = None,
    per_sample: PerSampleOpt = False,
    warmup: Annotated[float, typer.Option("--warmup", help="--per-sample: leave out samples of each run's first SECONDS (e.g. a preload).")] = 0.0,
    where: WhereOpt = None,
    param: ParamOpt = None,
    quantile: QuantileOpt = None,
    seed: SeedOpt = 0,
) -> None:
    """Cross-validate a model family on the runs: MRE (PAAE), MAPE, RMSE, R², OOB, learning curve.

    With --per-sample the folds, test sets and learning-curve sizes are whole runs."""
    import pandas as pd

    from perflearn.learn import evaluate as ev
    from perflearn.learn.models import resolve_log_target
    from perflearn.learn.features import training_data
    from perflearn.learn.metrics import all_metrics

    check_output(figures, "--figures", directory=True)
    figure_files = _figure_files(curve)
    if figures is not None:
        _refuse_overwriting_inputs([figures / name for name in figure_files], "--figures",
                                   _source_files(csv, experiment, store))
    replaced = _replaced_in_a_folder_of_others(figures, figure_files)
    terminal.warned.clear()  # the page says the warnings of this evaluation
    if warmup and not per_sample:
        raise UsageError("--warmup applies to samples: add --per-sample", where="arguments")
    if curve not in ("none", "inverse-kfold", "fraction"):  # before any work (it failed after the CV table)
        raise UsageError(f"must be none, inverse-kfold or fraction, got {curve!r}", where="--curve")
    if scheme == "kfold" and test_size is not None:  # a k-fold's test part is one fold: it was ignored, unsaid
        raise UsageError("applies to --scheme random; a k-fold's test part is one fold of -k", where="--test-size")
    if scheme == "random" and folds is not None:  # ignored, unsaid, where --test-size under kfold was refused
        raise UsageError("applies to --scheme kfold; a random split's test part is --test-size", where="--folds")
    test_size = 0.25 if test_size is None else test_size
    folds = 5 if folds is None else folds
    params, candidates = _with_quantile(_hyper(param), quantile, family), _families(families)
    mets, ctx = _split(metrics, "--metrics"), _split(context_cols, "--context-cols")
    ds = load_dataset(csv, experiment, store, mets or [target], ctx, per_sample, warmup,
                      where, named=mets)
    data = training_data(ds, target, _split(features, "--features"))
    lt = _log_opt(log_target)
    started = time.monotonic()

    def progress(done: int, total: int, chosen: str) -> None:  # each split refits the whole procedure: minutes with auto
        if time.monotonic() - started >= 5:  # a quick evaluation needs no news
            terminal.info(f"split {done}/{total} done ({chosen}), {time.monotonic() - started:.0f} s")

    res = ev.evaluate(data, family, scheme=scheme, folds=folds, repeats=repeats, test_size=test_size,
                      params=params, log_target=lt, random_state=seed, families=candidates, progress=progress,
                      where=ds.where)
    lc = None  # the curve before any output: too few runs for it fails before the table, not after

    def curve_progress(done: int, total: int, size: str) -> None:  # with auto, a size is many fits: minutes
        if time.monotonic() - started >= 5:
            terminal.info(f"learning curve: {size} done ({done} of {total} sizes), {time.monotonic() - started:.0f} s")

    if curve == "inverse-kfold":
        lc = ev.learning_curve(data, family, params=params, log_target=lt, random_state=seed, families=candidates,
                               progress=curve_progress)
    elif curve == "fraction":
        lc = ev.learning_curve(data, family, fractions=[0.1, 0.2, 0.3, 0.5, 0.7, 0.9], repeats=max(3, repeats),
                               params=params, log_target=lt, random_state=seed, families=candidates,
                               progress=curve_progress)
    _say_csv_columns(csv, mets, ds)  # after every check: an error stays one line
    if data.excluded:
        _say_left_out(data.excluded, target, data.excluded_why, "sample" if per_sample else "run")
    _say_constant(data.schema)
    zeros = int((data.y == 0).sum())
    if zeros:  # MAPE divides by every target (it printed 1e17 %), MRE skips y = 0
        terminal.warn(f"{zeros} run(s) have {target} = 0: MAPE is undefined (n/a), MRE leaves them out")
    summ = res.summary()
    on = f"{len(data.y)} {'samples' if per_sample else 'runs'}" + (f" of {res.n_runs} {res.unit}s" if res.grouped else "")
    # as fit says it: an MRE of the log target's model is not comparable with the raw one's (auto: chosen per split)
    logged = lt is True or (family != "auto" and resolve_log_target(lt, data.y, ds.where, family) is True)
    title = (f"{family}{' (log target)' if logged else ''} on {on} of {target}: "
             + (f"{folds}-fold x{repeats}" if scheme == "kfold" else f"{repeats} random splits, test {test_size:g}")
             + (f", folds by {res.unit}" if res.grouped else ""))
    once = "the first repeat's held-out predictions at once (every run once)" if scheme == "kfold" and repeats > 1 \
        else "every held-out prediction at once"  # the repeats' would count each run that many times
    t = Table(title=title, title_justify="left", caption=f"mean ± std over the splits; pooled: over {once} (as `fit` "
              "reports its CV)", caption_justify="left")
    for c in ("metric", "mean", "std", "pooled"):
        t.add_column(c, justify="right" if c != "metric" else "left")
    shown: list[tuple[str, ...]] = []  # the table's rows, for evaluate.html too
    pooled = all_metrics(res.y_true, res.y_pred, quantile)
    for m, label in (("mre", "MRE % (PAAE)"), ("mape", "MAPE %"), ("rmse", "RMSE" + _in(data.schema.unit)), ("r2", "R²")):
        # undefined is n/a, not "nan": MAPE of a zero target, R² of a test set with one value, the std of one split
        defined = int(res.splits[m].notna().sum())
        if m != "mape" and defined < len(res.splits):
            terminal.warn(_undefined_in_splits(label, m, defined, len(res.splits)))
            label += f" ({defined} of {len(res.splits)} splits)"
        shown.append((label, *("n/a" if not math.isfinite(v) else _fmt(v)
                                for v in (summ[m]["mean"], summ[m]["std"], pooled[m]))))
    if quantile is not None:
        shown.append((f"coverage (goal {quantile:g})", _fmt(summ["coverage"]["mean"]), _fmt(summ["coverage"]["std"]),
                      _fmt(pooled["coverage"])))
        shown.append(("pinball loss", _fmt(summ["pinball"]["mean"]), _fmt(summ["pinball"]["std"]), _fmt(pooled["pinball"])))
    if res.oob:
        shown.append(("OOB R²", "", "", _fmt(res.oob["r2"])))
        shown.append(("OOB MRE %", "", "", _fmt(res.oob["mre"])))
    for row in shown:
        t.add_row(*row)
    terminal.out.print(t)
    said = []  # the lines after the table, for evaluate.html too
    if res.chosen:
        counts = pd.Series(res.chosen).value_counts()
        said.append("auto chose per split: " + ", ".join(f"{k} ×{v}" for k, v in counts.items()))
        terminal.out.print(said[-1])
    lc_title = None
    if lc is not None:
        lc_title = ("learning curve (MRE % on the held-out runs"
                    + (f"; folds by {res.unit}, n_train counts rows)" if res.grouped else ")"))
        terminal.out.print(_frame_table(lc[["mode", "size", "n_train", "mre_mean", "mre_std", "r2_mean"]], title=lc_title))
        top = int(lc["size"].max())
        if curve == "inverse-kfold" and top < 10:  # the curve stopped early, unsaid (docs: k = 2..10)
            ks = "k = 10" if top == 9 else f"k = {top + 1}..10"  # "k = 10..10" (session 57's audit)
            said.append(f"{ks} left out: a fold would hold fewer than 3 {res.unit + 's' if res.grouped else 'runs'}")
            terminal.out.print(said[-1])
    if figures is not None:
        figures.mkdir(parents=True, exist_ok=True)
        images = [ev.plot_pred_vs_actual(res.y_true, res.y_pred, figures / "pred_vs_actual.png",
                                         f"{target}: {family}, out of sample"),
                  ev.plot_residuals(res.y_true, res.y_pred, figures / "residuals.png", f"{target}: residuals")]
        if lc is not None:
            images.append(ev.plot_learning_curve(lc, figures / "learning_curve.png", f"{target}: learning curve ({curve})"))
        # the page says what the terminal said: the table with its title, caption and pooled column, the choices,
        # the learning curve (it showed the per-split summary alone, without pooled figures or split counts)
        import html

        # and its warnings (runs left out, MAPE undefined: the page showed "n/a" without the reason)
        tables = [*(f"<p>warning: {html.escape(w)}</p>" for w in terminal.warned),
                  f"<p>{html.escape(title)}</p>",
                  pd.DataFrame(shown, columns=["metric", "mean", "std", "pooled"]).to_html(index=False),
                  f"<p>{html.escape(t.caption)}</p>", *(f"<p>{html.escape(line)}</p>" for line in said)]
        if lc is not None:
            tables += [f"<p>{html.escape(lc_title)}</p>",
                       lc[["mode", "size", "n_train", "mre_mean", "mre_std", "r2_mean"]].to_html(
                           index=False, float_format=lambda v: f"{v:.4g}", na_rep="n/a")]
        ev.html_page(f"evaluation of {family} for {target}", images, tables, figures / "evaluate.html")
        # which split predicted each value, and which run it is (random splits test a run more than once):
        # row counts the runs used, run_id names the run (a CSV's data row, from 1; a store's run)
        pd.DataFrame({"split": res.split_of, "row": res.row_of, "run_id": data.rows["run_id"].to_numpy()[res.row_of],
                      "actual": res.y_true, "predicted": res.y_pred}).to_csv(figures / "predictions.csv", index=False)
        written = [Path(i).name for i in images] + ["evaluate.html", "predictions.csv"]
        terminal.info(f"figures written to {figures}/ ({', '.join(written)})")
        if replaced:  # a folder of the user's own files: what was there under these names is gone, said
            terminal.warn(f"replaced in {figures}/, a folder of other files: {', '.join(replaced)} (give a new or "
                          "empty folder to keep such files)")


def _figure_files(curve: str) -> list[str]:
    """The files evaluate --figures writes."""
    return ["pred_vs_actual.png", "residuals.png", *(["learning_curve.png"] if curve != "none" else []),
            "evaluate.html", "predictions.csv"]


def _replaced_in_a_folder_of_others(folder: Path | None, files: list[str]) -> list[str]:
    """Of ``files``, those that already lie in ``folder`` when it also holds files of other names:
    they may be the user's own, and are replaced (a folder of a past evaluation's files alone is
    that evaluation, replaced as fit -o replaces a model). Session 57's audit: evaluate replaced a
    predictions.csv among other files, unsaid. Not refused as fit -o refuses such a folder: a
    model is one directory that loads as a whole, figures are files to be put beside others
    (``--figures .``)."""
    if folder is None or not folder.is_dir():
        return []
    there = {p.name for p in folder.iterdir()}
    every_own = set(_figure_files("inverse-kfold"))
    if there <= every_own:
        return []
    return [name for name in files if name in there]


# -- predict ----------------------------------------------------------------------------------


@app.command()
def predict(
    model_dir: Annotated[Path, typer.Argument(help="Model directory written by `perflearn fit`.")],
    points: Annotated[Optional[Path], typer.Option("--points", "-p", help="CSV of points (one per row, feature columns).")] = None,
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="One point as NAME=VALUE (repeatable, or comma-separated; a name that holds a comma is quoted: '\"a,b\"=1').")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write predictions as CSV here.")] = None,
) -> None:
    """Predict the model's target, with an uncertainty band, for given points."""
    import pandas as pd

    from perflearn.learn.model import Model, load
    from perflearn.learn.uncertainty import few_units

    check_output(out, "--out")
    _refuse_overwriting_inputs([out], "--out", {"the --points file": points,
                                                **{f"the model's {name}": model_dir / name for name in Model.FILES}})
    model = load(model_dir)
    if points is not None and set_:
        raise UsageError("give either --points or --set, not both", where="arguments")
    if points is not None:
        _csv_columns(points)
        from perflearn.store.dataset import read_csv_runs

        frame = read_csv_runs(points)
        where = str(points)
    elif set_:
        point = _pairs(set_, "--set")
        unknown = [k for k in point if k not in model.features]
        if unknown and all(f in point for f in model.features):  # else "missing ..." says more
            # a misspelt or extra knob would be ignored (a points file may carry extra columns, --set not)
            from perflearn.store.dataset import name_hint, listed

            raise UsageError(f"unknown feature {unknown[0]!r} (the model's features: {listed(model.features)})"
                             f"{name_hint(unknown[0], model.features)}", where="--set")
        frame = pd.DataFrame([point])
        where = "--set"
    else:
        raise UsageError("give points: --points FILE.csv or --set NAME=VALUE ...", where="arguments")
    dist = model.predict_dist(frame, where=where)
    for note in model.schema.outside(frame):
        terminal.warn(note)
    measured = [frame[model.target].rename(f"{model.target}_measured")] if model.target in frame else []
    # an exported run's identity (run_id, point_id, rep) kept first, so a prediction joins back to its
    # run; a knob of that name is the model's, shown once among the features
    ids = [c for c in ("run_id", "point_id", "rep") if c in frame and c not in model.features]
    # the points' own measurement beside the prediction (it was dropped); one concat, not an insert on a wide frame
    result = pd.concat([part.reset_index(drop=True) for part in (frame[ids], frame[model.features], *measured, dist)],
                       axis=1)
    result.columns = _unique([*ids, *model.features, *(m.name for m in measured)],
                             [model.target if c == "pred" else c for c in dist.columns])
    if out is not None:
        result.to_csv(out, index=False)
        terminal.info(f"{len(result)} prediction(s) written to {out}")
    else:
        what = f"the {model.quantile:g} quantile of {model.target}" if model.quantile is not None else model.target
        what += _in(model.schema.unit)
        band = "5 % and 95 % of the values" if model.quantile is not None and model.family == "rf" else "90 % band"
        calibration = model.cv.get("band")
        if calibration:
            band += f", at least the spread of its {_band_errors(model.cv)}"
            few = few_units(model.quantile)
            if calibration["n"] < few:
                terminal.warn(f"the band rests on {_band_errors(model.cv)}: with fewer than "
                              f"{few} it spans the largest, and can still hold far fewer than 90 % of new "
                              "values (docs/learn.md, predict)")
        elif "band" in model.cv:
            band += " (the family's own spread: too few out-of-fold errors to calibrate it)"
        else:
            band += " (the family's own spread: a model saved before bands were calibrated; refit it)"
        members = model.cv.get("members") or []
        by = f"an ensemble of {len(members)}" if len(members) > 1 else model.family
        terminal.out.print(_frame_table(result.head(SHOWN), title=f"{what} predicted by {by} (lo/hi: {band})"))
        if len(result) > SHOWN:  # 20 000 rows took 29 s to print
            terminal.info(f"the first {SHOWN} of {len(result)} predictions; all of them: --out FILE.csv")


# -- recommend --------------------------------------------------------------------------------


@app.command()
def recommend(
    target: TargetOpt,
    csv: CsvOpt = None,
    experiment: ExperimentOpt = None,
    store: StoreOpt = DEFAULT_STORE,
    maximize: Annotated[bool, typer.Option("--maximize/--minimize", help="Maximise (throughput) or minimise (time, latency) the target.")] = False,
    context: Annotated[Optional[list[str]], typer.Option("--context", "-c", help="Fix features: NAME=VALUE (repeatable).")] = None,
    where_: Annotated[Optional[list[str]], typer.Option("--where", "-w", help="Constraint METRIC<=VALUE (or >=, <, >), repeatable.")] = None,
    features: FeaturesOpt = None,
    metrics: MetricsOpt = None,
    context_cols: ContextColsOpt = None,
    family: Annotated[str, typer.Option("--family", help="Model family for the metrics (or auto).")] = "rf",
    model_dir: Annotated[Optional[Path], typer.Option("--model", help="Use this fitted model for the target instead of fitting one.")] = None,
    table: Annotated[bool, typer.Option("--table/--no-table", help="Also print Kunkel's table: learned vs best default vs best, per context.")] = False,
    top: Annotated[int, typer.Option("--top", help="Show this many best points.")] = 5,
    any_combination: AnyCombinationOpt = False,
    seed: SeedOpt = 0,
) -> None:
    """Recommend the best settings for a context, and compare learned choices with defaults."""
    from perflearn.learn.model import fit as fit_model
    from perflearn.learn.model import load

    from perflearn.learn.features import training_data
    from perflearn.learn.recommend import (Constraint, NoSharedDefault, beyond_the_runs, defaults_table,
                                           never_measured, recommend as rec)
    from perflearn.learn.space import search_space

    if top < 1:  # before fitting (--top -3 printed all but 3 of the points)
        raise UsageError(f"show at least 1 point, got {top}", where="--top")
    fixed = _pairs(context, "--context")
    constraints = [Constraint.parse(w) for w in (where_ or [])]
    wanted = [target, *[c.metric for c in constraints if c.metric != target]]
    mets, ctx = _split(metrics, "--metrics"), _split(context_cols, "--context-cols")
    ds = load_dataset(csv, experiment, store, mets or wanted, ctx, named=mets)
    for c in constraints:  # else fitting it said "unknown target", of a column that is no target
        if c.metric not in ds.metrics:
            what = (f"{c.metric} is a knob or context, which recommend chooses or is given (--context)"
                    if c.metric in ds.features else f"no metric {c.metric!r}")
            raise UsageError(f"constraint {str(c)!r}: {what}; a constraint bounds a metric "
                             f"(metrics: {', '.join(ds.metrics)}; name others with -m)", where="--where")
    feats = _split(features, "--features")
    if feats:  # checked before any use: an unknown one, a metric, was an internal error (session 58's review)
        training_data(ds, target, feats)
    for k in fixed:
        if k not in ds.features:
            from perflearn.store.dataset import name_hint, listed

            raise UsageError(f"unknown feature {k!r} (features: {listed(ds.features)}){name_hint(k, ds.features)}",
                             where="--context")
    models = {}
    if model_dir is not None:
        m = load(model_dir)
        m.check_dataset(ds)
        if m.target != target:
            raise UsageError(f"model predicts {m.target!r}, not {target!r}", where=str(model_dir))
        models[target] = m
        # what it was fitted with as context is context here too (a CSV read without --context-cols made the
        # load a knob: chosen by the search, and by the defaults table), said
        moved = [c for c in m.schema.context if c in ds.knobs]
        if moved:
            ds.knobs = [k for k in ds.knobs if k not in moved]
            ds.context = [*ds.context, *moved]
            terminal.info(f"{', '.join(moved)}: context, as --model {model_dir} was fitted with it")
        if feats and sorted(feats) != sorted(m.features):  # it chose a, b and c after -f a, unsaid
            others = [w for w in wanted if w != target]
            terminal.warn(f"-f: --model keeps the features it was fitted on ({', '.join(m.features)}); -f shapes "
                          + (f"the models of {', '.join(others)} only" if others else "no model here"))
    # the features each model takes, known before any fit: the table alone needs none (it fitted the target's,
    # for a minute under auto, and threw it away), and a missing context is refused before the fits
    takes = {metric: models[metric].features if metric in models else feats or ds.features for metric in wanted}
    used = sorted({f for fs in takes.values() for f in fs}, key=ds.features.index)
    missing_ctx = [c for c in ds.context if c in used and c not in fixed]
    sense = "max" if maximize else "min"

    # auto for every context's cross-fit refits its whole search per context (over a minute on 36 runs): the
    # table's choices are a forest's, as decide's
    table_family = "rf" if family == "auto" else family

    def print_table() -> None:
        try:
            _print_defaults(defaults_table(ds, target, sense, family=table_family, random_state=seed))
        except NoSharedDefault as exc:  # a property of the data: exit 2 after the recommendation (session 57)
            terminal.out.print(exc.line(), markup=False)
            return
        # the table's own models: every knob, --family, cross-fitted; and the target alone
        apart = [what for what, given in (("-w", constraints), ("-f", feats), ("--model", model_dir)) if given]
        if apart or table_family != family:
            shaped = (f": {', '.join(apart)} shape{'s' * (len(apart) == 1)} the recommendation only" if apart
                      else " (auto's search in every context's cross-fit would take minutes)")
            terminal.out.print(f"  the table fits its own {table_family} models on every knob, for {target} alone"
                               + shaped)

    if missing_ctx and table:  # the table covers every context: it needs none given
        terminal.info(f"no --context {missing_ctx[0]}=VALUE: no recommendation for one context, the table only")
        data = training_data(ds, target, takes[target])
        _say_left_out(data.excluded, target, data.excluded_why)
        print_table()
        return
    if missing_ctx:
        raise UsageError(f"give the context: --context {missing_ctx[0]}=VALUE (context columns: "
                         f"{', '.join(ds.context)})", where="--context")
    for metric in wanted:
        if metric not in models:
            models[metric] = fit_model(ds, metric, feats, family, random_state=seed)
    unused = [k for k in fixed if k not in used]
    if unused:  # -f left it out: fixing it changes nothing (ctx=small and ctx=large gave one answer, unsaid)
        terminal.warn(f"--context {', '.join(unused)}: not a feature of the model (-f): the recommendation is the "
                      f"same for any {' or '.join(unused)}")
    unchosen = [k for k in ds.features if k not in used and k not in fixed and k not in ds.context]
    if unchosen:
        terminal.warn(f"not chosen: {', '.join(unchosen)}, not a feature of the model (-f)")
    space = search_space(ds, [f for f in used if f not in fixed], fixed, any_combination=any_combination,
                         target=target, measured=wanted)
    r = rec(models, target, sense, space, {k: v for k, v in fixed.items() if k in used}, constraints, seed=seed, top=top)
    _say_csv_columns(csv, mets, ds)  # after every check: an error stays one line
    title = (f"{'maximise' if maximize else 'minimise'} {target}"
             + (f" subject to {', '.join(map(str, constraints))}" if constraints else "")
             + (f" for {', '.join(f'{k}={v}' for k, v in fixed.items())}" if fixed else ""))
    terminal.out.print(_frame_table(r.top, title=f"{title} ({r.method}, {r.evaluated} points evaluated)",
                                    exact=list(r.point)))
    best = ", ".join(f"{k}={v}" for k, v in r.point.items())
    pred = ", ".join(f"{k}={_fmt(v)}" for k, v in r.predicted.items())
    for metric, m in models.items():
        _say_left_out(m.n_excluded, metric, m.excluded_why)
    _say_constant(models[target].schema)
    # piped, the line alone is what is read: it says when no point met the constraints
    terminal.out.print(f"recommended: {best}  (predicted {pred})" if r.feasible else
                       f"recommended, though no point meets every constraint (the least violating): {best}  "
                       f"(predicted {pred})")
    for note in r.notes:
        terminal.out.print(f"  search: {note}", markup=False)
    runs = ds.ok()
    # a knob fixed at a value no run had (-c threads=3 of 1, 2, 4, 8) is as unmeasured as a context (session 60)
    unmeasured = (never_measured({k: v for k, v in fixed.items() if k in ds.context}, runs)
                  or never_measured({k: v for k, v in fixed.items() if k in used and k not in ds.context}, runs,
                                    "a setting"))
    for note in [*([unmeasured] if unmeasured else []),
                 *beyond_the_runs(models[target], r.point, r.predicted, runs, used, ds.context,
                                  {metric: m for metric, m in models.items() if metric != target})]:
        terminal.warn(note)
    if not r.feasible:
        terminal.warn("no point satisfies every constraint by the model; the least violating one is shown")
    if table:
        print_table()


def _unique(given: list[str], added: list[str]) -> list[str]:
    """``given`` then ``added``, an added name taken already suffixed ``_predicted`` (a model of
    ``hi`` on features ``lo`` and ``std`` wrote lo,std,hi,std,lo,hi: a file no reader takes back)."""
    names = list(given)
    for name in added:
        while name in names:
            name += "_predicted"
        names.append(name)
    return names


def _print_defaults(t) -> None:
    """Kunkel's Default Choice table: the learned choice against each system-wide default and the best."""
    ctx = f"per context ({', '.join(t.context)})" if t.context else "(no context columns: one context)"
    terminal.out.print(_frame_table(t.summary, title=f"learned vs system-wide defaults, {ctx}; "
                                    f"{'cross-fitted by context' if t.cross_fitted else 'in-sample'}"))
    if t.summary["relative"].isna().any():
        terminal.out.print("  relative: nan where the target is 0 or negative in a context (a ratio needs "
                           "positive values); loss is the difference")
    if t.defaults_left_out:
        terminal.out.print(f"  {t.defaults_left_out} more default(s), measured in every context, not shown: "
                           "each worse on average than the last shown")
    if t.blind_note():
        terminal.out.print(f"  {t.blind_note()}")
    if t.context:
        default = t.summary["choice"].iloc[1].removeprefix("default ")
        terminal.out.print(_frame_table(t.per_context, title=f"per context (default: {default}, the best single one; "
                                        "relative_to_default above 1 where the learned choice beats it)"))


# -- rules ------------------------------------------------------------------------------------


@app.command()
def rules(
    target: TargetOpt,
    csv: CsvOpt = None,
    experiment: ExperimentOpt = None,
    store: StoreOpt = DEFAULT_STORE,
    features: FeaturesOpt = None,
    metrics: MetricsOpt = None,
    context_cols: ContextColsOpt = None,
    depth: Annotated[int, typer.Option("--depth", "-d", help="Maximum tree depth.")] = 3,
    classes: Annotated[Optional[str], typer.Option("--classes", help="Class thresholds in the target's unit, e.g. 25,75: three classes, <=25, (25,75] and >75 (Kunkel's slow/avg/fast).")] = None,
    min_leaf: Annotated[int, typer.Option("--min-leaf", help="Minimum runs per leaf.")] = 1,
    png: Annotated[Optional[Path], typer.Option("--png", help="Draw the tree into this PNG.")] = None,
) -> None:
    """Rules of thumb from a depth-limited decision tree (text, and a drawn tree)."""
    from perflearn.learn.features import training_data
    from perflearn.learn.rules import tree_rules

    check_png(png, "--png")
    _refuse_overwriting_inputs([png], "--png", _source_files(csv, experiment, store))
    mets, ctx = _split(metrics, "--metrics"), _split(context_cols, "--context-cols")
    ds = load_dataset(csv, experiment, store, mets or [target], ctx, named=mets)
    data = training_data(ds, target, _split(features, "--features"))
    thresholds = None
    if classes is not None:  # "" and "," are no thresholds: refused by tree_rules, not a silent regression tree
        try:
            thresholds = [float(v) for v in _split(classes) or []]
        except ValueError:
            raise UsageError(f"class thresholds must be numbers, got {classes!r}", where="--classes") from None
    r = tree_rules(data, max_depth=depth, classes=thresholds, min_samples_leaf=min_leaf)
    kind = "accuracy" if thresholds is not None else "R²"
    _say_csv_columns(csv, mets, ds)  # after every check: an error stays one line
    _say_left_out(data.excluded, target, data.excluded_why)
    _say_constant(data.schema)
    terminal.out.print(f"rules for {target} from a depth-{depth} tree over {len(data.y)} runs (in-sample {kind} {r.r2_or_accuracy:.3f}):")
    terminal.out.print(r.text(data.schema.unit))
    if png is not None:
        terminal.info(f"tree drawn to {r.plot(png)}")


# -- cluster ----------------------------------------------------------------------------------


@app.command()
def cluster(
    csv: CsvOpt = None,
    experiment: ExperimentOpt = None,
    store: StoreOpt = DEFAULT_STORE,
    columns: Annotated[Optional[str], typer.Option("--columns", help="Comma-separated profile columns (default: all metrics).")] = None,
    metrics: Annotated[Optional[str], typer.Option("--metrics", "-m", help="Comma-separated metric columns: the profile unless --columns gives it (a CSV's other columns are knobs; a stored experiment's default: all its metrics).")] = None,
    context_cols: ContextColsOpt = None,
    k: Annotated[Optional[int], typer.Option("--k", help="Number of clusters (default: chosen by --k-by).")] = None,
    k_by: Annotated[str, typer.Option("--k-by", help="How k is chosen: elbow (kneedle on inertia, NESCAT's) or silhouette (the highest mean silhouette). Both are shown; an elbow a clearly better silhouette contradicts is said.")] = "elbow",
    kmax: Annotated[int, typer.Option("--kmax", help="Largest k tried (at least 4 for the elbow, whose k can depend on it, as kneedle scales the curve to its range).")] = 10,
    pca: Annotated[Optional[int], typer.Option("--pca", help="Reduce profiles to this many principal components first.")] = None,
    by: Annotated[str, typer.Option("--by", help="Profile per point (mean over repetitions) or per run.")] = "point",
    png: Annotated[Optional[Path], typer.Option("--png", help="Elbow + PCA scatter figure.")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write every profile with its cluster as CSV.")] = None,
    seed: SeedOpt = 0,
) -> None:
    """Group configurations by their profile (k-means, k by elbow); one representative per group."""
    from perflearn.learn.cluster import cluster as run_cluster

    check_png(png, "--png")
    check_output(out, "--out")
    one_file_each([("--png", png), ("--out", out)])  # the profiles were written over the figure
    _refuse_overwriting_inputs([png], "--png", _source_files(csv, experiment, store))
    _refuse_overwriting_inputs([out], "--out", _source_files(csv, experiment, store))
    if columns is not None and not _split(columns):  # --columns "" profiled every metric, as if not given (session 57)
        raise UsageError("no profile column given (e.g. p95,iops)", where="--columns")
    cols = _split(columns, "--columns")  # and "a,,b" read as a,b
    mets = _split(metrics, "--metrics")
    if csv is not None and not mets:
        if not cols:
            raise UsageError("for a CSV, name the metric columns with --metrics (or the profile with --columns)",
                             where="arguments")
        mets = cols
    ds = load_dataset(csv, experiment, store, mets or [], _split(context_cols, "--context-cols"), named=mets)
    if experiment is not None and mets and not cols:  # as for a CSV: the metrics named are the profile
        cols = mets
    r = run_cluster(ds, cols, k=k, kmax=kmax, pca=pca, by=by, random_state=seed, k_by=k_by)
    not_ok = int((ds.frame["status"] != "ok").sum())
    if not_ok:  # the profiles are of ok runs
        terminal.warn(f"{not_ok} run(s) left out (not ok)")
    if r.null_metrics:
        terminal.warn(f"left out of the profile: {', '.join(r.null_metrics)} (NULL in every run)")
    if r.incomplete_runs:
        terminal.warn(f"{r.incomplete_runs} run(s) left out of their point's profile: NULL in some or all of "
                      f"{', '.join(r.columns)} (a profile is the mean of the runs that measured every column)")
    if r.dropped:
        terminal.warn(f"{r.dropped} profile(s) left out (NULL in {', '.join(r.columns)})")
    if r.kmax_capped is not None and k is None:
        terminal.info(f"k tried up to {r.kmax_capped}, not {kmax}: {_why_capped(r)}")
    how = ("given" if k is not None else ("highest silhouette" if r.silhouettes else "no silhouette to compare")
           if k_by == "silhouette" else "elbow (kneedle)" if r.elbow_found else "no elbow found")
    terminal.out.print(f"k = {r.k} ({how}); inertia by k: " + ", ".join(f"{kk}:{v:.3g}" for kk, v in zip(r.ks, r.inertias)))
    if r.silhouettes:
        terminal.out.print("mean silhouette by k: " + ", ".join(f"{kk}:{v:.2f}" for kk, v in r.silhouettes.items()))
    if note := r.silhouette_note():
        terminal.warn(note)
    show = r.representatives.drop(columns=["_row"])
    terminal.out.print(_frame_table(show, title="one representative per cluster (closest to the centroid)",
                                    exact=ds.features))
    if png is not None:
        terminal.info(f"figure written to {r.plot(png)}")
    if out is not None:
        r.profiles.to_csv(out, index=False)
        terminal.info(f"{len(r.profiles)} profiles with their cluster written to {out}")


def _why_capped(r) -> str:
    """What stopped k below --kmax: the profiles, or their distinct ones (session 57's audit: on
    22 profiles of 6 distinct ones k went to 10, and the elbow was read off noise)."""
    profiles = len(r.profiles)
    if r.distinct == 1:
        return f"the {profiles} profiles are one and the same"
    if r.distinct < profiles:
        return f"the {profiles} profiles hold only {r.distinct} distinct ones"
    return f"{profiles} profiles"


@app.command()
def decide(
    target: TargetOpt,
    csv: CsvOpt = None,
    experiment: ExperimentOpt = None,
    store: StoreOpt = DEFAULT_STORE,
    metrics: MetricsOpt = None,
    context_cols: ContextColsOpt = None,
    family: FamilyOpt = "auto",
    maximize: Annotated[bool, typer.Option("--maximize/--minimize", help="Maximise (throughput) or minimise (time, latency) the target.")] = False,
    context: Annotated[Optional[list[str]], typer.Option("--context", "-c", help="Recommend for this context: "
                                                         "NAME=VALUE (default: the most common).")] = None,
    any_combination: AnyCombinationOpt = False,
    seed: SeedOpt = 0,
) -> None:
    """From measurements to a decision: the model's CV error, its rules, the recommended settings and
    their gain over the best single default (per context, as Kunkel et al.)."""
    from perflearn.learn.decide import decide as make_decision

    mets, ctx = _split(metrics, "--metrics"), _split(context_cols, "--context-cols")
    ds = load_dataset(csv, experiment, store, mets or [target], ctx, named=mets)
    decision = make_decision(ds, target, "max" if maximize else "min", family, context=_pairs(context, "--context"),
                             random_state=seed, any_combination=any_combination)
    _say_csv_columns(csv, mets, ds)  # after every check: an error stays one line
    for line in decision.lines():
        terminal.out.print(line, markup=False)
    for note in decision.warnings:
        terminal.warn(note)
