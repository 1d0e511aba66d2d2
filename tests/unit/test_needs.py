"""tests/needs.py: a missing dependency skips a test on a machine set up by hand and fails it
under CI (its set-up installs every one)."""

from __future__ import annotations

import pytest

from tests.needs import MARK, has_module, needs, pytest_runtest_setup, under_ci


@pytest.mark.parametrize(
    ("value", "ci"), [(None, False), ("", False), ("false", False), ("0", False), ("true", True)]
)
def test_ci_is_the_ci_variable_set_and_not_false(
    monkeypatch: pytest.MonkeyPatch, value: str | None, ci: bool
) -> None:
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    assert under_ci() is ci


def test_missing_is_skipped_by_hand_and_failed_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert needs(True, "x").name == "skipif" and needs(True, "x").args == (False,)
    skip = needs(False, "needs x")
    assert skip.name == "skip" and skip.kwargs["reason"] == "needs x"
    monkeypatch.setenv("CI", "true")
    assert needs(True, "x").name == "skipif"
    fail = needs(False, "needs x")
    assert fail.name == MARK and fail.args == ("needs x",)


def test_has_module_finds_without_importing() -> None:
    assert has_module("json") and not has_module("no_such_module_for_this_test")


def test_a_test_marked_missing_fails_at_its_set_up() -> None:
    class Item:
        def __init__(self, mark: pytest.MarkDecorator) -> None:
            self.mark = mark.mark

        def get_closest_marker(self, name: str) -> pytest.Mark | None:
            return self.mark if self.mark.name == name else None

    with pytest.raises(pytest.fail.Exception, match="needs x; under CI it must be there"):
        pytest_runtest_setup(Item(getattr(pytest.mark, MARK)("needs x")))  # type: ignore[arg-type]
    pytest_runtest_setup(Item(pytest.mark.slow))  # type: ignore[arg-type]
