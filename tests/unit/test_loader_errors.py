"""One error format for the three loaders (issue 37): the forwarder's config, stream graphs and
scenarios report the same kinds of mistake the same way, every one at once, each as
``FILE:LINE:COL: field.path: message`` (icn/problems.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from apps.scenario.loader import load_scenario
from compute.stream.graph import load_graph
from forwarder.config import config_from_dict, load_config, read_config_mapping
from icn.problems import Problem, ProblemsError, format_loc, parse_yaml

ROOT = Path(__file__).resolve().parents[2]

# The same four mistakes in each kind of file: an unknown field (a typo), a value of the wrong
# type, a required field left out, a key written twice.
FORWARDER = """\
log_level: info
tables:
  pit_max_entrys: 10
  cs_max_entries: lots
faces:
  - {shaper: {loss: 0.1}}
tick_ms: 5
tick_ms: 6
"""
GRAPH = """\
flow: /f
settings:
  bufer: 3
  batch_bytes: lots
operators:
  - {type: generator, count: 3}
  - {name: s, type: stdout, input: g}
flow: /g
"""
SCENARIO = """\
name: t
nodes:
  a: {cs_capacty: 5}
  b: {cs_capacity: lots}
links:
  - {delay: 5ms}
name: u
"""
NOT_AN_INT = "Input should be a valid integer, unable to parse string as an integer (got 'lots')"


def _forwarder(path: Path) -> object:
    return load_config(path)


def _graph(path: Path) -> object:
    return load_graph(path)


def _scenario(path: Path) -> object:
    return load_scenario(path, check_entries=False)


CASES: list[tuple[str, str, Callable[[Path], object], list[str]]] = [
    (
        "fwd.yaml",
        FORWARDER,
        _forwarder,
        [
            "fwd.yaml:3:3: tables.pit_max_entrys: unknown field 'pit_max_entrys' (did you mean "
            "'pit_max_entries'? valid fields: cs_max_bytes, cs_max_entries, dnl_lifetime_ms, ",
            f"fwd.yaml:4:3: tables.cs_max_entries: {NOT_AN_INT}",
            "fwd.yaml:6:5: faces[0].uri: missing required field 'uri'",
            "fwd.yaml:8:1: tick_ms: appears twice in the same mapping (first at line 7); keep one",
        ],
    ),
    (
        "g.yaml",
        GRAPH,
        _graph,
        [
            "g.yaml:3:3: settings.bufer: unknown field 'bufer' (did you mean 'buffer'? valid "
            "fields: batch_bytes, buffer, checkpoint, lead, lifetime, linger, state_dir, window)",
            f"g.yaml:4:3: settings.batch_bytes: {NOT_AN_INT}",
            "g.yaml:6:5: operators[0].name: missing required field 'name'",
            "g.yaml:8:1: flow: appears twice in the same mapping (first at line 1); keep one",
        ],
    ),
    (
        "s.yaml",
        SCENARIO,
        _scenario,
        [
            "s.yaml:3:7: nodes.a.cs_capacty: unknown field 'cs_capacty' (did you mean "
            "'cs_capacity'? valid fields: cs_capacity, forwarder, strategy)",
            f"s.yaml:4:7: nodes.b.cs_capacity: {NOT_AN_INT}",
            "s.yaml:6:5: links[0].between: missing required field 'between'",
            "s.yaml:7:1: name: appears twice in the same mapping (first at line 1); keep one",
        ],
    ),
]
LINE = re.compile(
    r"^(?P<file>[\w.]+):(?P<line>\d+):(?P<col>\d+): (?P<path>[\w.\[\]]+): (?P<msg>.+)$"
)


@pytest.mark.parametrize(("name", "text", "load", "expected"), CASES, ids=[c[0] for c in CASES])
def test_every_loader_reports_the_same_mistakes_the_same_way(
    tmp_path: Path, name: str, text: str, load: Callable[[Path], object], expected: list[str]
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ProblemsError) as info:
        load(path)
    err = info.value
    lines = [p.format(name) for p in err.problems]
    # all four at once, in the order of the file, each FILE:LINE:COL: path: message
    assert len(lines) == 4, lines
    for got, want in zip(lines, expected, strict=True):
        assert got.startswith(want), (got, want)
        assert LINE.match(got), got
    # the exception's text is what `icn fwd`, `icn flow` and `icn scenario` print
    assert str(err).splitlines()[0] == f"{path}: 4 problems"
    assert str(err).splitlines()[1] == "  " + err.problems[0].format(str(path))
    assert "README" not in str(err)


@pytest.mark.parametrize(
    ("name", "text", "load", "expected"),
    [
        (
            "fwd.yaml",
            "log_level: warn\n",
            _forwarder,
            "fwd.yaml:1:1: log_level: Input should be 'debug', 'info', 'warning' or 'error' "
            "(got 'warn'; did you mean 'warning'?)",
        ),
        (
            "g.yaml",
            "flow: /f\noperators:\n  - {name: g, type: generator}\n"
            "  - {name: w, type: window, input: g, tumbling: 1s, aggregate: summ}\n"
            "  - {name: s, type: stdout, input: w}\n",
            _graph,
            "g.yaml:4:53: operators[1].aggregate: Input should be 'count', 'sum', 'mean', 'min', "
            "'max' or 'reduce' (got 'summ'; did you mean 'sum'?)",
        ),
        (
            "s.yaml",
            "name: t\nnodes: {a: {}, b: {}}\nlinks:\n  - {between: [a, b], transport: tpc}\n",
            _scenario,
            "s.yaml:4:23: links[0].transport: Input should be 'udp' or 'tcp' (got 'tpc'; did you "
            "mean 'tcp'?)",
        ),
    ],
    ids=["fwd", "graph", "scenario"],
)
def test_a_misspelt_choice_gets_the_closest_one(
    tmp_path: Path, name: str, text: str, load: Callable[[Path], object], expected: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ProblemsError) as info:
        load(path)
    assert [p.format(name) for p in info.value.problems] == [expected]


@pytest.mark.parametrize("load", [_forwarder, _graph, _scenario], ids=["fwd", "graph", "scenario"])
def test_not_yaml_is_told_alike_with_its_line_and_column(
    tmp_path: Path, load: Callable[[Path], object]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("a: 1\nb: [1, 2\nc: 3\n")
    with pytest.raises(ProblemsError) as info:
        load(path)
    (problem,) = info.value.problems
    assert problem.format("bad.yaml") == (
        "bad.yaml:3:2: (top level): not valid YAML: expected ',' or ']', but got ':' "
        "(while parsing a flow sequence)"
    )


@pytest.mark.parametrize("load", [_forwarder, _graph, _scenario], ids=["fwd", "graph", "scenario"])
def test_an_unreadable_file_is_named(tmp_path: Path, load: Callable[[Path], object]) -> None:
    with pytest.raises(ProblemsError) as info:
        load(tmp_path / "nothere.yaml")
    assert re.fullmatch(
        rf"{re.escape(str(tmp_path))}/nothere\.yaml: cannot read the (config )?file: "
        "No such file or directory",
        info.value.problems[0].format("x"),
    )


def test_graph_wiring_problems_have_their_lines(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(
        "flow: /f\noperators:\n  - {name: gen, type: generator, partitions: 2}\n"
        "  - {name: avg, type: map, input: gen, fn: 'json:nothing', partitions: 4}\n"
        "  - name: out\n    type: stdout\n    input: ag\n"
    )
    with pytest.raises(ProblemsError) as info:
        load_graph(path)
    assert [p.format("g.yaml") for p in info.value.problems] == [
        "g.yaml:4:5: operators[1]: avg: nothing reads its output; add a sink after it",
        "g.yaml:7:5: operators[2].input: 'ag' is not an operator (did you mean 'avg'? valid "
        "operators: gen, avg, out)",
    ]
    path.write_text(path.read_text().replace("input: ag", "input: avg"))
    with pytest.raises(ProblemsError) as info:
        load_graph(path, check_functions=True)
    assert [p.format("g.yaml") for p in info.value.problems] == [
        "g.yaml:4:60: operators[1].partitions: avg: partitions: 4 but its input 'gen' has 2; "
        "use at most 2, or put a key_by with more partitions before it"
    ]
    path.write_text(path.read_text().replace("partitions: 4", "partitions: 2"))
    with pytest.raises(ProblemsError) as info:
        load_graph(path, check_functions=True)
    assert [p.format("g.yaml") for p in info.value.problems] == [
        "g.yaml:4:40: operators[1].fn: json has no function 'nothing' (from json:nothing)"
    ]


def test_a_json_config_gets_lines_and_its_duplicate_keys(tmp_path: Path) -> None:
    """A launcher writes configs as JSON (read without a YAML parser): a bad one is still
    located, and a key written twice (which JSON keeps the last of) is refused."""
    path = tmp_path / "fwd.json"
    path.write_text('{\n  "tables": {"pit_max_entries": 0},\n  "tick_ms": 5,\n  "tick_ms": 6\n}\n')
    with pytest.raises(ProblemsError) as info:
        load_config(path)
    assert [p.format("fwd.json") for p in info.value.problems] == [
        "fwd.json:2:14: tables.pit_max_entries: Input should be greater than or equal to 1 (got 0)",
        "fwd.json:4:3: tick_ms: appears twice in the same mapping (first at line 3); keep one",
    ]
    path.write_text(json.dumps({"tables": {"pit_max_entries": 10}}))
    assert load_config(path).tables.pit_max_entries == 10


def test_flags_added_to_a_file_are_not_given_the_files_lines(tmp_path: Path) -> None:
    """``icn fwd --config F --route ...`` checks the file's mapping with the flags' additions:
    a bad route from a flag is beyond the file's list, so it is not pointed at a line of F."""
    path = tmp_path / "fwd.yaml"
    path.write_text("routes:\n  - {prefix: /a, face: 'udp4://127.0.0.1:7000'}\n")
    data = read_config_mapping(path)
    data["faces"] = [{"uri": "udp4://127.0.0.1:7000"}]
    data["routes"] = [
        *data["routes"],
        {"prefix": "/sha256digest=ab", "face": "udp4://127.0.0.1:7000"},
    ]
    with pytest.raises(ProblemsError) as info:
        config_from_dict(data, str(path))
    (problem,) = info.value.problems
    assert (problem.loc, problem.line) == (("routes", 1, "prefix"), None)


