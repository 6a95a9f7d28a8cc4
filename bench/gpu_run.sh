#!/usr/bin/env bash
# One GPU session's worth of evidence, run on the device machine (see bench/README.md):
#   1. the W3/W4/W5 workloads on Vulkan and in PyTorch CUDA, back to back in the same run,
#   2. the vk test suite under the validation layer on the NVIDIA GPU,
#   3. every op on Vulkan (timestamps) and compare.py's tables.
#   4. (`train`) W1/W2 training steps on Vulkan and interp_f32 next to PyTorch CUDA eager and
#      CUDA-graph replay.
#   5. (`w6`) W6 (GPT-2-small size) on both sides: tg_train_bench's train/vulkan/W6 and PyTorch
#      eager and graph at the same batch (TG_W6_BATCH, default 8), then the largest batch each side
#      fits (tg_w6_capacity, pytorch_train.py --w6-capacity), compare.py's time table and
#      w6_report.py's memory and capacity tables (w6.md). Bounded by TG_W6_SECONDS (default 470):
#      each command gets a share of what is left, the capacity searches their budget.
#   6. (`large`) sizes only a large GPU holds: the vk tests with TG_VK_LARGE=1 (values past 2 GiB in
#      plans past 4 GiB, long reductions, K = 2^24), W2 at full size against the f64 oracle, and
#      tg_vk_stream_probe's descriptor-bound against buffer-device-address streaming adds, at 2^26
#      elements and at 9 GiB per tensor (where only addresses can bind).
#   7. (`vk`) the workloads (1.) and the vk tests (2.) only.
#   9. (`mixed`) mixed precision: tg_train_bench's train/vulkan/W2, W2_bf16, W2_f16 and W6, W6_bf16,
#      W6_f16 next to pytorch_train.py fp32, --autocast bf16 (eager, graph) and --autocast f16
#      (eager, GradScaler); the loss curves of W2 from one init and batch stream on both sides
#      (bench/loss_curve.py, tg_loss_curve); interp_f32 W2_small f32/bf16 next to PyTorch CPU.
#   8. (`ckpt`) gradient checkpointing (issue 17): tg_train_bench's train/vulkan/W2 and W2_ckpt, then
#      W6 and W6_ckpt (TG_BENCH_W6=1, batch TG_W6_BATCH default 8, TG_W6_STEPS default 5 timed
#      steps), pytorch_train.py --device cuda eager for W2, W6 with and without
#      torch.utils.checkpoint, graph mode plain and checkpointed in separate processes (a capture
#      that fails must not take the others down), then tg_interp_parallel_bench at
#      TG_BENCH_THREADS=16 and 2 (TG_BENCH_HEADS=64, TG_BENCH_BRANCHES=256: a branch per core); JSON
#      reports in <out-dir>/ckpt_json.tar.gz and ckpt_report.py's tables in <out-dir>/ckpt.md.
#      Bounded by TG_CKPT_SECONDS (default 520) like `w6`; the whole mode took 105 s on an H200
#      (2026-11-25), so TG_W6_STEPS can go higher.
#  10. (`attention`) fused attention: W2 and W6 (batch TG_W6_BATCH, default 8) fp32 and bf16 on
#      Vulkan next to PyTorch with the mirror's attention and with scaled_dot_product_attention
#      (eager, CUDA graph, torch.compile), the largest W6 batch each side fits, attention.md
#      (bench/attention_report.py). Bounded by TG_ATTENTION_SECONDS (default 550).
#  12. (`conv`) the convolution kernels (tg_vk_ops_bench's vk_conv/ cases, each next to the matmul of
#      its GEMM's shape) and PyTorch's cuDNN at the same shapes (bench/pytorch_conv_ops.py), then the
#      conv tests on the GPU.
#  11. (`w7`) the CNNs W7 (ResNet-style, batch 128) and W7_small (the small CNN, batch 64): tg_train_bench's
#      train/vulkan/W7[_small] next to pytorch_train.py's CUDA eager and CUDA graph, then train/interp_f32
#      next to PyTorch CPU on the machine's cores, then tg_profile_step W7 W7_small (device time per op
#      kind); w7.md holds compare.py's tables and the profile. Bounded by TG_W7_SECONDS (default 500).
#  13. (`dp`) data parallel: tg_dp_bench (W2, W6 on 1, 2, 4 GPUs) next to bench/pytorch_ddp.py (DDP, NCCL).
# Usage (repository root, build dir carried): bash bench/gpu_run.sh <build-dir> <out-dir> [all|train|w6|large|vk|ckpt|mixed|curve|units|attention|w7|conv|dp]
# The build dir must hold tests/tg_vk_tests and bench/tg_vk_{workloads,ops}_bench (Release), and
# bench/libbenchmark.so.1debian when the machine lacks Google Benchmark; for `w6`,
# bench/tg_train_bench and bench/tg_w6_capacity (and the libbenchmark copy), the same for `attention`; for `w7`,
# bench/tg_train_bench and bench/tg_profile_step (and the libbenchmark copy); for `ckpt`,
# bench/tg_train_bench, bench/tg_interp_parallel_bench and bench/libbenchmark.so.1debian only.
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
what=${3:-all}
mkdir -p "$out"

