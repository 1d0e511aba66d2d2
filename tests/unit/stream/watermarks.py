"""What the stream property tests share: the next watermark drawn after a step, and the window
starts that hold an event time, written plainly (no floor-division trick)."""

from __future__ import annotations

from hypothesis import strategies as st

from compute.stream.windows import WindowSpec


def next_watermark(
    draw: st.DrawFn,
    watermark: int,
    newest: int,
    size: int,
    *,
    choices: int,
    jump: int,
    edges: tuple[int, int],
) -> int:
    """After a step: unchanged (choice 0, and any past 3), behind the newest record (records
    out of order still in time), a jump past it (records after it are late), or on a window
    boundary, one ms either side.  Never backwards."""
    choice = draw(st.integers(0, choices - 1))
    if choice == 1:
        return max(watermark, newest - draw(st.integers(0, 30)))
    if choice == 2:
        return max(watermark, newest + draw(st.integers(0, jump)))
    if choice == 3:
        edge = newest - newest % size + draw(st.integers(*edges)) * size
        return max(watermark, edge + draw(st.sampled_from([-1, 0, 1])))
    return watermark


def starts_holding(spec: WindowSpec, t: int) -> list[int]:
    """Aligned starts s with s <= t < s + size, increasing."""
    first = t - spec.size_ms + 1
    first += -first % spec.slide
    return list(range(first, t + 1, spec.slide))