def test_merge_keys_are_not_duplicates_and_point_at_the_key_written() -> None:
    doc = parse_yaml("base: &b {x: 1, y: 2}\nitem: {<<: *b, x: 3}\n")
    assert doc.data["item"] == {"x": 3, "y": 2}
    assert doc.duplicate_keys() == []
    assert doc.position(("item", "x")) == (2, 16)  # the override, not the anchor's x
    assert doc.position(("item", "y")) == (2, 1)  # merged in: the item itself
    assert doc.position(("nothing", 3)) == (1, 1)


def test_problem_formats() -> None:
    assert format_loc(("links", 0, "between", 1)) == "links[0].between[1]"
    assert Problem(("a", "b"), "bad").format("f.yaml") == "f.yaml: a.b: bad"
    assert Problem(("a",), "bad", 3).format("f.yaml") == "f.yaml:3: a: bad"
    assert Problem((), "bad", 3, 7).format("f.yaml") == "f.yaml:3:7: (top level): bad"
    assert (
        Problem((), "g.gml line 4: bad", file="g.gml").format("f.yaml")
        == "g.gml: g.gml line 4: bad"
    )
    err = ProblemsError("f.yaml", [Problem(("b",), "two", 9, 1), Problem(("a",), "one", 2, 5)])
    assert str(err) == "f.yaml: 2 problems\n  f.yaml:2:5: a: one\n  f.yaml:9:1: b: two"


