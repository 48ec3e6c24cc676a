"""Optionals, null and dyn against every version's CEL oracle, error wording included.

1.37 runs on cel-go v0.29, 1.34-1.36 on v0.26, and the two interpreters differ exactly here: v0.29 refuses
``or()``/``orValue()`` on a receiver that is not an optional (v0.26 returns it), and v0.26 takes a variable's
optional value apart when it reads it (a nested optional flattens; a quantity or semver cannot be read back).
Random selectors and values from ``oracle_grammar.OptGen`` must get each version's verdict, cost estimate and,
for a runtime error or a single compile error, upstream's words (with several compile errors cel-go lists them
all in source order; gpuclaim reports one; type variables' numbers are not compared).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from oracle_compare import gpuclaim_eval, gpuclaim_match, same_cost, verdict
from oracle_grammar import devices, optional_expressions, optional_selectors

from e2e.oracle import gobuild
from e2e.oracle.jsonlines import OracleError
from e2e.oracle.versions import VERSIONS
from gpuclaim.cli import main
from gpuclaim.dra import cel
from gpuclaim.dra.quantity import parse_quantity
from gpuclaim.dra.semver import parse_semver

pytestmark = pytest.mark.timeout(1800)  # a cold build of an oracle takes minutes (docs/dev/upstream-oracle.md)
BUDGET = 1000

_SETTINGS = settings(max_examples=BUDGET, derandomize=True, deadline=None, database=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip


def _same_words(ours: dict[str, Any], theirs: dict[str, Any]) -> bool:
    if theirs.get("stage") == "runtime":
        return bool(ours.get("error") == theirs["error"])
    if theirs.get("stage") == "compile" and "\nERROR: " not in theirs["error"]:
        # the numbers of free type variables are the checker's own order of instantiation (open: gpuclaim's
        # differs inside nested optionals, `optional.of(optional.none()).?a` says _var0 where cel-go says _var1)
        return bool(_VAR.sub("_var", ours.get("error", "")) == _VAR.sub("_var", theirs["error"]))
    return True


_VAR = re.compile(r"_var\d+")


def _agree(oracle: Any, expr: str, device: cel.PlainDevice, op: str = "match") -> None:
    version = oracle.version_name
    if op == "eval":
        theirs, ours = oracle.eval(expr, device), gpuclaim_eval(expr, device, version=version)
    else:
        theirs, ours = oracle.match(expr, device), gpuclaim_match(expr, device, version=version)
    assert verdict(ours) == verdict(theirs), f"{expr!r}\n upstream: {theirs}\n gpuclaim: {ours}"
    assert same_cost(ours, theirs), f"{expr!r}: estimated cost {ours.get('maxCost')}, upstream {theirs['maxCost']}"
    assert _same_words(ours, theirs), f"{expr!r}\n upstream: {theirs['error']!r}\n gpuclaim: {ours['error']!r}"


@pytest.mark.parametrize("version", VERSIONS)
@_SETTINGS
@given(expr=optional_selectors(), device=devices())
def test_optional_null_and_dyn_selectors_agree_with_upstream(cel_oracles: Any, version: str, expr: str,
                                                             device: cel.PlainDevice) -> None:
    _agree(cel_oracles(version), expr, device)


@pytest.mark.parametrize("version", VERSIONS)
@settings(_SETTINGS, max_examples=BUDGET // 3)
@given(expr=optional_expressions(), device=devices())
def test_optional_null_and_dyn_values_agree_with_upstream(cel_oracles: Any, version: str, expr: str,
                                                          device: cel.PlainDevice) -> None:
    _agree(cel_oracles(version), expr, device, "eval")


H100 = cel.PlainDevice("gpu.nvidia.com", {"productName": "NVIDIA H100", "driverVersion": parse_semver("550.1.0")},
                       {"memory": parse_quantity("80Gi")})

# What a user writes: a capacity or version read once behind `.?` and bound. On 1.34-1.36 reading the variable
# fails (v0.26 cannot convert the Go quantity or version back); on 1.37 it works.
BOUND_OPTIONALS = [
    'cel.bind(m, device.capacity["gpu.nvidia.com"].?memory, m.orValue(quantity("0")).compareTo(quantity("40Gi")) >= 0)',
    'cel.bind(v, device.attributes["gpu.nvidia.com"].?driverVersion, v.hasValue() && '
    'v.value().isGreaterThan(semver("500.0.0")))',
    '[device.capacity["gpu.nvidia.com"].?memory].exists(m, m.value().isInteger())',
    'cel.bind(m, device.capacity["gpu.nvidia.com"].?memory, m.hasValue())',
    'cel.bind(m, optional.of(quantity("1")), m == optional.of(quantity("1")))',
    "cel.bind(y1, optional.of(optional.of(1)), y1.value().hasValue())",
    "cel.bind(y1, optional.of(optional.none()), y1.value() == null)",
    "[optional.of(optional.of(1))].transformList(i, x, x.value())[0].hasValue()",
]


@pytest.mark.parametrize("version", VERSIONS)
def test_variables_holding_optionals_read_as_each_version_reads_them(cel_oracles: Any, version: str) -> None:
    oracle = cel_oracles(version)
    for expr in BOUND_OPTIONALS:
        _agree(oracle, expr, H100)
    older = gpuclaim_match(BOUND_OPTIONALS[0], H100, version=version)
    if version == "1.37":
        assert older == {"matched": True, "maxCost": "20"}
    else:
        assert older["error"] == "unsupported conversion to ref.Val: (*resource.Quantity)80Gi"


# cel-go's homogeneous-literal validator takes the type parameter of an optional entry, which a dyn one has not:
# it panics (kube-apiserver answers 500 Internal error). gpuclaim refuses such a selector when it compiles it.
DYN_OPTIONAL_ENTRIES = ["[?dyn(optional.of(1))].size() == 1", '{?"a": dyn(null)}.size() == 1',
                        '[?device.attributes["gpu.nvidia.com"].productName].size() == 0',
                        "cel.bind(x, dyn(1), [?x].size() == 0)"]


@pytest.fixture
def fresh_oracles() -> Iterator[Any]:
    """An oracle process per call, for requests that make it panic (a panic leaves the stream out of step)."""
    from e2e.oracle.cel.client import CelOracle, binary

    started: list[Any] = []

    def start(version: str) -> Any:
        gobuild.require_go()
        started.append(CelOracle(binary(version), version=version))
        return started[-1]

    yield start
    for oracle in started:
        oracle.close()


@pytest.mark.parametrize("version", ["1.34", "1.37"])
@pytest.mark.parametrize("expr", DYN_OPTIONAL_ENTRIES)
def test_an_optional_entry_of_type_dyn_crashes_upstream_and_is_refused(fresh_oracles: Any, version: str,
                                                                       expr: str) -> None:
    with pytest.raises(OracleError, match=r"panic: runtime error: index out of range \[0\] with length 0"):
        fresh_oracles(version).match(expr, H100)
    ours = gpuclaim_match(expr, H100, version=version)
    assert ours["stage"] == "compile"
    assert re.search(r"an optional entry must have an optional type, not '(dyn|any)'", ours["error"])


def test_format_exempts_the_literal_and_the_entry_fails_at_run_time() -> None:
    # format()'s arguments are exempt from the homogeneous-literal validator: no crash, cel-go's run-time words
    with pytest.raises(cel.CelRuntimeError, match="cannot initialize optional list element from non-optional value 1"):
        cel.evaluate_expression('"%s".format([[?dyn(1)]])')


@pytest.mark.parametrize(("expr", "code", "out"), [
    ("optional.ofNonZeroValue(1u).hasValue()", 0, "true\n"),
    ("optional.ofNonZeroValue(0u).hasValue()", 0, "false\n"),
    ("cel.bind(y1, [type(null)][0], type(y1) == type(null))", 1,
     "compilation failed: program instantiation failed: reference to undefined type: y1\n"),
])
def test_once_internal_errors_now_answer(capsys: pytest.CaptureFixture[str], expr: str, code: int, out: str) -> None:
    """`gpuclaim cel` exited 4 ("internal error": a TypeError, a KeyError) on these before."""
    assert main(["cel", expr]) == code
    printed, _ = capsys.readouterr()
    assert printed == out


FIXTURES = Path(__file__).parents[2] / "fixtures"
CLASSES = str(FIXTURES / "deviceclasses/ALL-rendered-resource.k8s.io-v1.yaml")
P5_SLICES = str(FIXTURES / "resourceslices/aws-eks-p5-2nodes-8xH100-80GB-HBM3-nvidia.yaml")


@pytest.mark.parametrize(("version", "refused"), [("1.35", True), ("1.36", True), ("1.37", False)])
def test_lint_refuses_a_bound_optional_capacity_where_the_scheduler_cannot_read_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], version: str, refused: bool) -> None:
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "d"},
             "spec": {"devices": {"requests": [{"name": "r", "exactly": {
                 "deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {"expression": BOUND_OPTIONALS[0]}}]}}]}}}
    path = tmp_path / "claim.yaml"
    path.write_text(yaml.safe_dump(claim))
    code = main(["lint", str(path), CLASSES, "--slices", P5_SLICES, "--kubernetes-version", version, "-o", "json"])
    errors = [f for f in json.loads(capsys.readouterr().out) if f["severity"] == "error"]
    if refused:
        assert code == 1
        assert [f["field"] for f in errors] == ["spec.devices.requests[0].exactly.selectors[0].cel.expression"]
        assert "unsupported conversion to ref.Val: (*resource.Quantity)81559Mi" in errors[0]["message"]
    else:
        assert (code, errors) == (0, [])
