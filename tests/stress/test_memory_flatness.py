"""10,000 mixed small calls on the CPU (every resize mode, with and without antialias,
forward and backward, grid_sample and its backward, float32 and float64): the resident set
must not grow by more than 50 MiB between call 1,000 and call 10,000."""

import time

import numpy as np
import pytest

from tests.stress.calls import flatness_calls
from tests.stress.helpers import peak_rss_gib, release, reset_peak_rss, rss_mib

pytestmark = pytest.mark.stress

RSS_GROWTH_LIMIT_MIB = 50


def test_resident_memory_stays_flat_over_10000_calls(quick, rng, taichi_on, record_property):
    calls = flatness_calls(rng)
    total, warmup, every = (1000, 100, 100) if quick else (10_000, 500, 1000)
    taichi_on("cpu")
    order = rng.integers(len(calls), size=warmup + total)
    order[: len(calls)] = np.arange(len(calls))  # each distinct call compiled in the warm-up
    reset_peak_rss()
    for i in order[:warmup]:
        calls[i]()
    release()
    series = {0: rss_mib()}
    start = time.perf_counter()
    for n, i in enumerate(order[warmup:], 1):
        calls[i]()
        if n % every == 0:
            release()
            series[n] = rss_mib()
    seconds = time.perf_counter() - start
    growth = series[total] - series[every]
    record_property("calls", total)
    record_property("distinct_calls", len(calls))
    record_property("calls_per_second", total / seconds)
    record_property("rss_mib", series)
    record_property("growth_mib", growth)
    record_property("peak_rss_gib", peak_rss_gib())
    assert growth <= RSS_GROWTH_LIMIT_MIB, (
        f"RSS grew {growth:.1f} MiB from call {every} to {total}: {series}"
    )
