import pytest

from forwarder.table.limits import TableLimits
from icn.errors import ConfigError


def test_defaults() -> None:
    limits = TableLimits()
    assert limits.cs_max_entries == 65_536 and limits.dnl_lifetime == 6.0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("pit_max_entries", -1),
        ("fib_max_entries", 1.5),
        ("cs_max_bytes", True),
        ("dnl_lifetime", 0.01),
        ("dnl_lifetime", "6"),
        ("strategy_choice_max_entries", 0),
        ("face_share", 0),
        ("face_share", 1.5),
        ("face_share", "all"),
        ("local_reserve", 1),
        ("local_reserve", -0.5),
        ("interest_lifetime_max_ms", 0),
    ],
)
def test_bad_values_name_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=field):
        TableLimits(**{field: value})  # type: ignore[arg-type]
