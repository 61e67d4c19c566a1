# SPDX-License-Identifier: MIT
# Shared by the scripts of perf/recon/ (sourced, from the repository root).

# simulate_bench [SCAN]: bench.h5 in the current folder, the tBL-WSe2-shaped dataset (SCAN x SCAN
# patterns, default 128 x 128 = 16384, of 128 x 128 pixels, 12 modes, object 592 x 592). A jittered
# raster, the scan every figure of perf/RESULTS.md since issue 6 was measured on (simulate's default
# became a Fermat spiral in issue 25; the seconds per iteration do not depend on it).
simulate_bench() {
    ensemblefit simulate ptycho --out bench.h5 --scan "${1:-128}" --dp 128 --modes 12 --dose 1e6 --object-size 592 \
        --jitter 0.15 --scan-pattern raster --threads "$(nproc)" --overwrite
}

# write_bench_ini FILE ITERATIONS: the tBL-WSe2-shaped benchmark's config (16384 patterns of
# bench.h5, 12 modes, batch 256, position correction on, GPU workers, the loss at the end only).
write_bench_ini() {
    cat > "$1" <<INI
[data]
file = bench.h5
[model]
modes = 12
[object]
lr_amplitude = 5e-4
lr_phase = 5e-4
[probe]
lr = 1e-3
# flat start, no defocus trials: the set-up of every figure before probe.defocus = auto
defocus = 0
[positions]
correct = true
lr = 5e-4
[solver]
iterations = $2
batch_size = 256
[run]
workers = gpu
[output]
previews = false
report_every = $2
INI
}

# nvidia_wheel_libs: the lib folders of PyTorch's nvidia wheels (cuFFT, NCCL), ':'-separated.
nvidia_wheel_libs() {
    py -c "import glob, os, site; print(':'.join(sorted(set(os.path.dirname(p) for s in site.getsitepackages() for p in glob.glob(os.path.join(s, 'nvidia', '*', 'lib', 'lib*.so*'))))))" 2>/dev/null
}

# gpu_machine_env: for the GPU machine's scripts, after the bundle's env.sh: py() runs Python
# (PyTorch, h5py) with the libraries loaded so far, the programs find cuFFT in the machine's
# toolkit or PyTorch's wheels and NCCL in the wheels, and NVLink multicast stays off.
gpu_machine_env() {
    ORIG_LD=${LD_LIBRARY_PATH:-}
    py() { LD_LIBRARY_PATH="$ORIG_LD" python3 "$@"; }
    export NCCL_NVLS_ENABLE=0 EF_SOURCE_DIR=$PWD
    export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64:$(nvidia_wheel_libs)
}
