"""Regenerate the golden reference files in this folder from PyTorch, JAX, OpenCV,
ImageMagick and SciPy.

    pip install -e . --group reference   # torch==2.13.0 (CPU build), jax, opencv, scipy
    python tests/data/make_golden.py

Writes ``golden_resize.npz`` (forward outputs and input gradients for every geometry in
``tests/cases.py``; PyTorch for nearest/nearest-exact/bilinear/bicubic, JAX for lanczos3 with
half-pixel centres) and ``golden_nearest_index.npz`` (PyTorch's source index for every
(in, out) pair up to 200, both nearest modes, from the 2-D op) and
``golden_grid_sample.npz`` (F.grid_sample forward and both gradients for every case in
``tests/grid_cases.py``) and ``golden_resize_modes.npz`` (antialias, area, lanczos5, 1-D and
3-D cases of ``tests/cases_nd.py``, from PyTorch or JAX as each case names) and
``golden_opencv.npz``, ``golden_imagemagick.npz`` and ``golden_scipy.npz`` (``cv2.resize``,
ImageMagick's ``convert -resize`` and ``scipy.ndimage.zoom`` for the modes the registry says
match them; forward only; ImageMagick from the system: ``apt-get install
imagemagick-6.q16hdri``) and ``golden_scipy_spline.npz`` (``scipy.ndimage.map_coordinates(order=3)``
at the points of ``tests/spline_cases.py``) and ``golden_jax_scale_translate.npz``
(``jax.image.scale_and_translate`` and its ``jax.grad`` for ``tests/scale_translate_cases.py``).
The inputs
are regenerated from the seed, so the tests rebuild them exactly and only the results are
stored.
"""

import pathlib
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from tiinterp._rules.filters import REGISTRY  # noqa: E402

# isort: split
from tests.cases import (  # noqa: E402
    GEOMETRIES,
    batch_shape,
    case_key,
    golden_input_and_grad,
    mode_variants,
    output_hw,
)
from tests.cases_nd import (  # noqa: E402
    FORWARD_ONLY,
    forward_reference_cases,
    nd_cases,
    nd_inputs,
    nd_key,
)
from tests.grid_cases import grid_cases, grid_inputs, grid_key  # noqa: E402
from tests.scale_translate_cases import case_key as scale_translate_key  # noqa: E402
from tests.scale_translate_cases import (  # noqa: E402
    jax_values_and_gradients,
    scale_translate_cases,
)
from tests.spline_cases import SCIPY_MODES, spline_cases, spline_inputs, spline_key  # noqa: E402

MAX_INDEX_SIZE = 200


def torch_forward_backward(x, g, mode, align_corners, kwargs):
    import torch
    import torch.nn.functional as F

    xt = torch.from_numpy(x).requires_grad_(True)
    y = F.interpolate(xt, mode=mode, align_corners=align_corners, **kwargs)
    y.backward(torch.from_numpy(g))
    return y.detach().numpy(), xt.grad.numpy()


def nearest_indices(mode):
    import torch
    import torch.nn.functional as F

    # Through the 2-D op on purpose: PyTorch 2.13's 1-D nearest rounds differently for some
    # pairs (e.g. in=2, out=82, dst=41 gives 1 in 1-D and 0 in 2-D).
    rows = []
    for n_in in range(1, MAX_INDEX_SIZE + 1):
        x = torch.arange(n_in, dtype=torch.float64).reshape(1, 1, 1, n_in)
        for n_out in range(1, MAX_INDEX_SIZE + 1):
            y = F.interpolate(x, size=(1, n_out), mode=mode)
            rows.append(y[0, 0, 0].numpy().astype(np.int16))
    return np.concatenate(rows)


def torch_grid_sample(x, grid, g, mode, padding, align_corners, kind):
    """PyTorch's grid_sample and its gradients. NaN grids go through the 3-D op (a 2-D
    input as depth 1, z = 0): PyTorch's 2-D CPU kernel crashes on NaN with bilinear
    border/reflection padding, while the 3-D op follows the reference (CUDA) rules that
    tiinterp implements. Bicubic has no 3-D op: it uses the 2-D kernel, which is defined
    for NaN."""
    import torch
    import torch.nn.functional as F

    embed = kind == "nan" and x.ndim == 4 and mode != "bicubic"
    xt = torch.from_numpy(x[:, :, None] if embed else x).requires_grad_(True)
    gr = (
        np.concatenate([grid, np.zeros(grid.shape[:-1] + (1,), grid.dtype)], -1)[:, None]
        if embed
        else grid
    )
    gt = torch.from_numpy(np.ascontiguousarray(gr)).requires_grad_(True)
    y = F.grid_sample(xt, gt, mode=mode, padding_mode=padding, align_corners=align_corners)
    y.backward(torch.from_numpy(g[:, :, None] if embed else g))
    if embed:
        return (
            y.detach().numpy()[:, :, 0],
            xt.grad.numpy()[:, :, 0],
            gt.grad.numpy()[:, 0, ..., :2],
        )
    return y.detach().numpy(), xt.grad.numpy(), gt.grad.numpy()