def test_icn_fwd_with_a_bad_config_exits_2_with_the_lines(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(FORWARDER)
    ran = subprocess.run(
        [sys.executable, "-c", "from apps.cli import main; main()", "fwd", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert ran.returncode == 2, ran.stderr
    assert "Traceback" not in ran.stderr
    assert ran.stderr.startswith(f"error: {path}: 4 problems\n"), ran.stderr
    assert f"{path}:3:3: tables.pit_max_entrys: unknown field 'pit_max_entrys'" in ran.stderr


def test_a_scenario_nodes_forwarder_settings_are_told_by_the_forwarders_checker_at_their_lines(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: t\nnodes:\n  a:\n    forwarder:\n      tables: {pit_max_entrys: 5}\n"
        "      log_level: loud\n  b: {}\nlinks:\n  - {between: [a, b]}\n"
    )
    with pytest.raises(ProblemsError) as info:
        load_scenario(path, check_entries=False)
    assert [p.format("s.yaml") for p in info.value.problems] == [
        "s.yaml:5:16: nodes.a.forwarder.tables.pit_max_entrys: unknown field 'pit_max_entrys' "
        "(did you mean 'pit_max_entries'? valid fields: cs_max_bytes, cs_max_entries, "
        "dnl_lifetime_ms, dnl_max_entries, face_share, fib_max_entries, "
        "interest_lifetime_max_ms, local_reserve, pit_max_entries, reflexive_max_entries, "
        "rib_max_routes, strategy_choice_max_entries)",
        "s.yaml:6:7: nodes.a.forwarder.log_level: Input should be 'debug', 'info', 'warning' or "
        "'error' (got 'loud')",
    ]


def test_icn_flow_check_reports_every_function_that_does_not_import(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from apps.cli import app

    path = tmp_path / "g.yaml"
    path.write_text(
        "flow: /f\noperators:\n  - {name: g, type: generator, count: 3}\n"
        "  - {name: m, type: map, input: g, fn: 'apps.nothere:f'}\n"
        "  - {name: k, type: filter, input: m, fn: 'json:nofunc'}\n"
        "  - {name: s, type: stdout, input: k}\n"
    )
    ran = CliRunner().invoke(app, ["flow", "check", str(path)])
    assert ran.exit_code == 2, ran.output
    assert ran.output.splitlines() == [
        f"error: {path}: 2 problems",
        f"  {path}:4:36: operators[1].fn: cannot import 'apps.nothere' for apps.nothere:f: "
        "No module named 'apps.nothere'",
        f"  {path}:5:39: operators[2].fn: json has no function 'nofunc' (from json:nofunc)",
    ]


def test_flow_check_imports_functions_from_beside_the_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A graph next to its functions' module checks from any directory, without PYTHONPATH
    (as ``icn serve`` imports its module from the current directory)."""
    from typer.testing import CliRunner

    from apps.cli import app

    (tmp_path / "graphfns_beside.py").write_text("def double(x):\n    return 2 * x\n")
    path = tmp_path / "g.yaml"
    path.write_text(
        "flow: /f\noperators:\n  - {name: g, type: generator, count: 3}\n"
        "  - {name: m, type: map, input: g, fn: 'graphfns_beside:double'}\n"
        "  - {name: s, type: stdout, input: m}\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    ran = CliRunner().invoke(app, ["flow", "check", str(path)])
    assert ran.exit_code == 0, ran.output
