"""Commands about configuration: ``validate``, ``list`` and ``schema``."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from ftctl.config.errors import ConfigError
from ftctl.config.load import load_config, read_yaml
from ftctl.config.scenario import FAULT_TYPES, Scenario
from ftctl.config.topology import Topology
from ftctl.console import EXIT_USAGE, console, err_console
from ftctl.tables import print_table


class ListWhat(StrEnum):
    topologies = "topologies"
    protocols = "protocols"
    mutants = "mutants"
    operators = "operators"
    types = "types"
    faults = "faults"


class Backend(StrEnum):
    local = "local"
    docker = "docker"


class SchemaOf(StrEnum):
    topology = "topology"
    scenario = "scenario"


SCHEMA_MODELS: dict[SchemaOf, type[Topology] | type[Scenario]] = {
    SchemaOf.topology: Topology,
    SchemaOf.scenario: Scenario,
}
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
    app.command("list")(list_cmd)
    app.command("schema")(schema)


def report_error(exc: ConfigError) -> None:
    """Print a ConfigError as the one line the conventions promise."""
    err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)


# ---------------------------------------------------------------- validate


def validate(
    files: Annotated[
        list[str], typer.Argument(help="Topology or scenario YAML files.", metavar="FILE...")
    ],
    as_json: JsonOpt = False,
    master: Annotated[
        str | None, typer.Option(help="Also check that each scenario's faults can be "
                                 "delivered on a cluster ftctl did not start (as `ftctl "
                                 "chaos --master URL`).")
    ] = None,
    backend: Annotated[
        Backend | None, typer.Option(help="Also check that each scenario's faults can be "
                                     "delivered on this backend (container faults need "
                                     "docker).")
    ] = None,
    determinism: Annotated[
        int, typer.Option("--determinism", min=0, metavar="N",
                          help="Also run each topology fault-free under N seeded "
                          "interleavings on the simulation host and refuse it if its "
                          "output differs between them (0: do not run it).")
    ] = 0,
    protocol: Annotated[
        str | None, typer.Option("--protocol", "-p", help="Also check that each topology "
                                 "runs under this protocol or engine: `structured-streaming` "
                                 "refuses, in one line, what Structured Streaming cannot "
                                 "express or would run only at-least-once.")
    ] = None,
) -> None:
    """Check topology and chaos-scenario files without running anything.

    A file with a top-level `faults` key is a scenario; any other file is a topology.

    Each bad file gets one line naming its file, line and field; the exit code is then 2.

    With --determinism N each topology also runs, fault-free, under N seeded orders of
    delivery between instances; one whose output depends on that order (so that every
    protocol would be blamed for it) is refused, naming the first diverging sink and key.
    Topologies over the simulator's input size are not run, and the line says so.

    Examples:

        ftctl validate topologies/wordcount.yaml

        ftctl validate topologies/*.yaml chaos/*.yaml --json

        ftctl validate chaos/flapping.yaml --master spark://10.0.0.5:7077

        ftctl validate topologies/*.yaml --determinism 20

        ftctl validate topologies/*.yaml -p structured-streaming
    """
    bad = 0
    rows: list[dict[str, Any]] = []
    for file in files:
        try:
            config = load_config(file)
            if isinstance(config, Scenario) and (master is not None or backend is not None):
                from chaos.plan import check_delivery  # not for a plain validate: it is slow

                for fault in config.faults:
                    check_delivery(file, fault.type, fault.target, fault.duration, master,
                                   backend or "local")
            if isinstance(config, Topology) and protocol is not None:
                _check_target(file, config, protocol)
            ran = (_determinism(file, config, determinism)
                   if isinstance(config, Topology) and determinism else None)
        except ConfigError as exc:
            bad += 1
            if as_json:
                rows.append({"file": file, "ok": False, "error": str(exc)})
            else:
                report_error(exc)
            continue
        summary = _summary(config) + (f"; {ran}" if ran else "")
        if as_json:
            rows.append({"file": file, "ok": True, "summary": summary})
            continue
        console.print(
            f"[green]ok[/green] {escape(file)} ({summary})",
            highlight=False,
            soft_wrap=True,
        )
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
    if bad:
        raise typer.Exit(EXIT_USAGE)


def _check_target(file: str, topology: Topology, protocol: str) -> None:
    """ConfigError unless ``topology`` can run under ``protocol`` (an engine compiles it;
    a protocol's parameters must fit it)."""
    from ftctl.commands.common import check_scope, protocol_and_params
    from ftctl.engines import engine_of

    if engine_of(protocol) is not None:
        from ftctl.engines.structured import cli as structured

        structured.check_mutant(engine_of(protocol)[1])  # type: ignore[index]
        structured.compile_plan(topology, file)
        return
    info, given = protocol_and_params(protocol, None)
    check_scope(info.resolve(given), topology, file)


def _determinism(file: str, topology: Topology, runs: int) -> str:
    """Run the determinism check (ConfigError when the output depends on the order of
    deliveries); what the summary line says about it."""
    from ftctl.commands.common import function_errors
    from ftctl.conformance.cases import MAX_SIM_RECORDS
    from ftctl.runtime.graph import ExecutionGraph
    from ftctl.sim.determinism import check_determinism

    records = max(topology.source_records(op) for op in topology.operators
                  if op.type.startswith("source."))
    if records > MAX_SIM_RECORDS:  # sized for Spark: minutes per simulated run
        return (f"determinism not checked: {records:,} records, over the simulator's "
                f"{MAX_SIM_RECORDS:,}")
    with function_errors(file, topology):
        check_determinism(ExecutionGraph(topology), file, runs)
    return f"same output under {runs} interleaving{'' if runs == 1 else 's'}"


def _summary(config: Topology | Scenario) -> str:
    if isinstance(config, Scenario):
        n = len(config.faults)
        return f"scenario {config.name}: {n} fault{'' if n == 1 else 's'}"
    ops = len(config.operators)
    instances = sum(op.parallelism for op in config.operators)
    return (
        f"topology {config.name}: {ops} operator{'' if ops == 1 else 's'}, "
        f"{instances} instance{'' if instances == 1 else 's'}"
    )


# ---------------------------------------------------------------- list


def list_cmd(
    what: Annotated[ListWhat, typer.Argument(help="What to list.", metavar="WHAT")],
    as_json: JsonOpt = False,
    directory: Annotated[
        Path, typer.Option("--dir", help="Where topology files are (for `topologies`).")
    ] = Path("topologies"),
) -> None:
    """List topologies, protocols, their mutants (planted bugs), operator types, record
    types (the fields key_by and window field: can name) or fault types.

    Examples:

        ftctl list operators

        ftctl list topologies --dir my-topologies

        ftctl list faults --json

        ftctl list mutants

        ftctl list types
    """
    try:
        rows = {
            ListWhat.topologies: lambda: _topology_rows(directory),
            ListWhat.protocols: _protocol_rows,
            ListWhat.mutants: _mutant_rows,
            ListWhat.operators: _operator_rows,
            ListWhat.types: _type_rows,
            ListWhat.faults: _fault_rows,
        }[what]()
    except ConfigError as exc:  # an installed protocol plug-in that cannot be used
        report_error(exc)
        raise typer.Exit(EXIT_USAGE) from None
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title=what.value)
    for column in _COLUMNS[what]:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(escape(_cell(row.get(c))) for c in _COLUMNS[what]))
    print_table(table)


_COLUMNS = {
    ListWhat.topologies: ["name", "file", "description"],
    ListWhat.protocols: ["name", "guarantee", "from", "description"],
    ListWhat.mutants: ["name", "description"],
    ListWhat.operators: ["name", "kind", "inputs", "params", "description"],
    ListWhat.types: ["name", "fields", "made by"],
    ListWhat.faults: ["type", "fields", "params", "description"],
}


def _cell(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    return "" if value is None else str(value)


def _topology_rows(directory: Path) -> list[dict[str, Any]]:
    rows = []
    for path in sorted([*directory.glob("*.yaml"), *directory.glob("*/*.yaml")]):
        try:
            data, _ = read_yaml(path)
            name, description = str(data.get("name", path.stem)), str(data.get("description", ""))
        except ConfigError as exc:
            name, description = path.stem, f"(unreadable: {exc.message})"
        rows.append({"name": name, "file": str(path), "description": description})
    return rows