source .gpu/env.sh
export VK_LAYER_PATH=/opt/tg/usr/share/vulkan/explicit_layer.d
# The driver's GLX manifest fails headless; its EGL library of the same driver works.
printf '{"file_format_version":"1.0.1","ICD":{"library_path":"%s","api_version":"1.3.0"}}' \
  /usr/local/nvidia/lib64/libEGL_nvidia.so.0 >/tmp/nv.json
export VK_DRIVER_FILES=/tmp/nv.json VK_ICD_FILENAMES=/tmp/nv.json
# Many contexts in one process exhaust the static TLS block the NVIDIA driver needs.
export GLIBC_TUNABLES=glibc.rtld.optional_static_tls=65536
export LD_LIBRARY_PATH=$PWD/$build/bench:${LD_LIBRARY_PATH:-}
# The golden tests find their data by the absolute source path baked in at build time.
if [ ! -e /work/main/tests ]; then mkdir -p /work && ln -sfn "$PWD" /work/main; fi

nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee "$out/gpu.txt"

J=--benchmark_out_format=json
if [ "$what" = train ]; then
  echo "== training steps"
  "$build/bench/tg_train_bench" --benchmark_out="$out/train.json" $J
  python3 bench/pytorch_train.py --device cuda --out "$out/torch_train_cuda.json"
  python3 bench/compare.py "$out/train.json" "$out/torch_train_cuda.json" --ours train/vulkan | tee "$out/train_vulkan.md"
  python3 bench/compare.py "$out/train.json" "$out/torch_train_cuda.json" --ours train/interp_f32 >"$out/train_interp.md"
  exit 0
fi

if [ "$what" = conv ]; then
  # The convolution kernels next to their same-shape matmuls (vk_conv/ cases) and PyTorch's cuDNN
  # at the same shapes (fp32, TF32 off), then the conv tests on the GPU (validation off: the
  # machine's layer predates some of the driver's extensions).
  timeout 200 "$build/bench/tg_vk_ops_bench" --benchmark_filter='^vk_conv/' --benchmark_out="$out/conv_vk.json" $J
  timeout 120 python3 bench/pytorch_conv_ops.py --device cuda --out "$out/conv_torch.json" | tee "$out/conv.md"
  TG_VK_VALIDATION=0 timeout 200 "$build/tests/tg_vk_tests" \
    --gtest_filter='VkTest.Image*:VkTest.BoundaryConv*:Registry/BoundarySweep.*/conv2d*' | tail -5
  echo "conv: $SECONDS s"
  exit 0
fi

