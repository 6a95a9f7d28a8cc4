#pragma once
// Shared by the data-parallel tests (tests/unit, tests/vk, tests/mpi): ranks as threads of this
// process, and the rows of a classification batch that each rank takes its shard of.
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "tensorgrad/interp/host_tensor.h"
#include "tensorgrad/train/communicator.h"

namespace tg::testing {

// Runs body(rank, communicator) on one thread per rank of a new thread group, and rethrows the
// first exception a rank threw once every thread has ended.
inline void run_ranks(int ranks, const std::function<void(int, std::shared_ptr<Communicator>)>& body) {
  const std::vector<std::shared_ptr<Communicator>> group = make_thread_group(ranks);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r, group[static_cast<std::size_t>(r)]);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

// Rows [first, first + rows) of step `step`'s global batch: "x" [rows, features] of smooth values
// and "label" [rows] in [0, classes), so any rank's shard is a slice of one process's batch.
inline TensorMap classification_rows(int step, std::int64_t first, std::int64_t rows, std::int64_t features,
                                     std::int64_t classes) {
  std::vector<float> x;
  std::vector<std::int32_t> label;
  for (std::int64_t i = first; i < first + rows; ++i) {
    for (std::int64_t j = 0; j < features; ++j)
      x.push_back(std::sin(0.37f * static_cast<float>(i * features + j) + 0.11f * static_cast<float>(step)));
    label.push_back(static_cast<std::int32_t>((i * 7 + step) % classes));
  }
  return {{"x", HostTensor::f32({rows, features}, x)}, {"label", HostTensor::i32({rows}, label)}};
}

}  // namespace tg::testing
