"""Kernel sets: tiinterp's SIMD CPU kernels compiled ahead of time into one shared library
per machine, launched without Taichi's front end or JIT.

``library`` finds, loads and launches a set (no Taichi import); ``native`` is the launcher
the CPU path puts in front of Taichi's, which runs a launch natively where the set has its
kernel and leaves every other launch to the JIT (the reference, and the fallback); ``build``
(``python -m tiinterp._compiled.build``) makes a set from the same Taichi kernels. Imports
``_runtime`` and ``_kernels``; ``build``, a command, sits with the command line.

Note [A kernel set's ties]
~~~~~~~~~~~~~~~~~~~~~~~~~~
A set is the LLVM IR that Taichi's AOT export (``ti.aot.Module``) saves for each captured
kernel instance (a SIMD kernel's form and template values), compiled for this CPU at
LLVM's ``-O3`` (by llvmlite, LLVM 15 as in Taichi 1.7.4, else by LLVM's llc) and linked with
a small C shim into one library. What ties it:
- Taichi 1.7.4's CPU runtime layout: the kernels read three fields of Taichi's
  LLVMRuntime (thread_pool, parallel_for, temporaries), at offsets the build
  reads from the IR's struct type and checks against runtime.cpp's field order; the shim
  makes a runtime with just those, a parallel-for on OpenMP (tasks taken in turn by at most
  the runtime's thread count of threads, as Taichi's pool does) and a 1 MiB temporaries
  buffer. The argument buffer is Taichi's too (Note [The argument buffer] in
  ``library``). So the build refuses any Taichi but 1.7.4 (taichi-forge included).
- One set per CPU and thread count: ``-mcpu=native`` compiles for the build machine's CPU,
  which is what makes the set's bits the JIT's there (the JIT compiles for the host CPU as
  well; built for a generic x86-64-v3, 29 % of outputs differed in the last bit), and the
  thread count of the Taichi runtime is compiled into the parallel kernels and sizes the
  scratch lines. The key (``library.set_identity``) holds both, with the Taichi version,
  the kernels' source, the machine and the compile options; a process whose key differs
  ignores the set and the JIT compiles, as without one.
- The kernels it holds: those the build's calls reached (``tiinterp.warmup``'s for the
  modes asked, plus the other store forms their shapes allow). Any other launch, and
  every non-SIMD kernel, runs through Taichi.
- What the JIT does to the same IR is the code generator's work here (Taichi's saved IR is
  already optimised): LLVM 15 (llvmlite) and 14 (llc-14) gave the JIT's bits in every test;
  another version may not (the manifest records the code generator; the tests check every
  kernel's bits against the JIT on the build machine).
"""
