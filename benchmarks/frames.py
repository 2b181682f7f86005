"""One step of a time-indexed field, sampled from a Taichi kernel: ``tiinterp.funcs.frame``
against a 2-D field of its own (issue 52).

A semi-Lagrangian smoke step on an n x n grid (DiffTaichi's ``smoke`` example's advection):
the velocity advects itself and the density, both read with ``sample_linear`` at
``(i, j) - velocity[i, j]``. Three ways to hold the steps:

- ``2-D fields``: each step in fields of its own (what a simulation that overwrites its
  state does; the reference);
- ``frame(f, t)``: every step in one ``[t, i, j]`` field, the step read through
  ``tiinterp.funcs.frame`` (what ``ti.ad`` needs: no state overwritten);
- ``3-D point``: the same ``[t, i, j]`` field read with a 3-D point ``(t, y, x)``, an
  integer time (the route the docs gave before ``frame``: trilinear, twice the reads).

Times the forward kernel and its ``ti.ad`` gradient kernel (``kernel.grad``), each the
median of ``--repeats`` launches after a warm-up, on ``--arch`` (default cpu), float32.
Prints milliseconds and each route's ratio to the 2-D fields.

    python benchmarks/frames.py [--size 512] [--steps 4] [--repeats 50] [--arch cpu]
"""

import argparse
import pathlib
import sys

import taichi as ti

import tiinterp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # harness.py

# isort: split
from harness import Timing, median_time

frame, sample_linear = tiinterp.funcs.frame, tiinterp.funcs.sample_linear


def build(n, steps, route):
    """(forward, gradient) launchers of one smoke step from step 1 to step 2."""
    shape = (steps, n, n) if route != "2-D fields" else (n, n)
    count = 1 if route != "2-D fields" else steps
    velocity = [ti.Vector.field(2, ti.f32, shape, needs_grad=True) for _ in range(count)]
    density = [ti.field(ti.f32, shape, needs_grad=True) for _ in range(count)]

    @ti.kernel
    def step_2d(u: ti.template(), d: ti.template(), u_next: ti.template(), d_next: ti.template()):
        for i, j in ti.ndrange(n, n):
            back = ti.Vector([i, j]) - u[i, j]
            u_next[i, j] = sample_linear(u, back, "periodic")
            d_next[i, j] = sample_linear(d, back, "periodic")

    @ti.kernel
    def step_frame(u: ti.template(), d: ti.template(), t: int):
        for i, j in ti.ndrange(n, n):
            back = ti.Vector([i, j]) - u[t, i, j]
            u[t + 1, i, j] = sample_linear(frame(u, t), back, "periodic")
            d[t + 1, i, j] = sample_linear(frame(d, t), back, "periodic")

    @ti.kernel
    def step_3d(u: ti.template(), d: ti.template(), t: int):
        for i, j in ti.ndrange(n, n):
            back = ti.Vector([i, j]) - u[t, i, j]
            point = ti.Vector([ti.cast(t, ti.f32), back[0], back[1]])
            u[t + 1, i, j] = sample_linear(u, point, "periodic")
            d[t + 1, i, j] = sample_linear(d, point, "periodic")

    for field in (*velocity, *density):
        field.fill(0.25)
    if route == "2-D fields":
        arguments = (velocity[1], density[1], velocity[2], density[2])
        return (lambda: step_2d(*arguments)), (lambda: step_2d.grad(*arguments))
    kernel = step_frame if route == "frame(f, t)" else step_3d
    return (lambda: kernel(velocity[0], density[0], 1)), (
        lambda: kernel.grad(velocity[0], density[0], 1)
    )


def median_ms(launch, repeats):
    """Median ms of exactly ``repeats`` launches, each followed by a sync, after 3 more."""
    return 1e3 * median_time(launch, Timing(repeats, 3, min_seconds=0.0), ti.sync)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--arch", default="cpu")
    args = parser.parse_args()
    tiinterp.init(args.arch)
    routes = ("2-D fields", "frame(f, t)", "3-D point")
    results = {}
    for route in routes:
        forward, gradient = build(args.size, args.steps, route)
        results[route] = (median_ms(forward, args.repeats), median_ms(gradient, args.repeats))
    print(f"smoke step, {args.size}^2, float32, arch {args.arch}, median of {args.repeats}")
    print(f"{'route':<12} {'forward ms':>11} {'ratio':>6} {'gradient ms':>12} {'ratio':>6}")
    base_forward, base_gradient = results["2-D fields"]
    for route, (forward, gradient) in results.items():
        print(
            f"{route:<12} {forward:11.3f} {forward / base_forward:6.3f} "
            f"{gradient:12.3f} {gradient / base_gradient:6.3f}"
        )


if __name__ == "__main__":
    main()
