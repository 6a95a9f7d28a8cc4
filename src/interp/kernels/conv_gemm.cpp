// interp_f32's convolutions as matrix products (conv_gemm.h). With K = C/groups * KH * KW taps,
// P = OH * OW output positions, Og = O / groups and cols(x[n, g]) the [K, P] im2col matrix of one
// image's group (zeros where a tap falls in the padding):
//   conv2d              y[n, g]  = w_g [Og, K] . cols(x[n, g])              (a GEMM per image piece)
//   conv2d_input_grad   stride 1 and Cg >= Og: the forward on g with w's taps flipped
//                       (input_grad_as_forward); else dcols = w_g^T [K, Og] . g[n, g] [Og, P], then col2im adds each
//                       tap's
//                                  column into the image (the transposed convolution)
//   conv2d_weight_grad  dw_g^T   = sum_n cols(x[n, g]) [K, P] . g[n, g]^T [P, Og]
// Everything runs on gemm.h's blocked kernel, which sums each output in ascending k, with fused
// multiply-adds where the CPU has FMA (GemmView::fused: one rounding per term, twice the rate of
// a multiply and an add; conv bits need not be the plain loop's, only thread-count free). Order of the
// sums, fixed by the shape alone so the bits never depend on the thread count:
//   conv2d: one chain over (c', a, b), as the plain loop (any split of the columns is bit-neutral);
//   conv2d_input_grad: as a forward, one chain over (o, flipped a, flipped b); else per dcols element
//     one chain over o, then per dx element the taps in the order (column piece, a, b);
//   conv2d_weight_grad: the (n, p) axis is cut into chunks, consecutive chunks summed as one chain
//     into a partial "slot", and the slots added in ascending order.
// Parallel over tasks that each own their outputs: (column chunk, group) for the forward, (image,
// group, channel block) for the input gradient (col2im writes only its own channel planes), (slot,
// group, channel block) for the weight gradient, whose slots are then added in parallel over the
// weight's elements. A task's im2col scratch stays near kColsBudget floats.
#include "conv_gemm.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "../parallel.h"
#include "gemm.h"
#include "tensorgrad/ir/launch_paths.h"

