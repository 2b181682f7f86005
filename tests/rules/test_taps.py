"""Per-axis tap tables: PyTorch's nearest index tables, windows, transposes."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import tiinterp
from tests import oracle
from tests.tolerances import tolerance
from tiinterp._rules.taps import axis_taps


def dense(taps):
    a = np.zeros((taps.out_size, taps.in_size))
    for o in range(taps.out_size):
        np.add.at(a[o], taps.index[o, : taps.count[o]], taps.weight[o, : taps.count[o]])
    return a


def golden_index_rows(index_golden, mode):
    """Yield (in, out, PyTorch's index table) for every pair up to the stored max_size."""
    flat, offset, max_size = index_golden[mode], 0, int(index_golden["max_size"])
    for n_in in range(1, max_size + 1):
        for n_out in range(1, max_size + 1):
            yield n_in, n_out, flat[offset : offset + n_out]
            offset += n_out


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_nearest_index_tables_equal_pytorch_for_every_pair_up_to_200(golden, mode):
    index_golden = golden("nearest_index")
    assert int(index_golden["max_size"]) >= 200
    mismatched = []
    for n_in, n_out, expected in golden_index_rows(index_golden, mode):
        # The golden tables come from the 2-D op with float64 data at size (1, n_out).
        taps = axis_taps(n_in, n_out, mode, None, None, "float64", other_outputs=1)
        if not (np.all(taps.count == 1) and np.array_equal(taps.index[:, 0], expected)):
            mismatched.append((n_in, n_out))
    assert mismatched == []


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_nearest_float32_rule_differs_from_exact_integer_floor(golden, mode):
    """The golden tables really exercise PyTorch's float32 rounding: for some pairs the
    index differs from exact rational arithmetic (about 2% for nearest)."""
    differ = 0
    for n_in, n_out, expected in golden_index_rows(golden("nearest_index"), mode):
        dst = np.arange(n_out)
        num = dst * n_in if mode == "nearest" else (2 * dst + 1) * n_in
        den = n_out if mode == "nearest" else 2 * n_out
        differ += not np.array_equal(np.minimum(num // den, n_in - 1), expected)
    assert differ > 0


def test_nearest_index_through_the_public_api(arch, golden):
    """A sample of (in, out) pairs end to end: resizing a ramp 0..in-1 gives the indices."""
    index_golden = golden("nearest_index")
    rng = np.random.default_rng(7)
    rows = {
        mode: {(i, o): t for i, o, t in golden_index_rows(index_golden, mode)}
        for mode in ("nearest", "nearest-exact")
    }
    max_size = int(index_golden["max_size"])
    for n_in, n_out in rng.integers(1, max_size + 1, size=(40, 2)):
        ramp = np.arange(n_in, dtype=np.float64).reshape(1, 1, 1, n_in)
        for mode in rows:
            y = tiinterp.interpolate(ramp, size=(1, int(n_out)), mode=mode)
            np.testing.assert_array_equal(y[0, 0, 0], rows[mode][(n_in, n_out)])


MODE_ARGS = st.sampled_from(
    [
        ("nearest", None),
        ("nearest-exact", None),
        ("bilinear", False),
        ("bilinear", True),
        ("bicubic", False),
        ("bicubic", True),
        ("lanczos3", False),
        ("lanczos3", True),
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    n_in=st.integers(1, 64),
    n_out=st.integers(1, 64),
    mode_args=MODE_ARGS,
    factor=st.none() | st.floats(0.05, 8.0),
)
def test_table_equals_oracle_and_transpose_is_its_transpose(n_in, n_out, mode_args, factor):
    mode, align_corners = mode_args
    if factor is not None:
        n_out = int(np.floor(n_in * factor))
        assume(n_out >= 1)  # the public API rejects an empty output
    coord_factor = None if align_corners else factor
    taps = axis_taps(n_in, n_out, mode, align_corners, coord_factor, "float64")
    expected = oracle.axis_matrix(n_in, n_out, mode, bool(align_corners), coord_factor)
    np.testing.assert_allclose(dense(taps), expected, rtol=0, atol=tolerance("taps", "float64"))
    np.testing.assert_array_equal(dense(taps.transposed), dense(taps).T)
    # The transpose keeps every visit: transposing twice gives the visits back, row by row.
    again = taps.transposed.transposed
    np.testing.assert_array_equal(again.count, taps.count)
    for o in range(n_out):
        np.testing.assert_array_equal(
            again.index[o, : again.count[o]], taps.index[o, : taps.count[o]]
        )
        np.testing.assert_array_equal(
            again.weight[o, : again.count[o]], taps.weight[o, : taps.count[o]]
        )
