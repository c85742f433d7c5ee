#!/usr/bin/python3
"""bench/train: our trainer against PyTorch on the compact Fashion-MNIST cell.

  make && /usr/bin/python3 bench/train/run.py [--threads 2] [--repeats 3] [--quick]
  make V3=1 && /usr/bin/python3 bench/train/run.py --isa x86-64-v3 ...

--isa x86-64-v3 measures the AVX2 build (build/v3/, as AVX2-only machines and GPU hosts run it)
against PyTorch restricted to AVX2 as well (ATEN_CPU_CAPABILITY=avx2, OpenBLAS's Haswell kernels),
the peak with AVX2 FMAs, and writes its own section (markers bench/train-v3).

Measures, in one run, on this machine:
  - the peak: a vector-FMA loop (12 independent accumulators) and a 2048^3 SGEMM
    (OpenBLAS), both as wall-clock GFLOP/s and per CPU-second of a core;
  - our engine (bench/train/bench_step.c: the sb-train model and step, batch 256,
    40 steps after 3 warm-up steps) and bench/train/torch_train.py (the same model
    in PyTorch, written as a careful user would) for every method, both with the
    same number of threads, interleaved, `--repeats` times, keeping each side's best;
  - sb-train end to end: one full epoch (188 steps), its samples/s and peak RSS.
Reports samples/s (wall), samples per CPU-second (process CPU time: robust to
other load on a shared machine, and PyTorch's spinning threads count against it),
the ratios, the model's FLOPs and the fraction of the FMA peak reached, and writes
the section between the bench/train markers of bench/RESULTS.md.
"""
import argparse, json, os, platform, re, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
METHODS = ["softmax", "topk_softmax_0125", "topk_softmax_025", "topk_softmax_05", "bottomk_softmax_025",
           "sparsemax", "entmax15", "headwise_adaptive_entmax"]


def sh(cmd, env=None, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if check and r.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), r.stderr[-2000:]))
    return r


# OpenBLAS kernel sets older than AVX2: what an OpenBLAS that does not know the CPU falls back to
# (Debian 12's 0.3.21 runs Prescott on Intel's model 207). The rule is lib's sb_blas_core_generic.
GENERIC_BLAS = {"prescott", "core2", "penryn", "dunnington", "nehalem", "atom", "katmai", "coppermine", "northwood",
                "banias", "yonah", "athlon", "opteron", "opteron_sse3", "barcelona", "bobcat", "sandybridge"}