namespace tg::interp {

namespace {

// im2col / dcols scratch per task: 512 KB, a core's L2 on the 2-core development VM, so the GEMM
// reads back what im2col wrote from cache (2^14 to 2^18 floats timed alike on a 16-core Xeon with
// 2 MB of L2). Larger images are cut into pieces of output positions.
constexpr std::int64_t kColsBudget = 1 << 17;
// Tasks a call aims for (when the problem has that many columns): enough for many cores (32 timed
// best of 32, 64 and 128 on 16 cores: smaller tasks cost more than they balance). The forward and
// input-gradient splits do not change any bits; the weight gradient's does, but it depends on the
// shape only.
constexpr std::int64_t kTargetTasks = 32;
// Fewest output positions per forward / input-gradient piece, and per weight-gradient chunk (each
// chunk of the weight gradient adds a partial of the weight's size: long chunks keep that cheap).
constexpr std::int64_t kMinColumns = 64;
constexpr std::int64_t kMinDepth = 256;
// Weight-gradient partial slots: at most this many, and at most kSlotsBudget floats together.
constexpr std::int64_t kMaxSlots = 32;
constexpr std::int64_t kSlotsBudget = 1 << 21;
// Multiply-adds below which consecutive tasks run as one; additions per task of the weight
// gradient's slot sum.
constexpr std::int64_t kTaskWork = 1 << 16;
constexpr std::int64_t kReduceWork = 1 << 12;

const SizeThreshold kColsBudgetThreshold("interp", "conv2d", "im2col budget (floats)", kColsBudget);
const SizeThreshold kTargetTasksThreshold("interp", "conv2d", "target tasks", kTargetTasks);
const SizeThreshold kMinColumnsThreshold("interp", "conv2d", "fewest columns per piece", kMinColumns);
const SizeThreshold kMinDepthThreshold("interp", "conv2d_weight_grad", "fewest columns per chunk", kMinDepth);
const SizeThreshold kMaxSlotsThreshold("interp", "conv2d_weight_grad", "partial slots", kMaxSlots);
const SizeThreshold kTaskWorkThreshold("interp", "conv2d", "task multiply-adds", kTaskWork);
const SizeThreshold kReduceWorkThreshold("interp", "conv2d_weight_grad", "slot sum additions per task", kReduceWork);

// Whole images per column chunk, or pieces of one image's output positions.
const LaunchPath kForwardImages("interp", "conv2d", "gemm_whole_images");
const LaunchPath kForwardPieces("interp", "conv2d", "gemm_image_pieces");
// The input gradient: a forward convolution (stride 1, Cg >= Og); else dcols and col2im, in tasks of all
// of a group's channels or blocks of them (few images and groups), one dcols product per image or
// pieces of it (large images).
const LaunchPath kInputGradAsForward("interp", "conv2d_input_grad", "stride_1_as_forward");
const LaunchPath kInputGradAllChannels("interp", "conv2d_input_grad", "gemm_all_channels");
const LaunchPath kInputGradChannelBlocks("interp", "conv2d_input_grad", "gemm_channel_blocks");
const LaunchPath kInputGradWhole("interp", "conv2d_input_grad", "col2im_whole_images");
const LaunchPath kInputGradPieces("interp", "conv2d_input_grad", "col2im_image_pieces");
// The weight gradient: column chunks of whole images or image pieces; all of a group's channels
// per task or blocks of them; one partial slot (the whole sum in one chain) or several added in
// order.
const LaunchPath kWeightGradImages("interp", "conv2d_weight_grad", "gemm_whole_images");
const LaunchPath kWeightGradPieces("interp", "conv2d_weight_grad", "gemm_image_pieces");
const LaunchPath kWeightGradAllChannels("interp", "conv2d_weight_grad", "gemm_all_channels");
const LaunchPath kWeightGradChannelBlocks("interp", "conv2d_weight_grad", "gemm_channel_blocks");
const LaunchPath kWeightGradOneSlot("interp", "conv2d_weight_grad", "one_slot");
const LaunchPath kWeightGradSlots("interp", "conv2d_weight_grad", "ordered_slots");

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }

// Scratch that lives with the thread: a task fills and reads it within one body call (no nested
// parallelism), and it only grows, to at most a few kColsBudget.
std::vector<float>& scratch(int which, std::int64_t size) {
  thread_local std::vector<float> buffers[2];
  std::vector<float>& b = buffers[which];
  if (static_cast<std::int64_t>(b.size()) < size) b.resize(static_cast<std::size_t>(size));
  return b;
}

// The flat (image, output position) axis cut into chunks: `images` whole images per chunk when an
// image's P positions fit in `columns`, else each image cut into `pieces` pieces of `piece`
// positions (a multiple of the micro tile's width, so only the last piece has ragged columns).
struct ColumnPlan {
  std::int64_t n = 0, p = 0;
  std::int64_t images = 1, pieces = 1, piece = 0, chunks = 0;

