"""The Vulkan device-type probe: real answers from this machine's loader, and a fake loader.

The fake loader is a set of ctypes callbacks behind a fake ``vkGetInstanceProcAddr``, so the
struct reading, the result codes and the instance's lifetime are checked on every machine,
with or without Vulkan.
"""

import ctypes
import ctypes.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

from tiinterp._runtime import vulkan_devices as vd
from tiinterp._runtime.taichi import BACKEND

MODULE = pathlib.Path(vd.__file__)
LAVAPIPE_ICD = pathlib.Path("/usr/share/vulkan/icd.d/lvp_icd.x86_64.json")
needs_lavapipe = pytest.mark.skipif(
    not LAVAPIPE_ICD.exists(), reason="Mesa's lavapipe ICD is not installed here"
)

VK_SUCCESS, VK_INCOMPLETE = 0, 5
VK_ERROR_INITIALIZATION_FAILED, VK_ERROR_INCOMPATIBLE_DRIVER = -3, -9


class FakeLoader:
    """A Vulkan loader made of Python callbacks; records what the probe asked of it."""

    def __init__(
        self, devices, create_result=VK_SUCCESS, enumerate_results=(), extensions=(), missing=()
    ):
        self.devices = list(devices)  # (VkPhysicalDeviceType value, name bytes)
        self.create_result = create_result
        self.enumerate_results = list(enumerate_results)  # forced results of fill calls
        self.extensions = list(extensions)
        self.missing = set(missing)
        self.created = []  # (flags, enabled extension names) per vkCreateInstance
        self.destroyed = []
        self.instance = 0x5151
        self._callbacks = {
            b"vkCreateInstance": vd._PFN_vkCreateInstance(self._create),
            b"vkDestroyInstance": vd._PFN_vkDestroyInstance(self._destroy),
            b"vkEnumeratePhysicalDevices": vd._PFN_vkEnumeratePhysicalDevices(self._enumerate),
            b"vkGetPhysicalDeviceProperties": vd._PFN_vkGetPhysicalDeviceProperties(
                self._properties
            ),
            b"vkEnumerateInstanceExtensionProperties": (
                vd._PFN_vkEnumerateInstanceExtensionProperties(self._extensions)
            ),
        }
        self.get_proc_addr = vd._PFN_vkGetInstanceProcAddr(self._get_proc_addr)

    def _get_proc_addr(self, instance, name):
        if name in self.missing or name not in self._callbacks:
            return None
        return ctypes.cast(self._callbacks[name], ctypes.c_void_p).value

    def _create(self, create_info, allocator, instance_out):
        info = vd._VkInstanceCreateInfo.from_address(create_info)
        names = [info.ppEnabledExtensionNames[i] for i in range(info.enabledExtensionCount)]
        self.created.append((info.flags, names))
        if self.create_result == VK_SUCCESS:
            instance_out[0] = self.instance
        return self.create_result

    def _destroy(self, instance, allocator):
        self.destroyed.append(instance)

    def _enumerate(self, instance, count, handles):
        assert instance == self.instance
        if not handles:
            count[0] = len(self.devices)
            return VK_SUCCESS
        written = min(count[0], len(self.devices))
        for i in range(written):
            ctypes.c_void_p.from_address(handles + i * ctypes.sizeof(ctypes.c_void_p)).value = (
                0x1000 + i
            )
        count[0] = written
        if self.enumerate_results:
            return self.enumerate_results.pop(0)
        return VK_SUCCESS if written == len(self.devices) else VK_INCOMPLETE

    def _properties(self, device, properties):
        device_type, name = self.devices[device - 0x1000]
        ctypes.memset(properties, 0xAB, 824)  # every byte of the real struct gets written
        ctypes.c_uint32.from_address(properties + 16).value = device_type
        ctypes.memmove(properties + 20, name + b"\0", len(name) + 1)

    def _extensions(self, layer, count, properties):
        if not properties:
            count[0] = len(self.extensions)
            return VK_SUCCESS
        array = ctypes.cast(properties, ctypes.POINTER(vd._VkExtensionProperties))
        for i, name in enumerate(self.extensions[: count[0]]):
            array[i].extensionName = name
        count[0] = min(count[0], len(self.extensions))
        return VK_SUCCESS