if [ "$what" = w7 ]; then
  deadline=$((SECONDS + ${TG_W7_SECONDS:-500}))
  # left CAP [RESERVE]: seconds for the next command: at most CAP, leaving RESERVE for what follows.
  left() { local l=$((deadline - SECONDS - ${2:-0})); ((l > $1)) && l=$1; ((l < 5)) && l=5; echo $l; }
  B="$build/bench/tg_train_bench"
  echo "== W7, W7_small: Vulkan"
  timeout "$(left 120 330)" "$B" '--benchmark_filter=^train/vulkan/W7(_small)?/' --benchmark_out="$out/w7_vk.json" $J
  echo "== W7, W7_small: PyTorch CUDA eager and graph"
  timeout "$(left 90 240)" python3 bench/pytorch_train.py --device cuda --workloads W7,W7_small \
    --out "$out/w7_torch_cuda.json"
  python3 bench/compare.py "$out/w7_vk.json" "$out/w7_torch_cuda.json" --ours train/vulkan | tee "$out/w7.md"
  echo "== W7, W7_small: interp_f32 next to PyTorch CPU ($(nproc) cores)"
  timeout "$(left 120 120)" "$B" '--benchmark_filter=^train/interp_f32/W7(_small)?/' --benchmark_out="$out/w7_cpu_tg.json" $J
  timeout "$(left 90 60)" python3 bench/pytorch_train.py --device cpu --workloads W7,W7_small \
    --out "$out/w7_torch_cpu.json"
  python3 bench/compare.py "$out/w7_cpu_tg.json" "$out/w7_torch_cpu.json" --ours train/interp_f32 | tee -a "$out/w7.md"
  echo "== where a step goes (Vulkan timestamps)"
  timeout "$(left 60)" "$build/bench/tg_profile_step" W7 W7_small | tee -a "$out/w7.md"
  echo "w7: $SECONDS s"
  exit 0
fi

if [ "$what" = dp ]; then
  # Data parallel: tg_dp_bench's W2 and W6 (one process without a communicator, then 1, 2 and 4
  # ranks, one per GPU, as threads with the host-side rank-order reduction) and PyTorch DDP (NCCL)
  # at the same per-GPU batch, both fp32 (TG_DP_PRECISION=bf16: bf16 autocast on both sides), then
  # the data-parallel tests on the GPU. Bounded by TG_DP_SECONDS (default 540); TG_DP_FILTER (a
  # benchmark filter) and TG_DP_WORKLOADS (W2,W6) narrow the two sides.
  export TG_BENCH_W6=1 TG_W6_BATCH=${TG_W6_BATCH:-8} TG_DP_STEPS=${TG_DP_STEPS:-10}
  deadline=$((SECONDS + ${TG_DP_SECONDS:-540}))
  left() { local l=$((deadline - SECONDS - ${2:-0})); ((l > $1)) && l=$1; ((l < 5)) && l=5; echo $l; }
  autocast=()
  [ "${TG_DP_PRECISION:-f32}" = bf16 ] && autocast=(--autocast bf16)
  echo "== data parallel: tensorgrad ($(nvidia-smi -L | wc -l) GPUs)"
  timeout "$(left 300 120)" "$build/bench/tg_dp_bench" --benchmark_filter="${TG_DP_FILTER:-.}" \
    --benchmark_out="$out/dp_tg.json" $J
  echo "== data parallel: PyTorch DDP"
  timeout "$(left 200 30)" python3 bench/pytorch_ddp.py --workloads "${TG_DP_WORKLOADS:-W2,W6}" --ranks 1,2,4 "${autocast[@]}" \
    --steps "$TG_DP_STEPS" --out "$out/dp_torch.json"
  echo "== data-parallel tests on the GPU"
  TG_VK_VALIDATION=0 timeout "$(left 60)" "$build/tests/tg_vk_tests" \
    --gtest_filter='VkTest.DataParallel*:VkTest.SessionCopiesParamsOnTheDevice:VkTest.EarlyReadback*' | tail -4
  echo "dp: $SECONDS s"
  exit 0
fi

