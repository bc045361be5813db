"""Metrics read from a process's output or a file: a regular expression, or a JSON path.

``process`` names whose output (workload or a companion), ``stream`` stdout or
stderr; or ``file`` a path template (``{run_dir}/out.json``) read after the run.
"""

from __future__ import annotations

import json
import re
import statistics

import jmespath
import jmespath.exceptions

from ..launch import fill
from ..timelimit import TimeLimit, time_limit
from .base import Collector, Missing, number

# Seconds one metric may take to extract its value when the workload has no timeout (with
# one, the timeout is the budget). Real patterns take microseconds on a run's output.
DEFAULT_BUDGET = 60.0

_SOURCE_OPTIONS = {"process": ((str,), False), "stream": ((str,), False), "file": ((str,), False), "scale": ((int, float), False)}


def _validate_source(metric) -> None:
    stream = metric.options.get("stream", "stdout")
    if stream not in ("stdout", "stderr"):
        raise ValueError(f"stream: expected 'stdout' or 'stderr', got {stream!r}")
    if "file" in metric.options and ("stream" in metric.options or "process" in metric.options):
        raise ValueError("file: give either file, or process/stream, not both")


def _text(metric, run, result) -> str | Missing:
    if "file" in metric.options:
        path = fill(metric.options["file"], run.values)
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError as exc:
            return Missing(f"cannot read {path}: {exc.strerror}")
    process = metric.options.get("process", "workload")
    stream = metric.options.get("stream", "stdout")
    if process not in result.processes:
        return Missing(f"process {process!r} did not run")
    return getattr(result.processes[process], stream)


def _each(metrics, run, extract) -> dict:
    """``extract(metric)`` for every metric, each failing only for its own reason: one path
    or pattern that raises, or backtracks past the run's time budget, used to blank every
    other metric of the source."""
    budget = getattr(run, "timeout", None) or DEFAULT_BUDGET
    out = {}
    for metric in metrics:
        try:
            with time_limit(budget):
                out[metric.name] = extract(metric)
        except TimeLimit:
            out[metric.name] = Missing(f"extracting from {_where(metric)} took more than {budget:g} s "
                                       "(a regular expression that backtracks without end?)")
        except Exception as exc:  # e.g. a JMESPath function given the wrong type, a sum overflowing
            out[metric.name] = Missing(f"{type(exc).__name__}: {exc}")
    return out


def _where(metric) -> str:
    if "file" in metric.options:
        return metric.options["file"]
    return f"{metric.options.get('process', 'workload')} {metric.options.get('stream', 'stdout')}"


class Regex(Collector):
    source = "regex"
    OPTIONS = {**_SOURCE_OPTIONS, "pattern": ((str,), True), "group": ((int, str), False), "match": ((str,), False)}
    REDUCERS = ("first", "last", "sum", "mean", "count")

    @classmethod
    def validate(cls, metric):
        _validate_source(metric)
        if not metric.options["pattern"]:
            raise ValueError("pattern: must not be empty (it would match anywhere and capture nothing)")
        try:
            pattern = re.compile(metric.options["pattern"], re.MULTILINE)
        except re.error as exc:
            raise ValueError(f"pattern: not a valid regular expression ({exc})") from None
        group = metric.options.get("group")
        if isinstance(group, int) and not 0 <= group <= pattern.groups:  # -1 failed at every run
            raise ValueError(f"group: the pattern has {pattern.groups} group(s), so group is 0 to {pattern.groups}, "
                             f"not {group}")
        if isinstance(group, str) and group not in pattern.groupindex:
            raise ValueError(f"group: the pattern has no group named {group!r}")
        if metric.options.get("match", "first") not in cls.REDUCERS:
            raise ValueError(f"match: expected one of {', '.join(cls.REDUCERS)}")

    def values(self, run, result):
        def extract(metric):
            text = _text(metric, run, result)
            return text if isinstance(text, Missing) else self._extract(metric, text)

        return _each(self.metrics, run, extract)

    @staticmethod
    def _extract(metric, text: str):
        pattern = re.compile(metric.options["pattern"], re.MULTILINE)
        group = metric.options.get("group")
        if group is None:
            group = "value" if "value" in pattern.groupindex else (1 if pattern.groups else 0)
        reduce = metric.options.get("match", "first")
        found = [m.group(group) for m in pattern.finditer(text)]
        if reduce == "count":
            return float(len(found))
        if not found:
            # as written in the spec: repr doubled its backslashes ('v=(\\d+)' of v=(\d+))
            return Missing(f"pattern /{metric.options['pattern']}/ did not match {_where(metric)}")
        numbers = []
        for raw in found:
            value = number(raw, f"match {raw!r}")
            if isinstance(value, Missing):
                return value
            numbers.append(value)
        scale = float(metric.options.get("scale", 1.0))
        # only the asked-for reduction: a mean overflowing (fsum) failed match = "first" too
        reducers = {"first": lambda: numbers[0], "last": lambda: numbers[-1], "sum": lambda: sum(numbers),
                    "mean": lambda: statistics.fmean(numbers)}
        return reducers[reduce]() * scale


def parse_json_document(text: str):
    """The JSON document in ``text``, skipping any lines a tool printed before it."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    for match in re.finditer(r"^[\[{]", text, re.MULTILINE):
        try:
            return json.JSONDecoder().raw_decode(text[match.start():])[0]
        except json.JSONDecodeError:
            continue
    raise ValueError("no JSON document found")


class JsonPath(Collector):
    source = "json"
    OPTIONS = {**_SOURCE_OPTIONS, "path": ((str,), True)}

    @classmethod
    def validate(cls, metric):
        _validate_source(metric)
        try:
            jmespath.compile(metric.options["path"])
        except jmespath.exceptions.ParseError as exc:
            raise ValueError(f"path: not a valid JMESPath expression ({str(exc).splitlines()[0]})") from None

    def values(self, run, result):
        documents: dict[str, object] = {}  # one parse per file or stream, whatever the metrics

        def extract(metric):
            text = _text(metric, run, result)
            if isinstance(text, Missing):
                return text
            where = _where(metric)
            if where not in documents:
                try:
                    documents[where] = parse_json_document(text)
                except ValueError:
                    documents[where] = Missing(f"{where} holds no JSON document")
            document = documents[where]
            if isinstance(document, Missing):
                return document
            found = jmespath.search(metric.options["path"], document)
            if found is None:
                return Missing(f"path {metric.options['path']!r} not found in {where}")
            value = number(found, f"path {metric.options['path']!r}")
            return value if isinstance(value, Missing) else value * float(metric.options.get("scale", 1.0))

        return _each(self.metrics, run, extract)
