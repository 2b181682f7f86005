"""What kinds of Vulkan physical devices this machine has, asked without initialising Taichi.

Taichi counts Vulkan as available whenever a Vulkan instance lists a device with a compute
queue, and that includes software rasterisers that run on the CPU: Mesa's lavapipe
(llvmpipe), Google's SwiftShader. Such a device is several times slower than Taichi's own CPU
backend (about 7x measured with lavapipe), and Taichi has no ndarray autodiff on Vulkan, so
"auto" and "gpu" must not treat it as a GPU. The Vulkan spec lets a driver say what it is:
``VkPhysicalDeviceProperties::deviceType`` is a ``VkPhysicalDeviceType``
(Vulkan 1.0 spec, "Physical Devices")::

    VK_PHYSICAL_DEVICE_TYPE_OTHER          = 0
    VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU = 1
    VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU   = 2
    VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU    = 3
    VK_PHYSICAL_DEVICE_TYPE_CPU            = 4

and software rasterisers report ``VK_PHYSICAL_DEVICE_TYPE_CPU``. This module reads it through
ctypes from the Vulkan loader: one short-lived ``VkInstance`` (API 1.0, no layers),
``vkEnumeratePhysicalDevices``, ``vkGetPhysicalDeviceProperties`` per device,
``vkDestroyInstance``. It only reads the environment, so ``VK_ICD_FILENAMES`` /
``VK_DRIVER_FILES`` / ``VK_LOADER_*`` select drivers here exactly as they do for Taichi.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
import os
import sys
import threading
from collections.abc import Iterator, Sequence

# VkPhysicalDeviceType values (Vulkan spec); a value a future spec adds counts as "other".
_DEVICE_TYPE_NAMES = {0: "other", 1: "integrated", 2: "discrete", 3: "virtual", 4: "cpu"}
DEVICE_TYPES = ("discrete", "integrated", "virtual", "cpu", "other")

_VK_SUCCESS = 0
_VK_INCOMPLETE = 5
_VK_STRUCTURE_TYPE_APPLICATION_INFO = 0
_VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 1
_VK_API_VERSION_1_0 = 1 << 22
_VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR = 0x1
_PORTABILITY_ENUMERATION = b"VK_KHR_portability_enumeration"

# Two threads swapping fds 1 and 2 at once could each restore the other's null device and
# silence the process for good; probes take turns.
_STD_FDS_LOCK = threading.Lock()

# VkPhysicalDeviceProperties: apiVersion, driverVersion, vendorID, deviceID (4 x uint32) come
# before deviceType, then char deviceName[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE].
_DEVICE_TYPE_OFFSET = 16
_DEVICE_NAME_OFFSET = 20
_DEVICE_NAME_SIZE = 256
# The struct is 824 bytes on 64-bit platforms (its limits are the bulk); a driver writes all
# of it, so the buffer is far larger than needed rather than exactly sized, and 8-byte
# aligned for its 64-bit members.
_PROPERTIES_WORDS = 512

# Enumerations retry when devices appear between the count call and the fill call.
_ENUMERATE_ATTEMPTS = 4

# Vulkan's entry points use the platform's "system" calling convention: stdcall on 32-bit
# Windows, the C convention everywhere else.
if sys.platform == "win32":
    _FUNCTYPE = ctypes.WINFUNCTYPE
else:
    _FUNCTYPE = ctypes.CFUNCTYPE
_PFN_vkGetInstanceProcAddr = _FUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)
_PFN_vkEnumerateInstanceExtensionProperties = _FUNCTYPE(
    ctypes.c_int32, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint32), ctypes.c_void_p
)
_PFN_vkCreateInstance = _FUNCTYPE(
    ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
)
_PFN_vkEnumeratePhysicalDevices = _FUNCTYPE(
    ctypes.c_int32, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32), ctypes.c_void_p
)
_PFN_vkGetPhysicalDeviceProperties = _FUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
_PFN_vkDestroyInstance = _FUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


class _VkApplicationInfo(ctypes.Structure):
    _fields_ = [
        ("sType", ctypes.c_int32),
        ("pNext", ctypes.c_void_p),
        ("pApplicationName", ctypes.c_char_p),
        ("applicationVersion", ctypes.c_uint32),
        ("pEngineName", ctypes.c_char_p),
        ("engineVersion", ctypes.c_uint32),
        ("apiVersion", ctypes.c_uint32),
    ]


class _VkInstanceCreateInfo(ctypes.Structure):
    _fields_ = [
        ("sType", ctypes.c_int32),
        ("pNext", ctypes.c_void_p),
        ("flags", ctypes.c_uint32),
        ("pApplicationInfo", ctypes.POINTER(_VkApplicationInfo)),
        ("enabledLayerCount", ctypes.c_uint32),
        ("ppEnabledLayerNames", ctypes.POINTER(ctypes.c_char_p)),
        ("enabledExtensionCount", ctypes.c_uint32),
        ("ppEnabledExtensionNames", ctypes.POINTER(ctypes.c_char_p)),
    ]


class _VkExtensionProperties(ctypes.Structure):
    _fields_ = [("extensionName", ctypes.c_char * 256), ("specVersion", ctypes.c_uint32)]


def _library_names() -> tuple[str, ...]:
    """Where the Vulkan entry points live on this platform, the ones Taichi uses first."""
    if sys.platform == "win32":
        return ("vulkan-1.dll",)
    if sys.platform == "darwin":
        names = []
        # Taichi's macOS wheel ships MoltenVK and loads it directly, not through a system
        # loader; find_spec locates the package without importing (initialising) it.
        try:
            spec = importlib.util.find_spec("taichi")
            for location in (spec.submodule_search_locations or ()) if spec else ():
                names.append(os.path.join(location, "_lib", "runtime", "libMoltenVK.dylib"))
        except Exception:  # a broken taichi install only loses that candidate
            pass
        return (*names, "libvulkan.1.dylib", "libvulkan.dylib", "libMoltenVK.dylib")
    return ("libvulkan.so.1",)


def _load_get_instance_proc_addr(name: str):
    """``vkGetInstanceProcAddr`` of the library ``name``, or None where it has none."""
    if sys.platform == "win32":
        loader = ctypes.WinDLL
    else:
        loader = ctypes.CDLL
    try:
        library = loader(name)
        address = ctypes.cast(library.vkGetInstanceProcAddr, ctypes.c_void_p).value
    except (OSError, AttributeError):
        return None
    return _PFN_vkGetInstanceProcAddr(address) if address else None


def _instance_extensions(get_proc_addr) -> set[bytes]:
    """Names of the instance extensions on offer; empty when they cannot be listed."""
    address = get_proc_addr(None, b"vkEnumerateInstanceExtensionProperties")
    if not address:
        return set()
    enumerate_extensions = _PFN_vkEnumerateInstanceExtensionProperties(address)
    for _ in range(_ENUMERATE_ATTEMPTS):
        count = ctypes.c_uint32(0)
        if enumerate_extensions(None, ctypes.byref(count), None) != _VK_SUCCESS:
            return set()
        extensions = (_VkExtensionProperties * max(count.value, 1))()
        result = enumerate_extensions(None, ctypes.byref(count), extensions)
        if result == _VK_SUCCESS:
            return {extensions[i].extensionName for i in range(count.value)}
        if result != _VK_INCOMPLETE:
            return set()
    return set()


def _query(get_proc_addr, portability: bool) -> tuple[tuple[str, str], ...] | None:
    """(type, name) of each physical device behind ``get_proc_addr``, or None on any failure.

    ``portability``: ask for portability-only drivers too (VK_KHR_portability_enumeration),
    which a Vulkan loader on macOS otherwise hides, MoltenVK among them.
    """
    create_instance_address = get_proc_addr(None, b"vkCreateInstance")
    if not create_instance_address:
        return None
    app_info = _VkApplicationInfo(
        sType=_VK_STRUCTURE_TYPE_APPLICATION_INFO,
        pApplicationName=b"tiinterp device probe",
        pEngineName=b"tiinterp",
        apiVersion=_VK_API_VERSION_1_0,
    )
    create_info = _VkInstanceCreateInfo(
        sType=_VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, pApplicationInfo=ctypes.pointer(app_info)
    )
    extension_names = (ctypes.c_char_p * 1)(_PORTABILITY_ENUMERATION)
    if portability and _PORTABILITY_ENUMERATION in _instance_extensions(get_proc_addr):
        create_info.flags = _VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR
        create_info.enabledExtensionCount = 1
        create_info.ppEnabledExtensionNames = extension_names
    instance = ctypes.c_void_p()
    if (
        _PFN_vkCreateInstance(create_instance_address)(
            ctypes.byref(create_info), None, ctypes.byref(instance)
        )
        != _VK_SUCCESS
    ):
        return None
    if not instance.value:
        return None
    # Looked up before use so that an instance is always destroyed once it exists.
    destroy_address = get_proc_addr(instance, b"vkDestroyInstance")
    try:
        return _devices(get_proc_addr, instance)
    finally:
        if destroy_address:
            _PFN_vkDestroyInstance(destroy_address)(instance, None)


def _devices(get_proc_addr, instance) -> tuple[tuple[str, str], ...] | None:
    enumerate_address = get_proc_addr(instance, b"vkEnumeratePhysicalDevices")
    properties_address = get_proc_addr(instance, b"vkGetPhysicalDeviceProperties")
    if not enumerate_address or not properties_address:
        return None
    enumerate_devices = _PFN_vkEnumeratePhysicalDevices(enumerate_address)
    get_properties = _PFN_vkGetPhysicalDeviceProperties(properties_address)
    for _ in range(_ENUMERATE_ATTEMPTS):
        count = ctypes.c_uint32(0)
        if enumerate_devices(instance, ctypes.byref(count), None) != _VK_SUCCESS:
            return None
        handles = (ctypes.c_void_p * max(count.value, 1))()
        result = enumerate_devices(instance, ctypes.byref(count), handles)
        if result == _VK_SUCCESS:
            break
        if result != _VK_INCOMPLETE:
            return None
    else:
        return None
    devices = []
    for handle in handles[: count.value]:
        properties = (ctypes.c_uint64 * _PROPERTIES_WORDS)()
        get_properties(handle, properties)
        device_type = ctypes.c_uint32.from_buffer(properties, _DEVICE_TYPE_OFFSET).value
        raw_name = ctypes.string_at(
            ctypes.addressof(properties) + _DEVICE_NAME_OFFSET, _DEVICE_NAME_SIZE
        )
        name = raw_name.split(b"\0", 1)[0].decode("utf-8", errors="replace")
        devices.append((_DEVICE_TYPE_NAMES.get(device_type, "other"), name))
    return tuple(devices)


def _flush_c_stdio() -> None:
    # A driver's printf sits in the C library's buffer; flushing decides which fd it reaches.
    if sys.platform == "win32":
        return  # the driver's C runtime need not be the one ctypes would find
    with contextlib.suppress(Exception):  # no C library to flush: nothing to lose
        ctypes.CDLL(None).fflush(None)


@contextlib.contextmanager
def _quiet_std_fds() -> Iterator[None]:
    """Send whatever C code writes to fds 1 and 2 to the null device for the block's duration.

    Vulkan loaders and drivers write diagnostics of their own (a loader error about a broken
    ICD, "not a conformant implementation" notices) straight to the process's stdout/stderr,
    which Python's stream objects cannot intercept. Output that other threads write to those
    fds while the block runs (the probe: about 0.1 s with lavapipe) is lost with it.
    """
    with _STD_FDS_LOCK:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed or replaced stream
                stream.flush()
        _flush_c_stdio()
        saved = []
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
        except OSError:
            devnull = None
        try:
            for fd in (1, 2):
                if devnull is None:
                    break
                try:
                    copy = os.dup(fd)
                except OSError:
                    continue  # fd not open: nothing to protect
                saved.append((fd, copy))
                os.dup2(devnull, fd)
            yield
        finally:
            _flush_c_stdio()
            for fd, copy in reversed(saved):
                os.dup2(copy, fd)
                os.close(copy)
            if devnull is not None:
                os.close(devnull)


def _probe(
    library_names: Sequence[str], portability: bool = sys.platform == "darwin"
) -> tuple[tuple[str, str], ...] | None:
    """Uncached :func:`physical_devices` over the candidate loader libraries ``library_names``.

    The first library that answers wins; a library that is missing, is not a Vulkan loader or
    whose Vulkan calls fail passes the question to the next one.
    """
    try:
        with _quiet_std_fds():
            for name in library_names:
                get_proc_addr = _load_get_instance_proc_addr(name)
                if get_proc_addr is None:
                    continue
                devices = _query(get_proc_addr, portability)
                if devices is not None:
                    return devices
    except Exception:  # ctypes and os errors alike: "cannot tell", never a failure of the caller
        return None
    return None


@functools.lru_cache(maxsize=1)
def physical_devices() -> tuple[tuple[str, str], ...] | None:
    """``(type, name)`` of every Vulkan physical device, in the loader's order; probed once.

    ``type`` is one of :data:`DEVICE_TYPES` (``"discrete"``, ``"integrated"``, ``"virtual"``,
    ``"cpu"``, ``"other"``), from ``VkPhysicalDeviceProperties::deviceType``; ``name`` is its
    ``deviceName``, e.g. ``("cpu", "llvmpipe (LLVM 15.0.6, 256 bits)")`` for Mesa's lavapipe.
    ``()`` when Vulkan works but lists no device; ``None`` when the Vulkan loader cannot be
    loaded or a Vulkan call fails. Never raises and writes nothing to stdout or stderr, not
    even what the loader or a driver would print.
    """
    return _probe(_library_names())


@functools.lru_cache(maxsize=1)
def physical_device_types() -> tuple[str, ...] | None:
    """The ``type`` of each of :func:`physical_devices`, e.g. ``("cpu",)``; ``None`` alike."""
    devices = physical_devices()
    return None if devices is None else tuple(kind for kind, _ in devices)


# Note [The loop limit of software Vulkan]
# Mesa's lavapipe (llvmpipe's gallivm) stops a shader's loops after 65,535 iterations
# (LP_MAX_TGSI_LOOP_ITERATIONS, "shared between every loop in a shader": one counter per
# invocation, for a whole SIMD group of invocations, that every back edge of every loop
# decrements), and the shader goes on with a partial result and no error. Measured
# (Mesa 22.3, 2026-12-06): one loop of 70,000 iterations stops at 65,535; two loops of
# 40,000 in a row stop the second at 25,534; 300 x 300 nested loops run 65,101 of the
# inner ones. Taichi adds a loop of its own: a kernel's top-level loop whose count is known
# only at launch runs on at most GRID_STRIDE_INVOCATIONS invocations, each striding through
# the range (Taichi's kMaxNumThreadsGridStrideLoop for SPIR-V), so an invocation runs
# ``ceil(count / GRID_STRIDE_INVOCATIONS)`` iterations of it, each with all the loops
# inside. Real GPUs have no such limit.
# So on a software Vulkan device every kernel whose loops inside its top-level loop take a
# count from the data runs in windows: the host splits those loops' ranges (tap tables,
# channels, a tile's terms, a gather's planes) into launches that continue each other's
# sums in the same order, so that no invocation of any launch passes SOFTWARE_LOOP_BUDGET
# iterations (loop_windows). The sums, and so the bits, are those of one launch.
SOFTWARE_LOOP_BUDGET = 32768  # half the limit: the counting is Mesa's, not ours
GRID_STRIDE_INVOCATIONS = 2**17


def loop_budget(arch: str) -> int | None:
    """The loop iterations one invocation may run on ``arch``, all its loops together:
    ``SOFTWARE_LOOP_BUDGET`` on Vulkan where every device is a software one (Note [The loop
    limit of software Vulkan]); None (no limit) elsewhere."""
    if arch == "vulkan" and not has_hardware_vulkan_device():
        return SOFTWARE_LOOP_BUDGET
    return None


def loop_windows(
    budget: int | None, top_level: int, length: int, cost: int = 1
) -> list[tuple[int, int]]:
    """``[first, last)`` windows that split an inner loop of ``length`` iterations, each
    costing ``cost`` loop iterations, inside a top-level loop of ``top_level`` iterations,
    so that one invocation of a launch runs at most ``budget`` iterations (Note [The loop
    limit of software Vulkan]); the whole range where ``budget`` is None. At least one
    window, possibly empty, so that a kernel that writes its results runs once."""
    if budget is None or length <= 0:
        return [(0, max(length, 0))]
    per_invocation = -(-top_level // GRID_STRIDE_INVOCATIONS) or 1
    width = max(1, (budget // per_invocation - 1) // max(cost, 1))
    return [(first, min(first + width, length)) for first in range(0, length, width)]


def has_hardware_vulkan_device() -> bool:
    """Whether some Vulkan device is not a software rasteriser (type ``"cpu"``).

    Software rasterisers (lavapipe, SwiftShader) are slower than Taichi's CPU backend and
    Taichi has no ndarray autodiff on Vulkan, so they must not count as a GPU. ``False``
    also when Vulkan lists no device at all. When the probe cannot tell (no loader found
    where this module looks, a Vulkan call failed) the answer is ``True``: the decision then
    stays with Taichi's own Vulkan check, as it was before this probe existed.
    """
    kinds = physical_device_types()
    if kinds is None:
        return True
    return any(kind != "cpu" for kind in kinds)
