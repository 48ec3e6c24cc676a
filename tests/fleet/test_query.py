"""The fleet API's query parameters: every accepted form, and every refusal naming its parameter."""

from __future__ import annotations

import string
from urllib.parse import quote, urlencode

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuclaim.dra.api import names
from gpuclaim.fleet import api


def test_accepted_parameters_become_filters() -> None:
    filters, since = api.parse_query(urlencode({
        "driver": "gpu.nvidia.com", "model": "H100", "namespace": "team-a", "since": "12",
        "nodeSelector": "nvidia.com/gpu.product in (A100, H100),zone=a"}))
    assert since == 12
    assert (filters.driver, filters.model, filters.namespace) == ("gpu.nvidia.com", "H100", "team-a")
    assert filters.node_selector == (("nvidia.com/gpu.product", "in", frozenset({"A100", "H100"})),
                                     ("zone", "=", frozenset({"a"})))
    assert filters.node_matches({"nvidia.com/gpu.product": "H100", "zone": "a"})
    assert not filters.node_matches({"nvidia.com/gpu.product": "T4", "zone": "a"})
    assert api.parse_query("") == (api.model.Filters(), None)


@pytest.mark.parametrize(("query", "parameter"), [
    ("driver=Not_A_Driver", "driver"), ("namespace=Team-A", "namespace"), ("since=-1", "since"),
    ("since=1e3", "since"), ("since=" + "9" * 19, "since"), ("nodeSelector=a%20in%20(b", "nodeSelector"),
    ("nodeSelector=novalue", "nodeSelector"), ("nodeSelector=a%20in%20()", "nodeSelector"),
    ("nodeSelector=a%20in%20(%20)", "nodeSelector"), ("nodeSelector=k=" + "v" * 64, "nodeSelector"),
    ("color=red", "color"), ("driver=a.b&driver=c.d", "driver"), ("model=" + "x" * 300, "model"),
    ("model=%00", "model"), ("driver=%ff", "query"), ("x" * 5000, "query"),
])
def test_bad_values_name_their_parameter(query: str, parameter: str) -> None:
    with pytest.raises(api.BadParameter) as info:
        api.parse_query(query)
    assert info.value.parameter == parameter
    assert str(info.value).startswith(f"{parameter}: ")


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([*api.PARAMETERS, "x", "", "driver[]"]),
                          st.text(string.printable + "\x00\u00e9\u202e()=,!", max_size=80)), max_size=7),
       st.booleans())
def test_any_query_string_is_accepted_or_refused_naming_a_parameter(pairs: list[tuple[str, str]],
                                                                     raw: bool) -> None:
    query = "&".join(f"{k}={v}" for k, v in pairs) if raw else urlencode(pairs, quote_via=quote)
    try:
        filters, since = api.parse_query(query)
    except api.BadParameter as exc:
        assert exc.parameter and str(exc).startswith(f"{exc.parameter}: ")
        return
    assert since is None or since >= 0
    assert filters.namespace is None or not names.check_dns1123_label(filters.namespace)
    assert filters.driver is None or not names.check_driver_name(filters.driver)
    for key, _, values in filters.node_selector or ():
        assert not names.check_label_key(key) and not any(names.check_label_value(v) for v in values)
