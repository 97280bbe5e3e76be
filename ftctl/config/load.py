"""Read topology and scenario files; every user mistake becomes one ConfigError line.

YAML is parsed into plain data plus a map from document paths (``("operators", 2,
"type")``) to line numbers, so pydantic and graph-check errors can name their line.
"""

from __future__ import annotations

import difflib
import os
import types
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ftctl.config.checks import Loc, check_topology, dotted, line_of
from ftctl.config.errors import ConfigError
from ftctl.config.scenario import PARAMS, TARGET_PATTERN, Scenario, relation_error
from ftctl.config.topology import Topology

PathLike = str | os.PathLike[str]
Lines = dict[Loc, int]
M = TypeVar("M", bound=BaseModel)

_MERGE_TAG = "tag:yaml.org,2002:merge"
# Patterns of the models, in words.
_PATTERN_WORDS = {
    r"^[A-Za-z][A-Za-z0-9_-]*$": "must start with a letter and hold only letters, digits, "
    "'_' and '-'",
    TARGET_PATTERN: "expected an instance like count[1], an operator, a selector like rack=a, "
    "or random",
}


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys instead of keeping the last one silently."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                continue  # unhashable keys are reported by the base class
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key '{key}'", key_node.start_mark
                )
        return super().construct_mapping(node, deep=deep)


# ---------------------------------------------------------------- public API


def load_topology(path: PathLike, *, records: int | None = None, rate: float | None = None,
                  seed: int | None = None) -> Topology:
    """Load and check a topology file; sinks without a `mode` get the default one.

    ``records``, ``rate`` and ``seed`` (a command's --records, --rate, --seed) replace the
    file's input and are held to the same limits as the file's own values."""
    file = os.fspath(path)
    data, lines = read_yaml(path)
    topology = check_topology(_validate(Topology, data, file, lines), file, lines)
    if records is None and rate is None and seed is None:
        return topology
    try:
        sized = topology.with_input(records=records, rate=rate, seed=seed)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError(f"--{err['loc'][-1]}", None, _message(err)) from None
    return check_topology(sized, file, lines)  # e.g. more words than a run may generate


def load_scenario(path: PathLike) -> Scenario:
    """Load a chaos-scenario file; each fault's params are checked against its type."""
    file = os.fspath(path)
    data, lines = read_yaml(path)
    return _check_scenario(_validate(Scenario, data, file, lines), file, lines)


def load_config(path: PathLike) -> Topology | Scenario:
    """Load either kind of file: one with a top-level `faults` key is a scenario."""
    file = os.fspath(path)
    data, lines = read_yaml(path)
    if is_scenario(data):
        return _check_scenario(_validate(Scenario, data, file, lines), file, lines)
    return check_topology(_validate(Topology, data, file, lines), file, lines)


def is_scenario(data: dict[str, Any]) -> bool:
    return "faults" in data