def _protocol_rows() -> list[dict[str, Any]]:
    """Every protocol: the built-ins, then installed plug-ins with the distribution and
    version that provide them (``from``)."""
    from protocols.registry import PROTOCOLS, UnknownProtocol, origin

    try:
        rows = [{"name": name, "guarantee": _declared(info), "from": origin(name),
                 "description": info.description, "paper": info.paper}
                for name, info in PROTOCOLS.items()]
    except UnknownProtocol as exc:
        raise ConfigError("ftctl list protocols", None, str(exc)) from None
    # Not a protocol of the kernel, but -p takes it (docs/structured-streaming.md).
    rows.append({"name": "structured-streaming", "guarantee": "exactly-once",
                 "from": "engine", "paper": "",
                 "description": "Spark Structured Streaming in a driver of its own: checkpoint "
                                "location, RocksDB state store, foreachBatch sink keyed by "
                                "batch id (mutant: structured-streaming/ignore-batch-id)"})
    return rows


def _declared(spec: Any) -> str:
    """What a protocol promises with its default params; ``per topology`` where its spec
    narrows that on some topologies (``none``: no promise where an operator keeps state)."""
    guarantee = spec.guarantee_of(spec.default_params())
    narrowed = " (per topology)" if getattr(spec, "guarantee_on", None) else ""
    return f"{guarantee.value}{narrowed}"