def torch_resize_nd(x, g, name, align_corners, antialias, kwargs):
    import torch
    import torch.nn.functional as F

    xt = torch.from_numpy(x).requires_grad_(True)
    y = F.interpolate(xt, mode=name, align_corners=align_corners, antialias=antialias, **kwargs)
    y.backward(torch.from_numpy(g))
    return y.detach().numpy(), xt.grad.numpy()


def jax_resize_nd(x, g, method, antialias, kwargs):
    """jax.image.scale_and_translate with PyTorch's sample spacing (1 / scale_factor)."""
    import jax
    import jax.numpy as jnp

    spatial = x.shape[2:]
    out = output_hw(spatial, kwargs)
    if "size" in kwargs or kwargs.get("recompute_scale_factor"):
        scale = [o / i for o, i in zip(out, spatial, strict=True)]
    else:
        factors = kwargs["scale_factor"]
        scale = list(factors) if not np.isscalar(factors) else [factors] * len(spatial)
    axes = tuple(range(2, x.ndim))

    def resize(a):
        return jax.image.scale_and_translate(
            a,
            x.shape[:2] + tuple(out),
            axes,
            jnp.asarray(scale, a.dtype),
            jnp.zeros(len(axes), a.dtype),
            method=method,
            antialias=antialias,
        )

    y, vjp = jax.vjp(resize, jnp.asarray(x))
    return np.asarray(y), np.asarray(vjp(jnp.asarray(g))[0])


def opencv_resize(x, size, name):
    """``cv2.resize`` of each (N, C) plane of ``x`` to ``size`` (rows, columns)."""
    import cv2

    planes = [
        cv2.resize(plane, tuple(size[::-1]), interpolation=getattr(cv2, name))
        for plane in x.reshape(-1, *x.shape[2:])
    ]
    return np.stack(planes).reshape(x.shape[:2] + tuple(size))


def imagemagick_resize(x, size, name):
    """ImageMagick's ``convert -filter name -resize`` of each (N, C) plane of ``x``, through
    float TIFF files: an HDRI build (``convert-im6.q16hdri``, Debian's
    ``imagemagick-6.q16hdri``), which keeps negative and fractional samples."""
    import subprocess
    import tempfile

    import tifffile

    depth = str(x.dtype.itemsize * 8)
    planes = []
    with tempfile.TemporaryDirectory() as folder:
        source, target = f"{folder}/in.tif", f"{folder}/out.tif"
        for plane in x.reshape(-1, *x.shape[2:]):
            tifffile.imwrite(source, plane)
            geometry = f"{size[1]}x{size[0]}!"
            command = [IMAGEMAGICK, source, "-filter", name, "-resize", geometry]
            command += ["-define", "quantum:format=floating-point", "-depth", depth, target]
            # It writes the file and then complains about a TIFF tag (exit status 1).
            subprocess.run(command, capture_output=True, check=False)
            planes.append(tifffile.imread(target))
    return np.stack(planes).reshape(x.shape[:2] + tuple(size))


def scipy_zoom(x, size, mode, align_corners):
    """``scipy.ndimage.zoom(order=3, mode=mode)`` of each (N, C) plane of ``x`` to ``size``,
    in float64, on pixel centres (``grid_mode=True``) or aligned corners."""
    import scipy.ndimage

    zoom = np.array(size) / np.array(x.shape[2:])
    planes = [
        scipy.ndimage.zoom(
            plane.astype(np.float64), zoom, order=3, mode=mode, grid_mode=not align_corners
        )
        for plane in x.reshape(-1, *x.shape[2:])
    ]
    return np.stack(planes).reshape(x.shape[:2] + tuple(size))


def scipy_spline_samples():
    """``scipy.ndimage.map_coordinates(order=3)`` of every case SciPy gets right."""
    import scipy.ndimage

    values = {}
    for boundary, shape, against_scipy in spline_cases():
        if against_scipy:
            samples, points = spline_inputs(boundary, shape)
            values[spline_key(boundary, shape)] = scipy.ndimage.map_coordinates(
                samples, points.T, order=3, mode=SCIPY_MODES[boundary]
            )
    return values


IMAGEMAGICK = "convert-im6.q16hdri"
FORWARD = {
    "opencv": lambda x, size, name, _: opencv_resize(x, size, name),
    "imagemagick": lambda x, size, name, _: imagemagick_resize(x, size, name),
    "scipy": scipy_zoom,
}