if [ "$what" = units ]; then
  # Matrix units: the matrix-unit matmul's and convolutions' tests (tests/vk/matmul_units_gpu_test.cpp,
  # vk_conv_units_test.cpp and the selection tests), then W3 in every mode with W4/W5
  # next to PyTorch's fp32/TF32/f16/bf16 (bench/w3_modes.py's table), then, unless TG_UNITS_TRAIN=0,
  # W1/W2 and W6 fp32 training steps under matmul_precision ieee and split next to PyTorch fp32.
  # Bounded by TG_UNITS_SECONDS (default 540).
  export TG_W6_BATCH=${TG_W6_BATCH:-8} TG_W6_STEPS=${TG_W6_STEPS:-5}
  deadline=$((SECONDS + ${TG_UNITS_SECONDS:-540}))
  left() { local l=$((deadline - SECONDS - ${2:-0})); ((l > $1)) && l=$1; ((l < 5)) && l=5; echo $l; }
  # The validation layer here predates VK_KHR_cooperative_matrix: under it a Context keeps the
  # matrix units off (the portable kernels run and are validated); the matrix-unit tests run without.
  echo "== matrix-unit matmul tests (validation off: the layer cannot parse them), then the portable path validated"
  TG_VK_VALIDATION=0 timeout "$(left 150 300)" "$build/tests/tg_vk_tests" \
    --gtest_filter='MatrixUnitsTest.*:MatmulUnits*:ConvUnits*' >"$out/units_tests.txt" 2>&1
  echo "tg_vk_tests exit $?" | tee -a "$out/units_tests.txt"
  TG_VK_VALIDATION=1 timeout "$(left 60 300)" "$build/tests/tg_vk_tests" \
    --gtest_filter='VkTest.MatmulWithoutMatrixUnits*:VkTest.ConvWithoutMatrixUnits*:VkMatmulPrecision*:MatmulPrecision*' \
    >>"$out/units_tests.txt" 2>&1
  echo "tg_vk_tests (validated) exit $?" | tee -a "$out/units_tests.txt"
  tail -30 "$out/units_tests.txt"
  echo "== W3 (every mode), W4, W5: Vulkan, then PyTorch"
  timeout "$(left 200 150)" "$build/bench/tg_vk_workloads_bench" --benchmark_out="$out/units_vk.json" $J
  timeout "$(left 120 100)" python3 bench/pytorch_workloads.py --device cuda --w3-modes --out "$out/units_torch.json"
  python3 bench/w3_modes.py "$out/units_vk.json" "$out/units_torch.json" | tee "$out/units.md"
  python3 bench/compare.py "$out/units_vk.json" "$out/units_torch.json" | tee -a "$out/units.md"
  if [ "${TG_UNITS_TRAIN:-1}" = 1 ]; then
    B="$build/bench/tg_train_bench"
    for mode in ${TG_UNITS_MODES:-ieee split}; do
      # ieee also runs the bf16 autocast steps, whose matmuls now take the matrix units.
      filter='^train/vulkan/(W1|W2|W6)/'
      [ $mode = ieee ] && filter='^train/vulkan/(W1|W2|W6)(_bf16)?/'
      echo "== W1, W2, W6 under matmul_precision $mode: Vulkan"
      TG_MATMUL_PRECISION=$mode TG_BENCH_W6=1 timeout "$(left 150 100)" "$B" "--benchmark_filter=$filter" \
        --benchmark_out="$out/units_train_$mode.json" $J
    done
    echo "== PyTorch CUDA fp32: W1, W2, W6"
    timeout "$(left 120)" python3 bench/pytorch_train.py --device cuda --workloads W1,W2 --w6 --out "$out/units_train_torch.json"
    for mode in ${TG_UNITS_MODES:-ieee split}; do
      echo "### matmul_precision $mode" | tee -a "$out/units.md"
      python3 bench/compare.py "$out/units_train_$mode.json" "$out/units_train_torch.json" --ours train/vulkan |
        tee -a "$out/units.md"
    done
  fi
  echo "units: $SECONDS s"
  exit 0
fi

if [ "$what" = w6 ]; then
  export TG_W6_BATCH=${TG_W6_BATCH:-8}
  deadline=$((SECONDS + ${TG_W6_SECONDS:-470}))
  # left CAP [RESERVE]: seconds for the next command: at most CAP, leaving RESERVE for what follows.
  left() { local l=$((deadline - SECONDS - ${2:-0})); ((l > $1)) && l=$1; ((l < 5)) && l=5; echo $l; }
  echo "== W6 at batch $TG_W6_BATCH: Vulkan"
  TG_BENCH_W6=1 timeout "$(left 150 300)" "$build/bench/tg_train_bench" '--benchmark_filter=^train/vulkan/W6/' \
    --benchmark_out="$out/w6_vk.json" $J
  echo "== W6 at batch $TG_W6_BATCH: PyTorch eager and graph"
  timeout "$(left 120 240)" python3 bench/pytorch_train.py --device cuda --w6 --out "$out/w6_torch.json"
  python3 bench/compare.py "$out/w6_vk.json" "$out/w6_torch.json" --ours train/vulkan | tee "$out/w6.md"
  echo "== W6 capacity: Vulkan"
  t=$(left 180 150)
  timeout "$t" "$build/bench/tg_w6_capacity" --budget-s $((t - 45)) --out "$out/w6_capacity_vk.jsonl"
  echo "== W6 capacity: PyTorch (graph, then eager)"
  t=$(left 280 5)
  timeout "$t" python3 bench/pytorch_train.py --device cuda --w6-capacity --capacity-budget-s $(((t - 40) / 2)) \
    --out "$out/w6_capacity_torch.jsonl"
  { echo; python3 bench/w6_report.py --vk "$out/w6_vk.json" --torch "$out/w6_torch.json" \
      --vk-capacity "$out/w6_capacity_vk.jsonl" --torch-capacity "$out/w6_capacity_torch.jsonl"; } | tee -a "$out/w6.md"
  echo "w6: $SECONDS s"
  exit 0