  ColumnPlan(std::int64_t n_images, std::int64_t positions, std::int64_t columns) : n(n_images), p(positions) {
    if (p <= columns) {
      images = std::min(n, std::max<std::int64_t>(1, columns / p));
      piece = p;
      chunks = ceil_div(n, images);
    } else {
      piece = std::min(p, round_up(ceil_div(p, ceil_div(p, columns)), kGemmMicroCols<float>));
      pieces = ceil_div(p, piece);
      chunks = n * pieces;
    }
  }
  std::int64_t chunk_columns() const { return pieces > 1 ? piece : images * p; }
  // visit(n, p0, p1) for each image piece of chunk `chunk`, in order.
  template <class F>
  void for_each_segment(std::int64_t chunk, F&& visit) const {
    if (pieces > 1) {
      const std::int64_t p0 = (chunk % pieces) * piece;
      visit(chunk / pieces, p0, std::min(p, p0 + piece));
      return;
    }
    for (std::int64_t i = chunk * images; i < std::min(n, (chunk + 1) * images); ++i) visit(i, std::int64_t{0}, p);
  }
};

// Columns per chunk: about the problem's columns over the tasks wanted, within [least, budget / rows].
std::int64_t chunk_columns(std::int64_t total, std::int64_t tasks_per_chunk, std::int64_t rows, std::int64_t least) {
  const std::int64_t wanted = ceil_div(total, std::max<std::int64_t>(1, kTargetTasks / tasks_per_chunk));
  return std::clamp(wanted, least, std::max(least, kColsBudget / std::max<std::int64_t>(rows, 1)));
}

// The output columns j whose input column j * stride + offset lies in [0, extent), as [lo, hi)
// within [0, count).
struct Span {
  std::int64_t lo, hi;
};
Span valid_span(std::int64_t offset, std::int64_t stride, std::int64_t extent, std::int64_t count) {
  const std::int64_t lo = std::min(count, offset >= 0 ? 0 : ceil_div(-offset, stride));
  const std::int64_t last = extent - 1 - offset;
  const std::int64_t hi = last < 0 ? 0 : last / stride + 1;
  return {lo, std::clamp(hi, lo, count)};
}

// Walks the taps (c', a, b) of `channels` channels and, for each, the output rows that positions
// [p0, p1) cover: row(c', q, at, ih, j0, j1, col_off, in) with q the tap's index (its row of the
// cols matrix), `at` the column of output (i, j0) there, ih the input row (maybe outside the image),
// [j0, j1) the output columns of row i in range, and `in` those whose input column j * stride_w +
// col_off lies inside the image. Shared by im2col and col2im so they agree on every index.
template <class F>
void for_each_tap_row(const ConvGeometry& geo, std::int64_t channels, std::int64_t p0, std::int64_t p1, F&& row) {
  // The first row's start divided out once: a division per output row costs as much as copying
  // a small image's row.
  const std::int64_t first_row = p0 / geo.ow;
  const std::int64_t first_col = p0 - first_row * geo.ow;
  std::int64_t q = 0;
  for (std::int64_t c = 0; c < channels; ++c) {
    for (std::int64_t a = 0; a < geo.kh; ++a) {
      const std::int64_t row_off = a * geo.dil_h - geo.pad_h;
      for (std::int64_t b = 0; b < geo.kw; ++b, ++q) {
        const std::int64_t col_off = b * geo.dil_w - geo.pad_w;
        const Span js = valid_span(col_off, geo.stride_w, geo.w, geo.ow);
        std::int64_t i = first_row;
        std::int64_t j0 = first_col;
        for (std::int64_t pos = p0; pos < p1; ++i, j0 = 0) {
          const std::int64_t j1 = std::min(geo.ow, j0 + (p1 - pos));
          const std::int64_t lo = std::clamp(js.lo, j0, j1);
          row(c, q, pos - p0, i * geo.stride_h + row_off, j0, j1, col_off, Span{lo, std::clamp(js.hi, lo, j1)});
          pos += j1 - j0;
        }
      }
    }
  }
}

// cols[q * (p1 - p0) + pos - p0] = tap q's input for output position pos, zero in the padding, for
// `channels` channels of one image starting at `x`.
void im2col(const ConvGeometry& geo, const float* x, std::int64_t channels, std::int64_t p0, std::int64_t p1,
            float* cols) {
  const std::int64_t len = p1 - p0;
  const std::int64_t plane = geo.h * geo.w;
  const std::int64_t sw = geo.stride_w;
  for_each_tap_row(geo, channels, p0, p1,
                   [&](std::int64_t c, std::int64_t q, std::int64_t at, std::int64_t ih, std::int64_t j0,
                       std::int64_t j1, std::int64_t col_off, Span in) {
                     float* out = cols + q * len + at;  // out[j - j0] for j in [j0, j1)
                     if (ih < 0 || ih >= geo.h) {
                       std::fill(out, out + (j1 - j0), 0.0f);
                       return;
                     }
                     const float* src = x + c * plane + ih * geo.w;  // src[j * sw + col_off] for j in `in`
                     std::fill(out, out + (in.lo - j0), 0.0f);
                     if (sw == 1) {  // (an empty `in` forms no pointer before src: a tap in the padding)
                       if (in.lo < in.hi)
                         std::copy(src + (in.lo + col_off), src + (in.hi + col_off), out + (in.lo - j0));
                     } else {
                       for (std::int64_t j = in.lo; j < in.hi; ++j) out[j - j0] = src[j * sw + col_off];
                     }
                     std::fill(out + (in.hi - j0), out + (j1 - j0), 0.0f);
                   });
}

// The adjoint: the `channels` planes at `dx` += each tap's row of dcols at its input positions,
// taps in order (c', a, b).
void col2im(const ConvGeometry& geo, const float* dcols, std::int64_t channels, std::int64_t p0, std::int64_t p1,
            float* dx) {
  const std::int64_t len = p1 - p0;
  const std::int64_t plane = geo.h * geo.w;
  const std::int64_t sw = geo.stride_w;
  for_each_tap_row(geo, channels, p0, p1,
                   [&](std::int64_t c, std::int64_t q, std::int64_t at, std::int64_t ih, std::int64_t j0, std::int64_t,
                       std::int64_t col_off, Span in) {
                     if (ih < 0 || ih >= geo.h || in.lo == in.hi) return;
                     const float* from = dcols + (q * len + at + (in.lo - j0));
                     float* to = dx + c * plane + ih * geo.w + in.lo * sw + col_off;
                     const std::int64_t count = in.hi - in.lo;
                     if (sw == 1) {
                       for (std::int64_t j = 0; j < count; ++j) to[j] += from[j];
                     } else {
                       for (std::int64_t j = 0; j < count; ++j) to[j * sw] += from[j];
                     }
                   });
}

std::int64_t grain(std::int64_t work_per_task) {
  return std::max<std::int64_t>(1, kTaskWork / std::max<std::int64_t>(work_per_task, 1));
}

}  // namespace