def run_probe_in_subprocess(
    tmp_path,
    extra_env,
    code="print(json.dumps([m.physical_devices(), m.has_hardware_vulkan_device()]))",
):
    """Run ``code`` as a script (Taichi kernels need a source file) with the module loaded
    from its file as ``m`` (no tiinterp, no Taichi import), in a fresh process."""
    env = {k: v for k, v in os.environ.items() if k not in ("VK_ICD_FILENAMES", "VK_DRIVER_FILES")}
    env.update(extra_env)
    script = (
        "import importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('vd', {str(MODULE)!r})\n"
        "m = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(m)\n" + code
    )
    path = tmp_path / "probe_script.py"
    path.write_text(script)
    done = subprocess.run(
        [sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


# ---- the fake loader: parsing, result codes, instance lifetime ------------------------------


def test_every_device_type_value_maps_to_its_name():
    loader = FakeLoader(
        [
            (2, b"Big GPU"),
            (1, b"Little GPU"),
            (3, b"vGPU"),
            (4, b"llvmpipe"),
            (0, b"Odd one"),
            (9, b"From a future spec"),
        ]
    )
    assert vd._query(loader.get_proc_addr, portability=False) == (
        ("discrete", "Big GPU"),
        ("integrated", "Little GPU"),
        ("virtual", "vGPU"),
        ("cpu", "llvmpipe"),
        ("other", "Odd one"),
        ("other", "From a future spec"),
    )
    assert loader.destroyed == [loader.instance]


def test_long_and_non_utf8_device_names():
    longest = b"n" * 255  # VK_MAX_PHYSICAL_DEVICE_NAME_SIZE less the terminating NUL
    loader = FakeLoader([(1, longest), (2, b"Caf\xe9 GPU")])
    assert vd._query(loader.get_proc_addr, portability=False) == (
        ("integrated", "n" * 255),
        ("discrete", "Caf\ufffd GPU"),
    )


def test_no_device_is_an_empty_answer_not_a_failure():
    loader = FakeLoader([])
    assert vd._query(loader.get_proc_addr, portability=False) == ()
    assert loader.destroyed == [loader.instance]


def test_incomplete_enumeration_is_retried():
    loader = FakeLoader([(4, b"a"), (2, b"b")], enumerate_results=[VK_INCOMPLETE])
    assert vd._query(loader.get_proc_addr, portability=False) == (("cpu", "a"), ("discrete", "b"))


def test_enumeration_that_keeps_failing_gives_none_and_still_destroys_the_instance():
    loader = FakeLoader([(2, b"x")], enumerate_results=[VK_ERROR_INITIALIZATION_FAILED])
    assert vd._query(loader.get_proc_addr, portability=False) is None
    assert loader.destroyed == [loader.instance]
    always_incomplete = FakeLoader([(2, b"x")], enumerate_results=[VK_INCOMPLETE] * 10)
    assert vd._query(always_incomplete.get_proc_addr, portability=False) is None
    assert always_incomplete.destroyed == [always_incomplete.instance]


def test_instance_creation_failure_gives_none():
    loader = FakeLoader([(2, b"x")], create_result=VK_ERROR_INCOMPATIBLE_DRIVER)
    assert vd._query(loader.get_proc_addr, portability=False) is None
    assert loader.destroyed == []


@pytest.mark.parametrize(
    "name", [b"vkCreateInstance", b"vkEnumeratePhysicalDevices", b"vkGetPhysicalDeviceProperties"]
)
def test_missing_entry_point_gives_none(name):
    loader = FakeLoader([(2, b"x")], missing={name})
    assert vd._query(loader.get_proc_addr, portability=False) is None
    if name == b"vkCreateInstance":
        assert loader.created == [] and loader.destroyed == []
    else:
        assert len(loader.created) == 1 and loader.destroyed == [loader.instance]


def test_instance_is_plain_unless_portability_is_asked_for_and_offered():
    offered = [b"VK_KHR_surface", b"VK_KHR_portability_enumeration"]
    loader = FakeLoader([(1, b"Apple M2")], extensions=offered)
    vd._query(loader.get_proc_addr, portability=False)
    vd._query(loader.get_proc_addr, portability=True)
    not_offered = FakeLoader([(1, b"x")], extensions=[b"VK_KHR_surface"])
    vd._query(not_offered.get_proc_addr, portability=True)
    assert loader.created == [(0, []), (1, [b"VK_KHR_portability_enumeration"])]
    assert not_offered.created == [(0, [])]


def test_probe_takes_the_first_library_that_answers(monkeypatch):
    loaders = {
        "broken": FakeLoader([], create_result=VK_ERROR_INCOMPATIBLE_DRIVER),
        "good": FakeLoader([(2, b"GPU")]),
        "later": FakeLoader([(4, b"cpu")]),
    }
    asked = []

    def load(name):
        asked.append(name)
        return loaders[name].get_proc_addr if name in loaders else None

    monkeypatch.setattr(vd, "_load_get_instance_proc_addr", load)
    assert vd._probe(["absent", "broken", "good", "later"]) == (("discrete", "GPU"),)
    assert asked == ["absent", "broken", "good"]
    assert vd._probe(["absent", "broken"]) is None


def test_probe_turns_exceptions_into_none(monkeypatch):
    def explode(name):
        raise ValueError("unexpected")

    monkeypatch.setattr(vd, "_load_get_instance_proc_addr", explode)
    assert vd._probe(["libvulkan.so.1"]) is None


# ---- libraries that are not a usable Vulkan loader ------------------------------------------


def test_missing_loader_library_gives_none(capfd):
    assert vd._probe(["libtiinterp-no-such-vulkan.so.1", "no-such-vulkan-1.dll"]) is None
    assert vd._probe([]) is None
    assert capfd.readouterr() == ("", "")


def test_library_without_vulkan_entry_points_gives_none():
    libc = ctypes.util.find_library("c") if sys.platform != "win32" else "kernel32.dll"
    assert libc is not None
    assert vd._probe([libc]) is None


@pytest.mark.parametrize("platform", ["linux", "darwin", "win32"])
def test_loader_names_per_platform(monkeypatch, platform):
    monkeypatch.setattr(sys, "platform", platform)
    names = vd._library_names()
    if platform == "linux":
        assert names == ("libvulkan.so.1",)
    elif platform == "win32":
        assert names == ("vulkan-1.dll",)
    else:
        # Taichi's own MoltenVK first (found without importing taichi), then system loaders.
        assert names[-3:] == ("libvulkan.1.dylib", "libvulkan.dylib", "libMoltenVK.dylib")
        bundled = names[:-3]
        assert len(bundled) == 1, names
        assert pathlib.Path(bundled[0]).parts[-4:] == (
            "taichi",
            "_lib",
            "runtime",
            "libMoltenVK.dylib",
        )


# ---- this machine's Vulkan loader ------------------------------------------------------------


def test_answers_agree_with_each_other():
    devices = vd.physical_devices()
    kinds = vd.physical_device_types()
    if devices is None:
        assert kinds is None and vd.has_hardware_vulkan_device() is True
        return
    assert kinds == tuple(kind for kind, _ in devices)
    assert set(kinds) <= set(vd.DEVICE_TYPES)
    assert all(isinstance(name, str) and name for _, name in devices)
    assert vd.has_hardware_vulkan_device() == any(kind != "cpu" for kind in kinds)


@needs_lavapipe
def test_lavapipe_is_found_and_is_a_cpu_device(tmp_path):
    if os.environ.get("VK_ICD_FILENAMES") or os.environ.get("VK_DRIVER_FILES"):
        # Drivers chosen by the caller need not include lavapipe: ask with the default ones.
        out, _ = run_probe_in_subprocess(tmp_path, {})
        devices = json.loads(out)[0]
    else:
        devices = vd.physical_devices()
    assert devices, devices
    llvmpipes = [kind for kind, name in devices if name.startswith("llvmpipe")]
    assert llvmpipes and set(llvmpipes) == {"cpu"}, devices


@needs_lavapipe
@pytest.mark.parametrize("variable", ["VK_ICD_FILENAMES", "VK_DRIVER_FILES"])
def test_lavapipe_alone_is_no_hardware_device(variable, tmp_path):
    out, err = run_probe_in_subprocess(tmp_path, {variable: str(LAVAPIPE_ICD)})
    (devices, hardware) = json.loads(out)
    assert len(devices) == 1 and devices[0][0] == "cpu", devices
    assert devices[0][1].startswith("llvmpipe"), devices
    assert hardware is False
    assert err == ""


def test_loader_without_drivers_gives_none_and_defers_to_taichi(tmp_path):
    no_driver = {"VK_ICD_FILENAMES": "/nonexistent/tiinterp_icd.json"}
    out, err = run_probe_in_subprocess(tmp_path, no_driver)
    assert json.loads(out) == [None, True]
    assert err == ""


def test_loader_chatter_is_silenced(tmp_path):
    """VK_LOADER_DEBUG=all makes the real loader write hundreds of lines to stderr itself."""
    out, err = run_probe_in_subprocess(
        tmp_path,
        {"VK_LOADER_DEBUG": "all"},
        code=(
            "import os\n"
            "print(json.dumps(m.physical_devices()), flush=True)\n"
            "os.write(2, b'stderr still works')"
        ),
    )
    json.loads(out)
    assert err == "stderr still works"


def test_probing_imports_no_taichi_and_leaves_the_environment_alone(tmp_path):
    out, err = run_probe_in_subprocess(
        tmp_path,
        {},
        code=(
            "import os\nbefore = dict(os.environ)\nm.physical_devices()\n"
            "print(json.dumps(['taichi' in sys.modules, dict(os.environ) == before]))"
        ),
    )
    assert json.loads(out) == [False, True]
    assert err == ""


def test_probe_prints_nothing(capfd):
    vd._probe(vd._library_names())
    assert capfd.readouterr() == ("", "")


def test_quiet_block_silences_c_level_writes_and_restores_them(capfd):
    libc = ctypes.CDLL(None) if sys.platform != "win32" else None
    with vd._quiet_std_fds():
        os.write(1, b"fd1 inside\n")
        os.write(2, b"fd2 inside\n")
        if libc is not None:
            libc.puts(b"C stdio inside")  # buffered by the C library, flushed on the way out
    os.write(1, b"fd1 after\n")
    os.write(2, b"fd2 after\n")
    out, err = capfd.readouterr()
    assert out == "fd1 after\n" and err == "fd2 after\n"


def test_result_is_probed_once(monkeypatch):
    calls = []

    def probe(names):
        calls.append(tuple(names))
        return (("discrete", "Counted GPU"),)

    vd.physical_devices.cache_clear()
    vd.physical_device_types.cache_clear()
    monkeypatch.setattr(vd, "_probe", probe)
    try:
        first = vd.physical_devices()
        assert vd.physical_devices() is first
        assert vd.physical_device_types() == ("discrete",)
        assert vd.has_hardware_vulkan_device() is True
        assert calls == [vd._library_names()]
    finally:
        vd.physical_devices.cache_clear()
        vd.physical_device_types.cache_clear()


@needs_lavapipe
def test_taichi_vulkan_still_works_around_the_probe(tmp_path):
    """Probe, start Taichi on Vulkan, probe again: the instances do not disturb each other."""
    out, _ = run_probe_in_subprocess(
        tmp_path,
        {"VK_ICD_FILENAMES": str(LAVAPIPE_ICD)},
        code=(
            "first = m.physical_devices()\n"
            f"import {BACKEND} as ti\n"
            "ti.init(arch=ti.vulkan, offline_cache=False, log_level=ti.ERROR)\n"
            "a = ti.ndarray(ti.f32, 4)\n"
            "@ti.kernel\n"
            "def fill(x: ti.types.ndarray()):\n"
            "    for i in x:\n"
            "        x[i] = i * 2.0\n"
            "fill(a)\n"
            "again = m._probe(m._library_names())\n"
            "fill(a)\n"
            "print(json.dumps([first, again, a.to_numpy().tolist(), "
            "str(ti.lang.impl.current_cfg().arch)]))"
        ),
    )
    first, again, values, arch = json.loads(out.strip().splitlines()[-1])
    assert first == again and first[0][0] == "cpu"
    assert values == [0.0, 2.0, 4.0, 6.0]
    assert arch.endswith("vulkan")