fi

if [ "$what" = ckpt ]; then
  export TG_W6_BATCH=${TG_W6_BATCH:-8} TG_W6_STEPS=${TG_W6_STEPS:-5}
  deadline=$((SECONDS + ${TG_CKPT_SECONDS:-520}))
  # left CAP [RESERVE]: seconds for the next command: at most CAP, leaving RESERVE for what follows.
  left() { local l=$((deadline - SECONDS - ${2:-0})); ((l > $1)) && l=$1; ((l < 5)) && l=5; echo $l; }
  B="$build/bench/tg_train_bench"
  echo "== W2 and W2_ckpt: Vulkan"
  timeout "$(left 90 400)" "$B" '--benchmark_filter=^train/vulkan/W2(_ckpt)?/' --benchmark_out="$out/ckpt_vk_w2.json" $J
  echo "== W6 and W6_ckpt at batch $TG_W6_BATCH, $TG_W6_STEPS steps: Vulkan"
  TG_BENCH_W6=1 timeout "$(left 200 250)" "$B" '--benchmark_filter=^train/vulkan/W6(_ckpt)?/' \
    --benchmark_out="$out/ckpt_vk_w6.json" $J
  T="python3 bench/pytorch_train.py --device cuda --workloads W2 --w6 --checkpoint"
  echo "== W2, W6, with and without torch.utils.checkpoint: PyTorch eager"
  timeout "$(left 120 140)" $T --modes eager --out "$out/ckpt_torch_eager.json"
  echo "== the same, CUDA graph: plain, then checkpointed (each its own process)"
  timeout "$(left 80 90)" python3 bench/pytorch_train.py --device cuda --workloads W2 --w6 --modes graph \
    --out "$out/ckpt_torch_graph.json"
  timeout "$(left 80 60)" $T --checkpoint-only --modes graph --out "$out/ckpt_torch_graph_ckpt.json"
  echo "== the parallel interpreter on $(nproc) cores"
  for n in 16 2; do
    TG_BENCH_THREADS=$n TG_BENCH_HEADS=64 TG_BENCH_BRANCHES=256 timeout "$(left 28)" \
      "$build/bench/tg_interp_parallel_bench" --benchmark_repetitions=3 --benchmark_out="$out/interp_parallel_$n.json" $J
  done
  python3 bench/ckpt_report.py --ours "$out/ckpt_vk_w2.json" "$out/ckpt_vk_w6.json" \
    --torch "$out/ckpt_torch_eager.json" "$out/ckpt_torch_graph.json" "$out/ckpt_torch_graph_ckpt.json" \
    --parallel 16="$out/interp_parallel_16.json" 2="$out/interp_parallel_2.json" | tee "$out/ckpt.md"
  # (The schedules' figures moved by 1.5x between two runs of single repetitions: medians of 3.)
  # The device tool brings back 8 files at most: the JSON reports travel as one archive.
  (cd "$out" && tar czf ckpt_json.tar.gz ckpt_*.json interp_parallel_*.json && rm -f ckpt_*.json interp_parallel_*.json)
  echo "ckpt: $SECONDS s"
  exit 0
fi

# `curve`: only the loss curves of TG_CURVE_WORKLOAD (W2, W6 at TG_W6_BATCH) over TG_CURVE_STEPS steps.
loss_curves() {
  local w=${TG_CURVE_WORKLOAD:-W2} steps=${TG_CURVE_STEPS:-100} D=/tmp/curve_${TG_CURVE_WORKLOAD:-W2}
  echo "== loss curves: $w, $steps steps, the same init and batches"
  python3 bench/loss_curve.py --workload "$w" --w6-batch "${TG_W6_BATCH:-8}" --steps "$steps" --dir $D \
    --device cuda --precisions f32,bf16,f16 | grep -v " step [0-9]*: loss"
  for p in f32 bf16 f16; do
    "$build/bench/tg_loss_curve" --dir $D --workload "$w" --w6-batch "${TG_W6_BATCH:-8}" --precision $p \
      --backend vulkan --steps "$steps" | grep -v " step [0-9]*: loss"
  done
  python3 bench/loss_curve.py compare --dir $D
}
if [ "$what" = curve ]; then
  loss_curves | tee "$out/curve.md"
  exit 0