void conv2d_f32(const ConvGeometry& geo, const float* x, const float* w, float* y) {
  const std::int64_t k = geo.taps();
  const std::int64_t p = geo.oh * geo.ow;
  const std::int64_t og = geo.o_per_group();
  if (geo.n * geo.o * p == 0) return;
  const ColumnPlan plan(geo.n, p, chunk_columns(geo.n * p, geo.groups, k, kMinColumns));
  (plan.pieces > 1 ? kForwardPieces : kForwardImages).hit();
  const std::int64_t tasks = plan.chunks * geo.groups;
  parallel_chunks(tasks, grain(og * k * plan.chunk_columns()), [&](std::int64_t t0, std::int64_t t1) {
    float* cols = scratch(0, k * std::min(p, plan.chunk_columns())).data();
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t g = t % geo.groups;
      plan.for_each_segment(t / geo.groups, [&](std::int64_t n, std::int64_t p0, std::int64_t p1) {
        im2col(geo, x + (n * geo.c + g * geo.c_per_group()) * geo.h * geo.w, geo.c_per_group(), p0, p1, cols);
        const std::int64_t len = p1 - p0;
        gemm_serial(
            GemmView<float>{w + g * og * k, cols, y + (n * geo.o + g * og) * p + p0, og, len, k, k, len, p, true},
            false);
      });
    }
  });
}

namespace {

// With stride 1 the transposed convolution is a forward one: dx = conv(g, w') with each group's
// channel axes swapped, the taps flipped and padding dil * (k - 1) - pad (negative: a crop), so it
// runs as the forward's GEMM with Og * KH * KW terms deep (col2im's products are only Og deep).
// Each dx element is one chain over (o, a', b'), a' = KH - 1 - a.
void input_grad_as_forward(const ConvGeometry& geo, const float* g, const float* w, float* dx) {
  ConvGeometry t = geo;
  t.c = geo.o, t.h = geo.oh, t.w = geo.ow;
  t.o = geo.c, t.oh = geo.h, t.ow = geo.w;
  t.pad_h = geo.dil_h * (geo.kh - 1) - geo.pad_h;
  t.pad_w = geo.dil_w * (geo.kw - 1) - geo.pad_w;
  const std::int64_t cg = geo.c_per_group();
  const std::int64_t og = geo.o_per_group();
  const std::int64_t taps = geo.kh * geo.kw;
  std::vector<float> flipped(static_cast<std::size_t>(geo.c * og * taps));  // [C, O / groups, KH, KW]
  for (std::int64_t gi = 0; gi < geo.groups; ++gi)
    for (std::int64_t c = 0; c < cg; ++c)
      for (std::int64_t o = 0; o < og; ++o) {
        const float* from = w + ((gi * og + o) * cg + c) * taps;
        float* to = flipped.data() + ((gi * cg + c) * og + o) * taps;
        for (std::int64_t q = 0; q < taps; ++q) to[q] = from[taps - 1 - q];
      }
  conv2d_f32(t, g, flipped.data(), dx);
}

}  // namespace

