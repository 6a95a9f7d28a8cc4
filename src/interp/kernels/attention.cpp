// Attention kernels: attention, attention_lse, attention_grad_q and attention_grad_kv. The plain
// math of docs/ops.md, one query row (or one key row for grad_kv) at a time with that row's scores
// in a vector: the oracle's definition, which the Vulkan flash kernels are checked against.
#include "tensorgrad/ir/ops/ids/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "../parallel.h"
#include "families.h"
#include "tensorgrad/ir/launch_paths.h"

namespace tg::interp {

namespace {

const LaunchPath kAttention("interp", "attention", "kernel");
const LaunchPath kAttentionLse("interp", "attention_lse", "kernel");
const LaunchPath kAttentionGradQ("interp", "attention_grad_q", "kernel");
const LaunchPath kAttentionGradKv("interp", "attention_grad_kv", "kernel");

// The sizes of one call: `heads` independent problems (every leading axis together), each with
// q [tq, d], k [tk, d], v [tk, dv].
struct Problem {
  std::int64_t heads = 0, tq = 0, tk = 0, d = 0, dv = 0;
  bool causal = false;
  double scale = 1;

  // Keys query i sees: all of them, or 0..i when causal.
  std::int64_t visible(std::int64_t i) const { return causal ? std::min(i + 1, tk) : tk; }
};

template <class T>
Problem problem_of(const KernelCall<T>& call, bool has_v) {
  const TensorType& q = call.in_type(0);
  const TensorType& k = call.in_type(1);
  Problem p;
  p.tq = q.shape[q.shape.size() - 2];
  p.d = q.shape.back();
  p.tk = k.shape[k.shape.size() - 2];
  p.dv = has_v ? call.in_type(2).shape.back() : 0;
  p.heads = num_elements(Shape(q.shape.begin(), q.shape.end() - 2));
  p.causal = call.attrs().boolean("causal");
  p.scale = call.attrs().real("scale");
  return p;
}

template <class T>
T dot(const T* a, const T* b, std::int64_t n) {
  T total = 0;
  for (std::int64_t i = 0; i < n; ++i) total += a[i] * b[i];
  return total;
}

// Row i's scaled scores against its visible keys, and their maximum.
template <class T>
T scores_of_row(const Problem& p, const T* q_row, const T* k, std::vector<T>& scores, std::int64_t visible) {
  const T scale = static_cast<T>(p.scale);
  T row_max = -std::numeric_limits<T>::infinity();
  for (std::int64_t j = 0; j < visible; ++j) {
    scores[static_cast<std::size_t>(j)] = scale * dot(q_row, k + j * p.d, p.d);
    row_max = std::max(row_max, scores[static_cast<std::size_t>(j)]);
  }
  return row_max;
}

// Calls body(head, i) for every query row of every head, in parallel.
template <class Body>
void for_each_row(std::int64_t heads, std::int64_t rows, std::int64_t cost, Body body) {
  const std::int64_t grain = std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(cost, 1));
  parallel_chunks(heads * rows, grain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) body(r / rows, r % rows);
  });
}

template <class T>
void attention_kernel(const KernelCall<T>& call) {
  kAttention.hit();
  const Problem p = problem_of(call, true);
  const T* q = call.real(0).data();
  const T* k = call.real(1).data();
  const T* v = call.real(2).data();
  T* out = call.output.real.data();
  for_each_row(p.heads, p.tq, p.tk * (p.d + p.dv), [&](std::int64_t h, std::int64_t i) {
    std::vector<T> scores(static_cast<std::size_t>(p.tk));
    const std::int64_t visible = p.visible(i);
    const T* kh = k + h * p.tk * p.d;
    const T* vh = v + h * p.tk * p.dv;
    const T row_max = scores_of_row(p, q + (h * p.tq + i) * p.d, kh, scores, visible);
    T total = 0;
    for (std::int64_t j = 0; j < visible; ++j) {
      scores[static_cast<std::size_t>(j)] = std::exp(scores[static_cast<std::size_t>(j)] - row_max);
      total += scores[static_cast<std::size_t>(j)];
    }
    T* o = out + (h * p.tq + i) * p.dv;
    std::fill(o, o + p.dv, T(0));
    for (std::int64_t j = 0; j < visible; ++j) {
      const T weight = scores[static_cast<std::size_t>(j)];
      for (std::int64_t e = 0; e < p.dv; ++e) o[e] += weight * vh[j * p.dv + e];
    }
    for (std::int64_t e = 0; e < p.dv; ++e) o[e] /= total;
  });
}

template <class T>
void attention_lse_kernel(const KernelCall<T>& call) {
  kAttentionLse.hit();
  const Problem p = problem_of(call, false);
  const T* q = call.real(0).data();
  const T* k = call.real(1).data();
  T* out = call.output.real.data();
  for_each_row(p.heads, p.tq, p.tk * p.d, [&](std::int64_t h, std::int64_t i) {
    std::vector<T> scores(static_cast<std::size_t>(p.tk));
    const std::int64_t visible = p.visible(i);
    const T row_max = scores_of_row(p, q + (h * p.tq + i) * p.d, k + h * p.tk * p.d, scores, visible);
    T total = 0;
    for (std::int64_t j = 0; j < visible; ++j) total += std::exp(scores[static_cast<std::size_t>(j)] - row_max);
    out[h * p.tq + i] = row_max + std::log(total);
  });
}