fi

if [ "$what" = mixed ]; then
  # Mixed precision (bf16/f16 autocast) against fp32, both sides, then the loss curves of the same
  # init and batches over TG_CURVE_STEPS steps, then interp_f32 next to PyTorch CPU. Bounded by
  # TG_MIXED_SECONDS (default 540).
  export TG_W6_BATCH=${TG_W6_BATCH:-8} TG_W6_STEPS=${TG_W6_STEPS:-5}
  deadline=$((SECONDS + ${TG_MIXED_SECONDS:-540}))
  left() { local l=$((deadline - SECONDS - ${2:-0})); ((l > $1)) && l=$1; ((l < 5)) && l=5; echo $l; }
  B="$build/bench/tg_train_bench"
  echo "== W2 f32/bf16/f16: Vulkan"
  timeout "$(left 90 420)" "$B" '--benchmark_filter=^train/vulkan/W2(_bf16|_f16)?/' --benchmark_out="$out/mixed_vk_w2.json" $J
  echo "== W6 f32/bf16/f16 at batch $TG_W6_BATCH, $TG_W6_STEPS steps: Vulkan"
  TG_BENCH_W6=1 timeout "$(left 150 300)" "$B" '--benchmark_filter=^train/vulkan/W6(_bf16|_f16)?/' \
    --benchmark_out="$out/mixed_vk_w6.json" $J
  T="python3 bench/pytorch_train.py --device cuda --workloads W2 --w6"
  echo "== PyTorch CUDA: fp32, bf16 autocast (eager, graph), f16 autocast + GradScaler (eager)"
  timeout "$(left 60 240)" $T --out "$out/mixed_torch_f32.json"
  timeout "$(left 60 180)" $T --autocast bf16 --out "$out/mixed_torch_bf16.json"
  timeout "$(left 60 120)" $T --autocast f16 --modes eager --out "$out/mixed_torch_f16.json"
  python3 bench/compare.py "$out/mixed_vk_w2.json" "$out/mixed_vk_w6.json" "$out/mixed_torch_f32.json" \
    "$out/mixed_torch_bf16.json" "$out/mixed_torch_f16.json" --ours train/vulkan | tee "$out/mixed.md"
  loss_curves | tee -a "$out/mixed.md"
  echo "== interp_f32 next to PyTorch CPU: W2_small f32 and bf16"
  timeout "$(left 40 10)" "$B" '--benchmark_filter=^train/interp_f32/W2_small(_bf16)?/' --benchmark_out="$out/mixed_cpu_tg.json" $J
  timeout "$(left 40)" python3 bench/pytorch_train.py --device cpu --workloads W2_small --out "$out/mixed_cpu_f32.json"
  timeout "$(left 40)" python3 bench/pytorch_train.py --device cpu --workloads W2_small --autocast bf16 \
    --out "$out/mixed_cpu_bf16.json"
  python3 bench/compare.py "$out/mixed_cpu_tg.json" "$out/mixed_cpu_f32.json" "$out/mixed_cpu_bf16.json" \
    --ours train/interp_f32 | tee -a "$out/mixed.md"
  (cd "$out" && tar czf mixed_json.tar.gz mixed_*.json && rm -f mixed_*.json)
  echo "mixed: $SECONDS s"
  exit 0
fi

