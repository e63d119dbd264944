"""`mha_viz.budget.resident`, what the memory estimates are measured with: after a reset, the peak
sees a buffer written and freed inside the window (at least its size above the start), and a
window with no allocation stays near the start."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz.budget import resident

MB = 2**20


@pytest.fixture()
def can_reset():
    if not resident.reset_peak():
        pytest.skip("/proc/self/clear_refs cannot be written here: the peak is the process's whole one")


def test_the_peak_after_a_reset_sees_a_buffer_written_and_freed_inside_the_window(can_reset):
    resident.trim()
    start = resident.resident()
    assert resident.reset_peak()
    buf = np.ones(256 * MB // 8)  # written: every page resident
    del buf
    grew = resident.peak(True) - start
    assert grew >= 250 * MB, grew / MB
    assert resident.resident() - start < 128 * MB  # given back: the peak, not what stays, saw it


def test_a_window_without_allocation_keeps_the_peak_near_the_start(can_reset):
    resident.trim()
    start = resident.resident()
    assert resident.reset_peak()
    assert resident.peak(True) - start < 32 * MB