void conv2d_input_grad_f32(const ConvGeometry& geo, const float* g, const float* w, float* dx) {
  const std::int64_t taps = geo.kh * geo.kw;
  const std::int64_t cg = geo.c_per_group();
  const std::int64_t k = geo.taps();
  const std::int64_t p = geo.oh * geo.ow;
  const std::int64_t og = geo.o_per_group();
  const std::int64_t plane = geo.h * geo.w;
  if (geo.n * geo.c * plane == 0) return;
  // The forward's im2col of g copies Og * KH * KW rows per position where col2im adds Cg * KH * KW;
  // measured (H200 host, 3x3): the forward way wins at Cg = Og (16 and 64 channels: 31 against 23,
  // 47 against 41 GFLOP/s on a core) and loses at Cg < Og (1 -> 16: 2 against 14; 16 -> 32: 18
  // against 23).
  if (geo.stride_h == 1 && geo.stride_w == 1 && cg >= og) {
    kInputGradAsForward.hit();
    return input_grad_as_forward(geo, g, w, dx);
  }
  // w_g^T [K, Og] per group, so the product reads rows of taps with unit stride.
  std::vector<float> wt(static_cast<std::size_t>(geo.groups * k * og));
  for (std::int64_t gi = 0; gi < geo.groups; ++gi)
    for (std::int64_t o = 0; o < og; ++o)
      for (std::int64_t q = 0; q < k; ++q) wt[(gi * k + q) * og + o] = w[(gi * og + o) * k + q];
  // Blocks of channels when images and groups alone give too few tasks.
  const std::int64_t wanted_blocks = std::clamp<std::int64_t>(ceil_div(kTargetTasks, geo.n * geo.groups), 1, cg);
  const std::int64_t block = ceil_div(cg, wanted_blocks);
  const std::int64_t blocks = ceil_div(cg, block);
  const std::int64_t piece =
      std::min(p, std::max(kMinColumns, kColsBudget / (block * taps) / kGemmMicroCols<float> * kGemmMicroCols<float>));
  (blocks > 1 ? kInputGradChannelBlocks : kInputGradAllChannels).hit();
  (piece < p ? kInputGradPieces : kInputGradWhole).hit();
  const std::int64_t tasks = geo.n * geo.groups * blocks;
  parallel_chunks(tasks, grain(block * taps * og * p), [&](std::int64_t t0, std::int64_t t1) {
    float* dcols = scratch(0, block * taps * piece).data();
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t c0 = (t % blocks) * block;
      const std::int64_t gi = (t / blocks) % geo.groups;
      const std::int64_t n = t / (blocks * geo.groups);
      const std::int64_t channels = std::min(cg, c0 + block) - c0;
      float* planes = dx + (n * geo.c + gi * cg + c0) * plane;
      std::fill(planes, planes + channels * plane, 0.0f);
      if (og == 0) continue;
      for (std::int64_t p0 = 0; p0 < p; p0 += piece) {
        const std::int64_t len = std::min(p, p0 + piece) - p0;
        gemm_serial(GemmView<float>{wt.data() + (gi * k + c0 * taps) * og, g + (n * geo.o + gi * og) * p + p0, dcols,
                                    channels * taps, len, og, og, p, len, true},
                    false);
        col2im(geo, dcols, channels, p0, p0 + len, planes);
      }
    }
  });
}