if [ "$what" = attention ]; then
  # Fused attention, both sides, one call: tg_train_bench's train/vulkan/W2, W2_bf16, W6, W6_bf16
  # (tg::attention inside examples/models.h's MultiHeadAttention) next to pytorch_train.py's
  # mirror (matmul, -inf mask, softmax) and --sdpa (scaled_dot_product_attention), eager and CUDA
  # graph, fp32 and bf16 autocast; the largest W6 batch of tg_w6_capacity (fp32; bf16 too when its
  # --help lists --precision; from batch 64, since a W6 try compiles for 15-20 s and a search from 1
  # spent its 60 s below 16 on the H200) and of pytorch_train.py --w6-capacity --sdpa eager (fp32, bf16);
  # then torch.compile (--sdpa first, the mirror after, as long as time is left; each report keeps
  # the workloads that finished). bench/attention_report.py's tables in <out-dir>/attention.md, the
  # whole console in attention_log.txt, the JSON in attention_json.tar.gz. Bounded by
  # TG_ATTENTION_SECONDS (default 550); TG_ATTENTION_PARTS (default "train capacity compile") picks
  # the parts, e.g. TG_ATTENTION_PARTS=compile for a second call if the first ran out of time.
  export TG_W6_BATCH=${TG_W6_BATCH:-8} TG_W6_STEPS=${TG_W6_STEPS:-5} PYTHONUNBUFFERED=1
  exec > >(tee -a "$out/attention_log.txt") 2>&1
  tee_pid=$!
  parts=" ${TG_ATTENTION_PARTS:-train capacity compile} "
  deadline=$((SECONDS + ${TG_ATTENTION_SECONDS:-550}))
  # left CAP [RESERVE]: seconds for the next command: at most CAP, leaving RESERVE for what follows.
  left() { local l=$((deadline - SECONDS - ${2:-0})); ((l > $1)) && l=$1; ((l < 5)) && l=5; echo $l; }
  # bounded SECONDS COMMAND...: the command under timeout (killed 10 s after it ignores the TERM),
  # its exit status said when not 0; skipped once the deadline has passed, so the call stays bounded.
  bounded() {
    local t=$1 rc
    shift
    if ((deadline - SECONDS < 5)); then
      echo "  (skipped: TG_ATTENTION_SECONDS spent)"
      return 0
    fi
    timeout -k 10 "$t" "$@"
    rc=$?
    if ((rc == 124)); then echo "  (stopped at its limit of $t s)"; elif ((rc)); then echo "  (exit status $rc)"; fi
    return 0
  }
  # A capacity search of T seconds may start tries for T - 30 (the last one's time to finish), 1 at least.
  budget() { local b=$(($1 - 30)); ((b < 1)) && b=1; echo $b; }
  B="$build/bench/tg_train_bench"
  T="python3 bench/pytorch_train.py --device cuda --workloads W2 --w6"
  C="python3 bench/pytorch_train.py --device cuda --w6-capacity --modes eager --sdpa --capacity-steps 2"
  if [[ $parts == *" train "* ]]; then
    echo "== W2 f32/bf16: Vulkan (fused attention)"
    bounded "$(left 90 430)" "$B" '--benchmark_filter=^train/vulkan/W2(_bf16)?/' --benchmark_out="$out/attn_vk_w2.json" $J
    echo "== W6 f32/bf16 at batch $TG_W6_BATCH, $TG_W6_STEPS steps: Vulkan (fused attention)"
    TG_BENCH_W6=1 bounded "$(left 150 350)" "$B" '--benchmark_filter=^train/vulkan/W6(_bf16)?/' \
      --benchmark_out="$out/attn_vk_w6.json" $J
    echo "== PyTorch CUDA eager and graph: the mirror's attention, then SDPA; fp32, then bf16 autocast"
    bounded "$(left 60 320)" $T --out "$out/attn_torch_f32.json"
    bounded "$(left 60 290)" $T --sdpa --out "$out/attn_torch_f32_sdpa.json"
    bounded "$(left 60 260)" $T --autocast bf16 --out "$out/attn_torch_bf16.json"
    bounded "$(left 60 230)" $T --autocast bf16 --sdpa --out "$out/attn_torch_bf16_sdpa.json"
  fi
  if [[ $parts == *" capacity "* ]]; then
    echo "== the largest W6 batch: Vulkan fp32"
    t=$(left 80 200)
    bounded "$t" "$build/bench/tg_w6_capacity" --start 64 --steps 1 --budget-s "$(budget "$t")" \
      --out "$out/attn_capacity_vk_f32.jsonl" | grep -v '^B '
    if "$build/bench/tg_w6_capacity" --help 2>&1 | grep -q -- --precision; then
      echo "== the largest W6 batch: Vulkan bf16"
      t=$(left 80 180)
      bounded "$t" "$build/bench/tg_w6_capacity" --precision bf16 --start 64 --steps 1 --budget-s "$(budget "$t")" \
        --out "$out/attn_capacity_vk_bf16.jsonl" | grep -v '^B '
    fi
    echo "== the largest W6 batch: PyTorch eager with SDPA, fp32 and bf16 autocast"
    t=$(left 75 160)
    bounded "$t" $C --capacity-budget-s "$(budget "$t")" --out "$out/attn_capacity_torch_f32_sdpa.jsonl"
    t=$(left 75 120)
    bounded "$t" $C --autocast bf16 --capacity-budget-s "$(budget "$t")" --out "$out/attn_capacity_torch_bf16_sdpa.jsonl"
  fi
  if [[ $parts == *" compile "* ]]; then
    echo "== PyTorch torch.compile (default mode; compile time apart): SDPA, then the mirror's attention"
    bounded "$(left 150 110)" $T --modes compile --sdpa --out "$out/attn_torch_compile_f32_sdpa.json"
    bounded "$(left 150 60)" $T --modes compile --autocast bf16 --sdpa --out "$out/attn_torch_compile_bf16_sdpa.json"
    bounded "$(left 150 35)" $T --modes compile --out "$out/attn_torch_compile_f32.json"
    bounded "$(left 150 10)" $T --modes compile --autocast bf16 --out "$out/attn_torch_compile_bf16.json"
  fi
  python3 bench/attention_report.py --dir "$out" | tee "$out/attention.md"
  # The device tool brings back 8 files at most: the JSON reports travel as one archive.
  (cd "$out" && tar czf attention_json.tar.gz attn_* && rm -f attn_*)
  echo "attention: $SECONDS s"
  exec >&- 2>&-
  wait "$tee_pid"  # the log is whole before the call returns
  exit 0