def cpu_flags():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def flops_per_sample(L=49, P=16, d=64, T=50, layers=2, classes=10):
    """multiply-adds x 2 of the matrix products; training = forward + 2 x forward"""
    ff = 4 * d
    macs = L * P * d + layers * (T * d * 3 * d + 2 * T * T * d + T * d * d + 2 * T * d * ff) + d * classes
    return 3 * 2 * macs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--torch-steps", type=int, default=8)
    ap.add_argument("--quick", action="store_true", help="softmax and sparsemax only, one repeat")
    ap.add_argument("--data", default=os.environ.get("SB_DATA", ""))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--isa", choices=["native", "x86-64-v3"], default="native",
                    help="native: the default build (-march=native); x86-64-v3: the AVX2 build of make V3=1, "
                    "against PyTorch on AVX2 kernels")
    a = ap.parse_args()
    methods = ["softmax", "sparsemax"] if a.quick else METHODS
    reps = 1 if a.quick else a.repeats
    tmp = tempfile.mkdtemp(prefix="sbbench.")
    cflags = sh(["pkg-config", "--cflags", "--libs", "yajl", "libarchive", "libcrypto", "openblas", "libcurl"]).stdout.split()
    v3 = a.isa == "x86-64-v3"
    march = "-march=" + a.isa
    lib = os.path.join(TOP, "build", "v3", "libsparsebench.a") if v3 else os.path.join(TOP, "lib", "libsparsebench.a")
    sbtrain = os.path.join(TOP, "build", "v3", "bin", "sb-train") if v3 else os.path.join(TOP, "bin", "sb-train")
    if not os.path.exists(lib) or not os.path.exists(sbtrain):
        sys.exit("build first: make" + (" V3=1" if v3 else ""))
    if v3:
        if "avx2" not in cpu_flags():
            sys.exit("--isa x86-64-v3: this CPU has no AVX2")
        # the reference on the same instruction set: PyTorch's kernels and its (and the peak's) OpenBLAS
        os.environ["ATEN_CPU_CAPABILITY"] = "avx2"
        os.environ["OPENBLAS_CORETYPE"] = "Haswell"
    peak_bin, step_bin = os.path.join(tmp, "peak"), os.path.join(tmp, "bench_step")
    sh(["cc", "-O2", march, os.path.join(HERE, "peak.c"), "-o", peak_bin] + cflags + ["-lpthread"])
    sh(["cc", "-O2", march, "-I" + os.path.join(TOP, "lib"), os.path.join(HERE, "bench_step.c"), "-o", step_bin,
        lib] + cflags + ["-lm", "-lpthread"])
    data = a.data
    if not data or not os.path.exists(os.path.join(data, "fashion_mnist", "pool.safetensors")):
        data = os.path.join(tmp, "data")
        sh([os.path.join(TOP, "bin", "sb-fetch"), "-q", "--offline", "-m", "/usr/share/datasets/fashion-mnist", "-c",
            os.path.join(tmp, "cache"), "-o", data, "fashion_mnist"])
    load0 = os.getloadavg()
    peak = json.loads(sh([peak_bin, str(a.threads)]).stdout)
    print("peak:", peak, file=sys.stderr)
    # PyTorch's products are OpenBLAS's (Debian's build: BLAS_INFO=generic, libblas.so.3): an OpenBLAS on its
    # generic kernels would handicap the reference, so it then gets the kernel set this CPU supports (ours does
    # not use OpenBLAS)
    blas_note = ""
    flags = cpu_flags()
    if peak["openblas_core"].lower() in GENERIC_BLAS and "avx2" in flags and "OPENBLAS_CORETYPE" not in os.environ:
        core = "SkylakeX" if "avx512f" in flags else "Haswell"
        os.environ["OPENBLAS_CORETYPE"] = core
        first = peak
        peak = json.loads(sh([peak_bin, str(a.threads)]).stdout)
        blas_note = (" OpenBLAS did not know this CPU and chose its generic `%s` kernels (SGEMM %.1f GFLOP/s per "
                     "CPU-second); PyTorch (whose products are OpenBLAS's) and the SGEMM peak ran with "
                     "`OPENBLAS_CORETYPE=%s` so that the reference is not handicapped." % (
                         first["openblas_core"], first["sgemm_gflops_1thread_per_cpu_s"], core))
        print("peak with OPENBLAS_CORETYPE=%s:" % core, peak, file=sys.stderr)
    ours, torch = {}, {}
    tenv = dict(os.environ, OPENBLAS_NUM_THREADS="1")  # PyTorch's own threads only (no oversubscription)
    for rep in range(reps):
        for m in methods:
            r = json.loads(sh([step_bin, data, "fashion_mnist", m, str(a.threads), str(a.steps)]).stdout)
            b = ours.setdefault(m, r)
            b["samples_per_s"] = max(b["samples_per_s"], r["samples_per_s"])
            b["samples_per_cpu_s"] = max(b["samples_per_cpu_s"], r["samples_per_cpu_s"])
            t = json.loads(sh(["/usr/bin/python3", os.path.join(HERE, "torch_train.py"), "--method", m, "--threads",
                               str(a.threads), "--steps", str(a.torch_steps)], env=tenv).stdout)
            b = torch.setdefault(m, t)
            b["samples_per_s"] = max(b["samples_per_s"], t["samples_per_s"])
            b["samples_per_cpu_s"] = max(b["samples_per_cpu_s"], t["samples_per_cpu_s"])
            print("%-26s ours %7.1f/s %7.1f/cpu-s   torch %6.1f/s %6.1f/cpu-s" % (
                m, r["samples_per_s"], r["samples_per_cpu_s"], t["samples_per_s"], t["samples_per_cpu_s"]),
                file=sys.stderr)
    # one thread each: pure work, no spinning or scheduling on either side
    one_ours = json.loads(sh([step_bin, data, "fashion_mnist", "softmax", "1", str(a.steps)]).stdout)
    one_torch = json.loads(sh(["/usr/bin/python3", os.path.join(HERE, "torch_train.py"), "--method", "softmax",
                               "--threads", "1", "--steps", str(a.torch_steps)], env=tenv).stdout)
    # sb-train end to end, one epoch
    runs = os.path.join(tmp, "runs")
    out = sh([sbtrain, "-q", "-j", str(a.threads), "-d", data, "-o", runs, "--task",
              "fashion_mnist", "--method", "softmax", "--seed", "0", "--epochs", "1"]).stdout
    recs = [json.loads(l) for l in out.splitlines()]
    ep = [r for r in recs if r["kind"] == "train.epoch"][0]
    done = [r for r in recs if r["kind"] == "train.done"][0]
    load1 = os.getloadavg()
    F = flops_per_sample()
    peak2 = peak["fma_gflops_per_core"] * a.threads
    git = sh(["git", "-C", TOP, "describe", "--always", "--dirty"], check=False).stdout.strip()
    lines = []
    P = lines.append
    tag = "bench/train-v3" if v3 else "bench/train"
    P("<!-- %s:begin -->" % tag)
    P("## bench/train — training throughput vs PyTorch (CPU%s)" % (
        ", AVX2 builds on both sides" if v3 else ""))
    P("")
    P("Command: `%s && /usr/bin/python3 bench/train/run.py --threads %d --repeats %d%s` (git %s, %s)." % (
        "make V3=1" if v3 else "make", a.threads, reps, " --isa x86-64-v3" if v3 else "", git,
        time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())))
    if v3:
        P("Ours: the x86-64-v3 build (`make V3=1`: AVX2 + FMA, no AVX-512); PyTorch with "
          "`ATEN_CPU_CAPABILITY=avx2` and OpenBLAS's `Haswell` kernels (`OPENBLAS_CORETYPE`), the peak's FMA loop "
          "and SGEMM likewise.")
    # more runnable tasks than the threads we use: other jobs shared the cores
    busy = max(load0[0], load1[0]) > a.threads
    P("Machine: %s; %s. Load average %.1f at the start, %.1f at the end (%s)." % (
        ours["softmax"]["device"], platform.platform(), load0[0], load1[0],
        "other jobs were running: wall-clock numbers are contended, per-CPU-second numbers are not" if busy else
        "no more than %d runnable: a quiet machine, wall-clock numbers stand" % a.threads))
    P("Cell: Fashion-MNIST, compact (2 layers, d 64, 4 heads), patch 4 -> 50 tokens, batch 256, dropout 0.1, AdamW, "
      "clipping 5; %d threads on both sides (PyTorch %s: `torch.set_num_threads(%d)`, `OPENBLAS_NUM_THREADS=1` "
      "so that its BLAS does not oversubscribe the cores). Ours: `bench/train/bench_step.c` (sb-train's model and "
      "step), %d steps after 3 warm-up steps; PyTorch: `bench/train/torch_train.py`, %d steps after 3; best of %d "
      "interleaved repeats each." % (a.threads, sh(["/usr/bin/python3", "-c", "import torch;print(torch.__version__)"]).stdout.strip(),
                                     a.threads, a.steps, a.torch_steps, reps))
    P("")
    P("Peak: vector-FMA loop %.1f GFLOP/s per core while running (%.1f wall with %d threads under the load); "
      "SGEMM 2048^3 %.1f GFLOP/s per CPU-second on one thread (%.1f wall with %d threads), OpenBLAS core `%s`. "
      "Machine peak used below: %d x %.1f = %.1f GFLOP/s." % (
        peak["fma_gflops_per_core"], peak["fma_gflops_wall"], a.threads, peak["sgemm_gflops_1thread_per_cpu_s"],
        peak["sgemm_gflops_wall"], a.threads, peak["openblas_core"], a.threads, peak["fma_gflops_per_core"], peak2)
      + blas_note)
    P("Model FLOPs per training sample (matrix products, forward x 3): %.1f MFLOP." % (F / 1e6))
    P("")
    P("| method | ours samples/s | PyTorch samples/s | ratio | ours samples/CPU-s | PyTorch samples/CPU-s | ratio | "
      "ours step / our softmax step (CPU) | ours GFLOP/s (CPU-s x %d) | of peak |" % a.threads)
    P("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    sm = ours["softmax"]["samples_per_cpu_s"]
    for m in methods:
        o, t = ours[m], torch[m]
        gf = o["samples_per_cpu_s"] * a.threads * F / 1e9
        P("| %s | %.0f | %.0f | %.1fx | %.0f | %.0f | %.1fx | %.2f | %.1f | %.0f%% |" % (
            m, o["samples_per_s"], t["samples_per_s"], o["samples_per_s"] / t["samples_per_s"], o["samples_per_cpu_s"],
            t["samples_per_cpu_s"], o["samples_per_cpu_s"] / t["samples_per_cpu_s"], sm / o["samples_per_cpu_s"], gf,
            100 * gf / peak2))
    P("")
    P("One thread each (softmax; no spinning or scheduling on either side): ours %.0f samples/CPU-s, PyTorch %.0f: "
      "%.1fx." % (one_ours["samples_per_cpu_s"], one_torch["samples_per_cpu_s"],
                  one_ours["samples_per_cpu_s"] / one_torch["samples_per_cpu_s"]))
    P("sb-train end to end (`sb-train -j %d --task fashion_mnist --method softmax --seed 0 --epochs 1`): %.0f samples/s "
      "over the epoch (wall%s), peak RSS %.1f MB (dataset included), %d parameters." % (
        a.threads, ep["samples_per_s"], ", contended" if busy else "", done["peak_memory_mb"], done["parameter_count"]))
    P("Engine memory (backend allocations: parameters, gradient slots, moments, per-worker activations): %.1f MB." %
      ours["softmax"]["peak_mb"])
    P("")
    P("Targets: softmax >= 2.5x PyTorch samples/s; each sparse normaliser >= 2.5x PyTorch's same normaliser and its "
      "step <= 1.3x our softmax step; a compact run < 300 MB.")
    P("<!-- %s:end -->" % tag)
    section = "\n".join(lines) + "\n"
    print(section)
    if not a.no_write:
        path = os.path.join(TOP, "bench", "RESULTS.md")
        old = open(path).read() if os.path.exists(path) else "# Benchmark results\n\n"
        if "<!-- %s:begin -->" % tag in old:
            new = re.sub(r"<!-- %s:begin -->.*?<!-- %s:end -->\n?" % (re.escape(tag), re.escape(tag)), lambda _: section,
                         old, flags=re.S)
        else:
            new = old.rstrip("\n") + "\n\n" + section
        open(path, "w").write(new)
        print("wrote", path, file=sys.stderr)


if __name__ == "__main__":
    main()
