"""Runs test suites as separate processes, several at a time: `make test`'s and CI's runner.

    python tools/run_tests.py [--jobs N] [--dir DIR] [-- PYTEST_ARGS...]
    python tools/run_tests.py --jobs 2 --dir DIR --show-logs --suite NAME COMMAND ...

Compiling Taichi kernels, one core per process, is most of the suite's time, and no two archs
(nor the two Taichi backends) share a compiled kernel, so one pytest process per arch, as
many at a time as there are cores, is the quickest way through it.

Without ``--suite`` (``make test``): one pytest process per arch that tests/conftest.py would
test when TIINTERP_TEST_ARCHS is unset (every available arch, the CPU first), with
PYTEST_ARGS passed on to each. The tests that take no arch run in the first one (the CPU's),
as in CI; the others get TIINTERP_TEST_ARCH_INDEPENDENT=0. If TIINTERP_TEST_ARCHS is set,
this is one plain pytest run of those archs instead (CI runs ``TIINTERP_TEST_ARCHS=cpu make
test``). A suite in which pytest found nothing to run (exit status 5, all of its tests
deselected by PYTEST_ARGS) counts as passed unless every suite found nothing, as it would
in one pytest run over all archs.

With ``--suite NAME COMMAND`` (repeatable; .ci/run): those shell commands, in that order.

Each suite gets DIR/NAME/log (its output) and DIR/NAME/cache (its own Taichi offline cache,
TI_OFFLINE_CACHE_FILE_PATH; a persistent DIR keeps kernels compiled between runs); the
pytest suites also keep their own pytest cache there, so ``--lf`` reruns each arch's
failures. What each suite runs is printed first, a summary (exit status and time of each
suite) last, then the end of each failing suite's log (the whole of every log with
``--show-logs``); the exit status is 1 if any suite failed (5 if nothing ran in any).
Ctrl-C stops every suite.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import pathlib
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

ROOT = pathlib.Path(__file__).resolve().parent.parent
NO_TESTS_RAN = 5  # pytest's exit status when nothing was collected or all was deselected
# Printed by the probe, so that its answer is told apart from anything Taichi prints.
MARKER = "tiinterp-run-tests:"
# The archs tests/conftest.py tests when TIINTERP_TEST_ARCHS is unset, asked of conftest.py
# itself (every available one, the CPU first), and the Taichi backend tiinterp chose. In a
# separate process: tiinterp imports Taichi.
PROBE = f"""
from tests.conftest import _test_archs  # first: it sets the environment for Taichi
import tiinterp
print("{MARKER}", tiinterp.taichi_module().__name__, ",".join(_test_archs()))
"""
PROBE_TIMEOUT_S = 300


@dataclasses.dataclass
class Suite:
    name: str
    command: list[str]
    env: dict[str, str]  # set for this suite, on top of the environment
    shown: str  # the command as printed
    pytest: bool  # exit status 5 means "nothing to run", not a failure
    directory: pathlib.Path
    start: float = 0.0
    seconds: float = 0.0
    status: int | None = None

    @property
    def log(self) -> pathlib.Path:
        return self.directory / "log"


def suite_directory(base: pathlib.Path, name: str) -> pathlib.Path:
    return base / name.replace(" ", "_")


def available_cpus() -> int:
    """The cores this process may run on (what `nproc` says), or the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def probe() -> tuple[str, list[str]]:
    """The Taichi backend tiinterp chooses here and the archs conftest.py would test."""
    try:
        run = subprocess.run(
            [sys.executable, "-c", PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            cwd=ROOT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        sys.exit(f"run_tests: finding the available archs took over {PROBE_TIMEOUT_S} s")
    for line in run.stdout.splitlines():
        if line.startswith(MARKER):
            backend, archs = line[len(MARKER) :].split()
            return backend, archs.split(",")
    sys.exit(
        f"run_tests: could not find the archs to test (exit status {run.returncode} from"
        f" {sys.executable} -c {PROBE!r}):\n{run.stdout}{run.stderr}"
    )


def arch_suites(base: pathlib.Path, pytest_args: Sequence[str]) -> list[Suite]:
    backend, archs = probe()
    print(f"Taichi backend: {backend}; archs available here: {', '.join(archs)}")
    arch_independent = os.environ.get("TIINTERP_TEST_ARCH_INDEPENDENT", "1")
    suites = []
    for index, arch in enumerate(archs):
        env = {
            "TIINTERP_TAICHI": backend,
            "TIINTERP_TEST_ARCHS": arch,
            "TIINTERP_TEST_ARCH_INDEPENDENT": arch_independent if index == 0 else "0",
        }
        name = f"{backend} {arch}"
        directory = suite_directory(base, name)
        cache = f"cache_dir={directory / 'pytest_cache'}"
        command = [sys.executable, "-m", "pytest", "-o", cache, *pytest_args]
        suites.append(Suite(name, command, env, shlex.join(command), True, directory))
    return suites


def shell_suites(base: pathlib.Path, specs: Sequence[Sequence[str]]) -> list[Suite]:
    return [
        Suite(name, ["bash", "-c", command], {}, command, False, suite_directory(base, name))
        for name, command in specs
    ]


def start(suite: Suite) -> subprocess.Popen[bytes]:
    suite.directory.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **suite.env, "TI_OFFLINE_CACHE_FILE_PATH": str(suite.directory / "cache")}
    with suite.log.open("wb") as log:
        # A session of its own: Ctrl-C reaches this runner only, which stops each suite's
        # whole process group (a shell command's make and pytest included).
        process = subprocess.Popen(
            suite.command,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # SIGINT stops a suite (see stop), even where this runner was started with it
            # ignored (as `cmd &` in a script does), which its children would inherit.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    suite.start = time.monotonic()
    print(f"started: {suite.name}", flush=True)
    return process


def signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signum)


def stop(processes: Sequence[subprocess.Popen[bytes]]) -> None:
    """SIGINT first (pytest then reports what it ran), SIGKILL after 10 s."""
    for process in processes:
        signal_group(process, signal.SIGINT)
    deadline = time.monotonic() + 10
    for process in processes:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            signal_group(process, signal.SIGKILL)
            process.wait()


def run_all(suites: Sequence[Suite], jobs: int) -> None:
    pending = list(suites)
    running: list[tuple[Suite, subprocess.Popen[bytes]]] = []
    try:
        while pending or running:
            while pending and len(running) < jobs:
                suite = pending.pop(0)
                running.append((suite, start(suite)))
            time.sleep(0.2)
            for suite, process in list(running):
                status = process.poll()
                if status is not None:
                    suite.status = status
                    suite.seconds = time.monotonic() - suite.start
                    running.remove((suite, process))
                    print(f"finished: {suite.name}, {describe(suite)}", flush=True)
    except BaseException:
        print("\nstopping the suites still running", file=sys.stderr, flush=True)
        stop([process for _, process in running])
        raise


def describe(suite: Suite) -> str:
    if suite.status is None:
        return "not run"
    nothing = " (no tests ran)" if suite.pytest and suite.status == NO_TESTS_RAN else ""
    return f"exit {suite.status}{nothing}, {suite.seconds:.0f} s"


def failed(suites: Sequence[Suite]) -> list[Suite]:
    """The suites that failed; one pytest run over all archs fails with status 5 only when
    nothing ran in any of them."""
    if all(s.pytest and s.status == NO_TESTS_RAN for s in suites):
        return list(suites)
    ok = {0, NO_TESTS_RAN}
    return [s for s in suites if s.status not in (ok if s.pytest else {0})]


def tail(path: pathlib.Path, lines: int) -> str:
    text = path.read_text(errors="replace").splitlines()
    return "\n".join(text[-lines:])


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    own, pytest_args = list(argv), []
    if "--" in own:
        index = own.index("--")
        own, pytest_args = own[:index], own[index + 1 :]
    parser = argparse.ArgumentParser(
        description="Run the test suite as one pytest process per arch, several at a time, "
        "or the suites given with --suite.",
        usage="%(prog)s [options] [-- PYTEST_ARGS...]",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=available_cpus(),
        help="suites run at a time (default: the cores available, %(default)s)",
    )
    parser.add_argument(
        "--dir",
        type=pathlib.Path,
        default=ROOT / "build" / "test-suites",
        help="where each suite's log and Taichi cache go (default: build/test-suites)",
    )
    parser.add_argument(
        "--suite",
        nargs=2,
        action="append",
        metavar=("NAME", "COMMAND"),
        help="run this shell command as a suite (repeatable, run in the order given) "
        "instead of one pytest process per arch",
    )
    parser.add_argument(
        "--show-logs", action="store_true", help="print every suite's whole log at the end"
    )
    parser.add_argument(
        "--tail", type=int, default=60, help="lines shown of a failing suite's log (default 60)"
    )
    args = parser.parse_args(own)
    if args.jobs < 1:
        parser.error(f"--jobs: expected a positive number, got {args.jobs}")
    if args.tail < 1:
        parser.error(f"--tail: expected a positive number, got {args.tail}")
    if args.suite and pytest_args:
        parser.error(f"pytest arguments go with the per-arch suites, not --suite: {pytest_args}")
    return args, pytest_args


def main(argv: Sequence[str]) -> int:
    args, pytest_args = parse(argv)
    if not args.suite and os.environ.get("TIINTERP_TEST_ARCHS", "").strip():
        command = [sys.executable, "-m", "pytest", *pytest_args]
        print(f"TIINTERP_TEST_ARCHS={os.environ['TIINTERP_TEST_ARCHS']} {shlex.join(command)}")
        sys.stdout.flush()
        os.chdir(ROOT)
        os.execv(command[0], command)

    directory = args.dir.resolve()
    if args.suite:
        suites = shell_suites(directory, args.suite)
    else:
        suites = arch_suites(directory, pytest_args)
    jobs = min(args.jobs, len(suites))
    print(f"{len(suites)} test suites, {jobs} at a time; logs and Taichi caches in {directory}:")
    for suite in suites:
        env = " ".join(f"{key}={shlex.quote(value)}" for key, value in suite.env.items())
        print(f"  {suite.name}: {env + ' ' if env else ''}{suite.shown}")
        print(f"  {' ' * len(suite.name)}  log: {suite.log}")
    sys.stdout.flush()

    started = time.monotonic()
    # CI's job runner and `kill` send SIGTERM: stop the suites too rather than orphan them.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        run_all(suites, jobs)
    except KeyboardInterrupt:
        return 130
    seconds = time.monotonic() - started

    if args.show_logs:
        for suite in suites:
            print(f"\n=== test suite: {suite.name} ({suite.shown})")
            print(suite.log.read_text(errors="replace"), end="", flush=True)
    summary = [f"test suites, {jobs} at a time: {seconds:.0f} s"]
    summary += [f"    {suite.name}: {describe(suite)}" for suite in suites]
    (directory / "summary").write_text("\n".join(summary) + "\n")
    print("\n=== summary\n" + "\n".join(summary), flush=True)

    failures = failed(suites)
    if not args.show_logs:
        for suite in failures:
            print(f"\n=== {suite.name}: the last {args.tail} lines of {suite.log}")
            print(tail(suite.log, args.tail), flush=True)
    if failures:
        names = "; ".join(f"{suite.name}: {describe(suite)}" for suite in failures)
        print(f"ERROR: test suites failed: {names}", file=sys.stderr)
        statuses = {suite.status for suite in failures}
        return NO_TESTS_RAN if statuses == {NO_TESTS_RAN} else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