// The backward ops' inputs: q, k, v, o, g, lse.
template <class T>
struct BackwardInputs {
  const T *q, *k, *v, *o, *g, *lse;
  explicit BackwardInputs(const KernelCall<T>& call)
      : q(call.real(0).data()),
        k(call.real(1).data()),
        v(call.real(2).data()),
        o(call.real(3).data()),
        g(call.real(4).data()),
        lse(call.real(5).data()) {}
};

// dS_ij = P_ij (dP_ij - delta_i), with P_ij = exp(s_ij - lse_i), dP_ij = g_i . v_j and
// delta_i = g_i . o_i.
template <class T>
T score_grad(const Problem& p, const BackwardInputs<T>& in, std::int64_t h, std::int64_t i, std::int64_t j, T delta_i,
             T* probability) {
  const T* q_row = in.q + (h * p.tq + i) * p.d;
  const T* g_row = in.g + (h * p.tq + i) * p.dv;
  const T s = static_cast<T>(p.scale) * dot(q_row, in.k + (h * p.tk + j) * p.d, p.d);
  const T prob = std::exp(s - in.lse[h * p.tq + i]);
  *probability = prob;
  return prob * (dot(g_row, in.v + (h * p.tk + j) * p.dv, p.dv) - delta_i);
}

template <class T>
void attention_grad_q_kernel(const KernelCall<T>& call) {
  kAttentionGradQ.hit();
  const Problem p = problem_of(call, true);
  const BackwardInputs<T> in(call);
  T* out = call.output.real.data();
  const T scale = static_cast<T>(p.scale);
  for_each_row(p.heads, p.tq, p.tk * (p.d + p.dv), [&](std::int64_t h, std::int64_t i) {
    const std::int64_t row = h * p.tq + i;
    const T delta = dot(in.g + row * p.dv, in.o + row * p.dv, p.dv);
    T* dq = out + row * p.d;
    std::fill(dq, dq + p.d, T(0));
    for (std::int64_t j = 0; j < p.visible(i); ++j) {
      T prob = 0;
      const T ds = scale * score_grad(p, in, h, i, j, delta, &prob);
      const T* k_row = in.k + (h * p.tk + j) * p.d;
      for (std::int64_t c = 0; c < p.d; ++c) dq[c] += ds * k_row[c];
    }
  });
}

template <class T>
void attention_grad_kv_kernel(const KernelCall<T>& call) {
  kAttentionGradKv.hit();
  const Problem p = problem_of(call, true);
  const BackwardInputs<T> in(call);
  T* out = call.output.real.data();
  const T scale = static_cast<T>(p.scale);
  std::vector<T> delta(static_cast<std::size_t>(p.heads * p.tq));
  for (std::int64_t row = 0; row < p.heads * p.tq; ++row) {
    delta[static_cast<std::size_t>(row)] = dot(in.g + row * p.dv, in.o + row * p.dv, p.dv);
  }
  const std::int64_t width = p.d + p.dv;
  for_each_row(p.heads, p.tk, p.tq * (p.d + p.dv), [&](std::int64_t h, std::int64_t j) {
    T* dk = out + (h * p.tk + j) * width;
    T* dv = dk + p.d;
    std::fill(dk, dk + width, T(0));
    // Causal: only queries i >= j see key j.
    for (std::int64_t i = p.causal ? j : 0; i < p.tq; ++i) {
      T prob = 0;
      const T ds = scale * score_grad(p, in, h, i, j, delta[static_cast<std::size_t>(h * p.tq + i)], &prob);
      const T* q_row = in.q + (h * p.tq + i) * p.d;
      const T* g_row = in.g + (h * p.tq + i) * p.dv;
      for (std::int64_t c = 0; c < p.d; ++c) dk[c] += ds * q_row[c];
      for (std::int64_t e = 0; e < p.dv; ++e) dv[e] += prob * g_row[e];
    }
  });
}

}  // namespace

template <class T>
void register_attention_kernels(KernelTable<T>& table) {
  table[static_cast<std::size_t>(op::Attention)] = attention_kernel<T>;
  table[static_cast<std::size_t>(op::AttentionLse)] = attention_lse_kernel<T>;
  table[static_cast<std::size_t>(op::AttentionGradQ)] = attention_grad_q_kernel<T>;
  table[static_cast<std::size_t>(op::AttentionGradKv)] = attention_grad_kv_kernel<T>;
}

template void register_attention_kernels<float>(KernelTable<float>&);
template void register_attention_kernels<double>(KernelTable<double>&);

}  // namespace tg::interp