fi

if [ "$what" = large ]; then
  echo "== vk tests at large sizes"
  TG_VK_LARGE=1 TG_VK_VALIDATION=1 timeout 300 "$build/tests/tg_vk_tests" \
    --gtest_filter='*Large*:VkTest.W2AtFull*:VkTest.APlanAbove*:VkTest.ManyBlocks*' >"$out/vk_large.txt" 2>&1
  echo "tg_vk_tests (large) exit $?" | tee -a "$out/vk_large.txt"
  grep -E "^plan:|^W2 step|^loss|OK \]|FAILED|SKIPPED|PASSED" "$out/vk_large.txt"
  echo "== descriptors against buffer device addresses"
  P="$build/bench/tg_vk_stream_probe"
  timeout 120 "$P" --mode stream --only bda_ --out "$out/bda_2e26.csv" | tail -25
  timeout 120 "$P" --mode stream --n 2415919104 --only bda_addr --out "$out/bda_9gib.csv" | tail -15
  exit 0
fi

echo "== workloads"
"$build/bench/tg_vk_workloads_bench" --benchmark_out="$out/vk_workloads.json" $J
python3 bench/pytorch_workloads.py --device cuda --out "$out/torch_cuda.json"
python3 bench/compare.py "$out/vk_workloads.json" "$out/torch_cuda.json" | tee "$out/workloads.md"
# W5 alone as well: a first measurement saw it slower after W3/W4 in the same process.
"$build/bench/tg_vk_workloads_bench" --benchmark_filter=W5 --benchmark_out="$out/vk_w5_alone.json" $J

echo "== vk tests (validation on)"
# The whole suite took 315 s on an H100 under validation (2026-11-25): the run's 600 s per command
# leaves room for the workloads before it.
TG_VK_VALIDATION=1 timeout 480 "$build/tests/tg_vk_tests" --gtest_brief=1 >"$out/vk_tests.txt" 2>&1
echo "tg_vk_tests exit $?" | tee -a "$out/vk_tests.txt"
tail -5 "$out/vk_tests.txt"

[ "$what" = vk ] && exit 0
echo "== every op on Vulkan"
TG_BENCH_ITERATIONS=${TG_BENCH_ITERATIONS:-3} timeout 200 "$build/bench/tg_vk_ops_bench" --benchmark_out="$out/vk_ops.json" $J >"$out/vk_ops.txt" 2>&1
tail -3 "$out/vk_ops.txt"
python3 bench/compare.py "$out/vk_ops.json" >"$out/ops.md" 2>&1