def read_yaml(path: PathLike) -> tuple[dict[str, Any], Lines]:
    """The top-level mapping of a YAML file and the line of each path in it."""
    file = os.fspath(path)
    text = _read_text(file)
    loader: _Loader | None = None
    try:
        loader = _Loader(text)  # its reader already refuses control characters
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise ConfigError(file, None, f"invalid YAML: {exc.problem or exc.context}", line) from None
    except yaml.reader.ReaderError as exc:
        raise ConfigError(file, None, "not a text file: control character "
                          f"{exc.character!r} at character {exc.position}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(file, None, f"invalid YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise ConfigError(file, None, "invalid YAML: nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()
    if data is None:
        raise ConfigError(file, None, "empty file")
    if not isinstance(data, dict):
        line = node.start_mark.line + 1 if node is not None else None
        raise ConfigError(
            file, None, f"expected a mapping at the top level, got {_got(data)}", line
        )
    lines: Lines = {}
    assert node is not None
    _index_lines(node, (), lines, set())
    return data, lines


# ---------------------------------------------------------------- reading


def _read_text(file: str) -> str:
    try:
        return Path(file).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(file, None, "no such file") from None
    except IsADirectoryError:
        raise ConfigError(file, None, "is a directory, not a file") from None
    except PermissionError:
        raise ConfigError(file, None, "permission denied") from None
    except UnicodeDecodeError:
        raise ConfigError(file, None, "not a UTF-8 text file") from None
    except OSError as exc:
        raise ConfigError(file, None, f"cannot read: {exc.strerror or exc}") from None


def _index_lines(node: Node, loc: Loc, out: Lines, seen: set[int]) -> None:
    """Record the 1-based line of every key and sequence item under `node`.

    An aliased node is indexed under its first path only, which also stops recursive
    aliases and keeps alias-heavy files linear.
    """
    out.setdefault(loc, node.start_mark.line + 1)
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, MappingNode):
        for key, value in node.value:
            if isinstance(key, ScalarNode) and key.tag != _MERGE_TAG:
                out[(*loc, key.value)] = key.start_mark.line + 1
                _index_lines(value, (*loc, key.value), out, seen)
    elif isinstance(node, SequenceNode):
        for i, item in enumerate(node.value):
            _index_lines(item, (*loc, i), out, seen)


# ---------------------------------------------------------------- validation


def _validate(model: type[M], data: dict[str, Any], file: str, lines: Lines) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _config_error(exc, model, data, file, lines) from None


def _check_scenario(scenario: Scenario, file: str, lines: Lines) -> Scenario:
    for i, fault in enumerate(scenario.faults):
        try:
            fault.params = fault.typed_params().model_dump()
        except ValidationError as exc:
            params_model = PARAMS[fault.type]
            prefix: Loc = ("faults", i, "params")
            raise _config_error(exc, params_model, fault.params, file, lines, prefix) from None
    problem = relation_error(scenario)
    if problem is not None:
        loc, message = problem
        raise ConfigError(file, dotted(loc), message, line_of(lines, loc))
    return scenario


def _config_error(
    exc: ValidationError,
    model: type[BaseModel],
    data: Any,
    file: str,
    lines: Lines,
    prefix: Loc = (),
) -> ConfigError:
    """ConfigError for the pydantic error that comes first in the file."""
    located = []
    for err in exc.errors():
        loc = _data_loc(data, tuple(err["loc"]))
        located.append((line_of(lines, (*prefix, *loc)), loc, err))
    # An unknown field explains a missing one on the same line (a typo), so it goes first.
    line, loc, err = min(
        located,
        key=lambda e: (e[0] if e[0] is not None else 1 << 30, e[2]["type"] != "extra_forbidden"),
    )
    where, message = _describe(err, loc, model)
    return ConfigError(file, dotted((*prefix, *where)) or None, message, line)


def _describe(err: Any, loc: Loc, model: type[BaseModel]) -> tuple[Loc, str]:
    """The location to name and the message for one pydantic error."""
    kind = err["type"]
    if kind == "invalid_key":
        return loc[:-1], f"keys must be strings, got {_got(err.get('input'))}"
    if loc and loc[-1] == "[key]":
        return loc[:-2], f"keys must be strings, got {_got(err.get('input'))}"
    if kind in ("missing", "extra_forbidden") and loc:
        parent, name = loc[:-1], str(loc[-1])
        return parent, _field_message(kind, name, _fields_at(model, parent) or [])
    return loc, _message(err)


def _data_loc(data: Any, loc: Loc) -> Loc:
    """Drop loc parts that are not in the document (pydantic's union-member tags)."""
    out: list[str | int] = []
    node = data
    for i, part in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(node, dict) and (part in node or last):
            out.append(part)
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            out.append(part)
            node = node[part]
        elif last:
            out.append(part)
    return tuple(out)


def _fields_at(model: Any, loc: Loc) -> list[str] | None:
    """The field names of the model found at `loc` inside `model`, if it is a model."""
    tp = model
    for part in loc:
        tp = _unwrap_optional(tp)
        if isinstance(part, int):
            args = get_args(tp)
            if get_origin(tp) is not list or not args:
                return None
            tp = args[0]
        elif isinstance(tp, type) and issubclass(tp, BaseModel):
            fields = {f.alias or n: f for n, f in tp.model_fields.items()}
            if part not in fields:
                return None
            tp = fields[part].annotation
        else:
            return None
    tp = _unwrap_optional(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [f.alias or n for n, f in tp.model_fields.items()]
    return None


def _unwrap_optional(tp: Any) -> Any:
    if get_origin(tp) in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _field_message(kind: str, name: str, fields: list[str]) -> str:
    if kind == "missing":
        return f"missing required field '{name}'"
    close = difflib.get_close_matches(name, fields, n=1, cutoff=0.7)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"unknown field '{name}'{hint}"


def _message(err: Any) -> str:
    """A short message for one pydantic error."""
    kind, ctx, got = err["type"], err.get("ctx") or {}, _got(err.get("input"))
    simple = {
        "int_parsing": "expected an integer",
        "int_type": "expected an integer",
        "int_from_float": "expected an integer",
        "float_parsing": "expected a number",
        "float_type": "expected a number",
        "finite_number": "expected a finite number",
        "bool_parsing": "expected true or false",
        "bool_type": "expected true or false",
        "string_type": "expected a string",
        "dict_type": "expected a mapping",
        "model_type": "expected a mapping",
        "model_attributes_type": "expected a mapping",
        "list_type": "expected a list",
    }
    if kind in simple:
        return f"{simple[kind]}, got {got}"
    bounds = {
        "greater_than": ">",
        "greater_than_equal": ">=",
        "less_than": "<",
        "less_than_equal": "<=",
    }
    if kind in bounds:
        limit = next(iter(ctx.values()), "?")
        return f"must be {bounds[kind]} {limit}, got {got}"
    if kind in ("literal_error", "enum"):
        return f"expected {ctx.get('expected', '?')}, got {got}"
    if kind == "string_pattern_mismatch":
        pattern = str(ctx.get("pattern", ""))
        return f"{_PATTERN_WORDS.get(pattern, f'must match {pattern}')}, got {got}"
    if kind in ("too_short", "too_long"):
        n = ctx.get("min_length" if kind == "too_short" else "max_length", "?")
        word = "at least" if kind == "too_short" else "at most"
        return f"needs {word} {n} item{'' if n == 1 else 's'}"
    msg = str(err["msg"])
    if kind in ("value_error", "assertion_error") and ", " in msg:
        return msg.split(", ", 1)[1]  # drop pydantic's "Value error, " prefix
    return msg[:1].lower() + msg[1:]


def _got(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:37] + "...")
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__