def _mutant_rows() -> list[dict[str, Any]]:
    from protocols.mutants import all_mutants
    from protocols.registry import UnknownProtocol

    try:
        return [{"name": f"{protocol}/{m.name}", "protocol": protocol,
                 "description": m.description, "params": dict(m.params)}
                for protocol, mutants in all_mutants().items() for m in mutants]
    except UnknownProtocol as exc:
        raise ConfigError("ftctl list mutants", None, str(exc)) from None


def _operator_rows() -> list[dict[str, Any]]:
    from ftctl.runtime.operators import OPERATORS
    from ftctl.runtime.sources import SOURCES

    rows: list[dict[str, Any]] = [
        {
            "name": name,
            "kind": "source",
            "inputs": 0,
            "description": spec.description,
            "params": dict(spec.defaults),
        }
        for name, spec in sorted(SOURCES.items())
    ]
    rows += [
        {
            "name": name,
            "kind": "sink" if name == "sink" else "operator",
            "inputs": op.inputs,
            "description": op.description,
            "params": {"function": "required"} if op.needs_function else {},
        }
        for name, op in sorted(OPERATORS.items())
    ]
    return rows


def _type_rows() -> list[dict[str, Any]]:
    from ftctl.runtime.operators import BUILTIN_FUNCTIONS, OPERATORS
    from ftctl.runtime.records import RECORD_TYPES
    from ftctl.runtime.sources import SOURCES

    made: dict[str, list[str]] = {}
    for name, spec in SOURCES.items():
        made.setdefault(spec.makes, []).append(name)
    for name, op in OPERATORS.items():
        if op.makes and op.makes != "function":
            made.setdefault(op.makes, []).append(name)
    for name, fn in BUILTIN_FUNCTIONS.items():
        made.setdefault(str(getattr(fn, "makes", "any")), []).append(name)
    return [{"name": name, "fields": list(fields), "made by": sorted(made.get(name, []))}
            for name, fields in sorted(RECORD_TYPES.items())]


def _fault_rows() -> list[dict[str, Any]]:
    rows = []
    for name, kind in FAULT_TYPES.items():
        fields = [
            f for f, on in (("duration", kind.takes_duration), ("window", kind.takes_window)) if on
        ]
        rows.append(
            {
                "type": name,
                "fields": fields,
                "params": list(kind.params.model_fields),
                # which hosts (or engines) realize it in scenario files, and whether
                # --faults draws it
                "hosts": [*kind.hosts, *(["engine"] if kind.engine else []),
                          *(["sim --faults"] if kind.draw else [])],
                "description": kind.description,
            }
        )
    return rows


# ---------------------------------------------------------------- schema


def schema(
    kind: Annotated[
        SchemaOf, typer.Argument(help="Which file format.", metavar="KIND")
    ] = SchemaOf.topology,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.")
    ] = None,
) -> None:
    """Print the JSON Schema of topology or scenario files (for editors and CI).

    Examples:

        ftctl schema topology

        ftctl schema scenario -o scenario.schema.json
    """
    text = json.dumps(SCHEMA_MODELS[kind].model_json_schema(), indent=2) + "\n"
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        report_error(ConfigError(str(output), None, f"cannot write: {exc.strerror or exc}"))
        raise typer.Exit(EXIT_USAGE) from None
    console.print(f"wrote {escape(str(output))}", highlight=False)