void conv2d_weight_grad_f32(const ConvGeometry& geo, const float* x, const float* g, float* dw) {
  const std::int64_t k = geo.taps();
  const std::int64_t p = geo.oh * geo.ow;
  const std::int64_t og = geo.o_per_group();
  const std::int64_t weight = geo.o * k;
  if (weight == 0) return;
  if (geo.n * p == 0) {
    std::fill(dw, dw + weight, 0.0f);
    return;
  }
  // Rows of scratch per column: the im2col matrix and g's transposed piece.
  const ColumnPlan plan(geo.n, p, chunk_columns(geo.n * p, geo.groups, k + og, kMinDepth));
  (plan.pieces > 1 ? kWeightGradPieces : kWeightGradImages).hit();
  // Consecutive chunks share a slot; the slot count depends on the shape alone.
  const std::int64_t most_slots =
      std::max<std::int64_t>(1, std::min(kMaxSlots, kSlotsBudget / std::max<std::int64_t>(weight, 1)));
  const std::int64_t per_slot = ceil_div(plan.chunks, std::min(plan.chunks, most_slots));
  const std::int64_t slots = ceil_div(plan.chunks, per_slot);
  (slots > 1 ? kWeightGradSlots : kWeightGradOneSlot).hit();
  // Blocks of channels (rows of dw_g^T, independent of each other) when slots and groups give too
  // few tasks; they change no sum.
  const std::int64_t cg = geo.c_per_group();
  const std::int64_t taps = geo.kh * geo.kw;
  const std::int64_t block = ceil_div(cg, std::clamp<std::int64_t>(ceil_div(kTargetTasks, slots * geo.groups), 1, cg));
  const std::int64_t blocks = ceil_div(cg, block);
  (blocks > 1 ? kWeightGradChannelBlocks : kWeightGradAllChannels).hit();
  // partial[slot][group] = dw_g^T [K, Og] over the slot's chunks.
  // Every element is written before it is read: no zero fill.
  const std::unique_ptr<float[]> partial(new float[static_cast<std::size_t>(slots * weight)]);
  const std::int64_t segment = std::min(p, plan.chunk_columns());
  const std::int64_t tasks = slots * geo.groups * blocks;
  parallel_chunks(
      tasks, grain(og * block * taps * per_slot * plan.chunk_columns()), [&](std::int64_t t0, std::int64_t t1) {
        float* cols = scratch(0, block * taps * segment).data();
        float* gt = scratch(1, segment * og).data();
        for (std::int64_t t = t0; t < t1; ++t) {
          const std::int64_t c0 = (t % blocks) * block;
          const std::int64_t gi = (t / blocks) % geo.groups;
          const std::int64_t slot = t / (blocks * geo.groups);
          const std::int64_t channels = std::min(cg, c0 + block) - c0;
          float* sum = partial.get() + ((slot * geo.groups + gi) * k + c0 * taps) * og;
          bool accumulate = false;
          for (std::int64_t chunk = slot * per_slot; chunk < std::min(plan.chunks, (slot + 1) * per_slot); ++chunk) {
            plan.for_each_segment(chunk, [&](std::int64_t n, std::int64_t p0, std::int64_t p1) {
              const std::int64_t len = p1 - p0;
              im2col(geo, x + (n * geo.c + gi * cg + c0) * geo.h * geo.w, channels, p0, p1, cols);
              const float* rows = g + (n * geo.o + gi * og) * p + p0;
              for (std::int64_t o = 0; o < og; ++o)
                for (std::int64_t q = 0; q < len; ++q) gt[q * og + o] = rows[o * p + q];
              gemm_serial(GemmView<float>{cols, gt, sum, channels * taps, og, len, len, og, og, true}, accumulate);
              accumulate = true;
            });
          }
        }
      });
  // dw[g * Og + o, q] = the slots' partial[.][g][q, o] added in slot order; a task per (g, q) row
  // of the partials reads them contiguously.
  parallel_chunks(geo.groups * k, std::max<std::int64_t>(1, kReduceWork / (og * slots)),
                  [&](std::int64_t r0, std::int64_t r1) {
                    for (std::int64_t r = r0; r < r1; ++r) {
                      const float* first = partial.get() + r * og;  // slot 0's row (g, q)
                      float* out = dw + (r / k) * og * k + r % k;   // out[o * k] = dw[g * Og + o, q]
                      for (std::int64_t o = 0; o < og; ++o) out[o * k] = first[o];
                      for (std::int64_t s = 1; s < slots; ++s) {
                        const float* part = first + s * weight;
                        for (std::int64_t o = 0; o < og; ++o) out[o * k] += part[o];
                      }
                    }
                  });
}

}  // namespace tg::interp