def jax_scale_translate():
    """``golden_jax_scale_translate.npz``: ``jax.image.scale_and_translate`` for every case
    of ``tests/scale_translate_cases.py`` in float32 and float64 (``<case>|<dtype>|y``), and
    its float64 gradients (``<case>|float64|grad_image``, ``grad_scale``,
    ``grad_translation``). Also alone: ``python tests/data/make_golden.py
    jax_scale_translate`` (needs JAX only)."""
    arrays = {}
    for case in scale_translate_cases():
        key = scale_translate_key(case[0], *case[6:])
        for dtype in ("float32", "float64"):
            values, gradients = jax_values_and_gradients(case, dtype)
            arrays[f"{key}|{dtype}|y"] = values
            if gradients is not None:
                for name, gradient in zip(
                    ("image", "scale", "translation"), gradients, strict=True
                ):
                    arrays[f"{key}|{dtype}|grad_{name}"] = gradient
    np.savez_compressed(HERE / "golden_jax_scale_translate.npz", **arrays)
    return arrays


def main():
    import cv2
    import jax
    import scipy
    import torch

    jax.config.update("jax_enable_x64", True)
    torch.set_num_threads(1)
    golden = {}
    for geometry_id, hw, kwargs in GEOMETRIES:
        for mode, align_corners in mode_variants():
            for dtype in ("float32", "float64"):
                key = case_key(geometry_id, mode, align_corners, dtype)
                x, g = golden_input_and_grad(key, batch_shape(hw), kwargs, dtype)
                reference = REGISTRY[mode].reference(2, align_corners, False)
                if reference is None:
                    continue  # no library has the call (corner-aligned lanczos)
                if reference.library == "jax":
                    y, gx = jax_resize_nd(x, g, reference.name, False, kwargs)
                else:
                    y, gx = torch_forward_backward(x, g, reference.name, align_corners, kwargs)
                golden[key + "|y"] = y.astype(dtype)
                golden[key + "|gx"] = gx.astype(dtype)
    np.savez_compressed(HERE / "golden_resize.npz", **golden)
    nd = {}
    for (
        geometry_id,
        spatial,
        kwargs,
        mode,
        align_corners,
        antialias,
        reference,
        dtype,
    ) in nd_cases():
        if reference is None:
            continue
        key = nd_key(geometry_id, mode, align_corners, antialias, dtype)
        x, g = nd_inputs(key, spatial, kwargs, dtype)
        name = REGISTRY[mode].reference(len(spatial), align_corners, antialias).name
        if reference == "pytorch":
            y, gx = torch_resize_nd(x, g, name, align_corners, antialias, kwargs)
        else:
            y, gx = jax_resize_nd(x, g, name, antialias, kwargs)
        nd[key + "|y"], nd[key + "|gx"] = y.astype(dtype), gx.astype(dtype)
    np.savez_compressed(HERE / "golden_resize_modes.npz", **nd)
    forward = {library: {} for library in FORWARD_ONLY}
    for library, key, spatial, size, _, name, corners, _, dtype in forward_reference_cases():
        x, _ = nd_inputs(key, spatial, {"size": size}, dtype)
        forward[library][key] = FORWARD[library](x, size, name, corners).astype(dtype)
    for library, arrays in forward.items():
        np.savez_compressed(HERE / f"golden_{library}.npz", **arrays)
    grids = {}
    for case in grid_cases():
        key = grid_key(*case)
        _, mode, padding, align_corners, kind, dtype = case
        x, grid, g = grid_inputs(*case)
        for name, value in zip(
            ("y", "gx", "gg"),
            torch_grid_sample(x, grid, g, mode, padding, align_corners, kind),
            strict=True,
        ):
            grids[f"{key}|{name}"] = value.astype(dtype)
    np.savez_compressed(HERE / "golden_grid_sample.npz", **grids)
    splines = scipy_spline_samples()
    np.savez_compressed(HERE / "golden_scipy_spline.npz", **splines)
    np.savez_compressed(
        HERE / "golden_nearest_index.npz",
        **{m: nearest_indices(m) for m in ("nearest", "nearest-exact")},
        max_size=np.int64(MAX_INDEX_SIZE),
    )
    scale_translate = jax_scale_translate()
    print(
        f"wrote {len(golden)} + {len(nd)} + {sum(map(len, forward.values()))} + {len(grids)} "
        f"+ {len(splines)} + {len(scale_translate)} arrays; "
        f"torch {torch.__version__}, jax {jax.__version__}, opencv {cv2.__version__}, "
        f"scipy {scipy.__version__}"
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["jax_scale_translate"]:
        import jax

        print(f"wrote {len(jax_scale_translate())} arrays; jax {jax.__version__}")
    else:
        main()
