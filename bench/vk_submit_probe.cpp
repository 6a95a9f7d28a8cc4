// tg_vk_stream_probe --submit: where does the time of one tiny submission go? A `Program::run` of a
// one-element add costs 550-600 us of wall time on an H200 while its dispatch takes microseconds;
// a training step of W1 is dominated by it. Each variant submits a small command buffer many times
// and times, on the host, the phases of one submission:
//   submit  the vkQueueSubmit call itself;
//   start   until the command buffer's first command (a 4-byte fill into host-visible memory)
//           is visible to the host: the device has begun the work;
//   end     until its last command (another fill) is visible: the device has finished;
//   done    until the fence says so (the library's signal that a run is over).
// start - submit is the device's latency to pick up work, done - end the fence's signalling
// latency. Without markers only `submit` and `done` are measured.
#include <vulkan/vulkan.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "vk/buffer.h"
#include "vk/commands.h"
#include "vk_stream_probe.h"

namespace tg_probe {

namespace {

using Clock = std::chrono::steady_clock;

// library: tg::vk::submit_and_wait (a pooled fence, polled); fresh_fence: polling a fence created
// before and destroyed after each submission (what the library did before it pooled them).
enum class Wait { library, blocking, polling, fresh_fence };

struct SubmitVariant {
  std::string name;
  Wait wait = Wait::polling;
  bool markers = true;
  int fills = 0;  // tiny device-local fills between the markers, each after a barrier
};

struct Phases {
  std::vector<double> submit, start, end, done;
};

double median(std::vector<double> x) {
  if (x.empty()) return 0.0;
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

double percentile(std::vector<double> x, double p) {
  if (x.empty()) return 0.0;
  std::sort(x.begin(), x.end());
  return x[static_cast<std::size_t>(p * double(x.size() - 1))];
}

void transfer_barrier(VkCommandBuffer cmd, bool to_host) {
  VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  b.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  b.dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT | (to_host ? VK_ACCESS_HOST_READ_BIT : 0);
  vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_TRANSFER_BIT | (to_host ? VK_PIPELINE_STAGE_HOST_BIT : 0), 0, 1, &b, 0,
                       nullptr, 0, nullptr);
}

double since_us(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

// Spins until the 4-byte word at `at` holds `value` (written by the device), for at most 1 s.
bool spin_until(const volatile std::uint32_t* at, std::uint32_t value) {
  const auto give_up = Clock::now() + std::chrono::seconds(1);
  while (*at != value) {
    if (Clock::now() > give_up) return false;
  }
  return true;
}

Phases time_variant(const Ctx& ctx, const SubmitVariant& v, int iterations, tg::vk::Buffer& markers,
                    tg::vk::Buffer& scratch) {
  constexpr std::uint32_t k_started = 0x51A27ED0u, k_ended = 0xE7DEDu;
  tg::vk::CommandBuffer cmd(ctx);
  cmd.begin(false);
  const VkCommandBuffer c = cmd.handle();
  if (v.markers) {
    vkCmdFillBuffer(c, markers.handle(), 0, 4, k_started);
    transfer_barrier(c, true);
  }
  for (int i = 0; i < v.fills; ++i) {
    if (i > 0) transfer_barrier(c, false);
    vkCmdFillBuffer(c, scratch.handle(), 4 * static_cast<VkDeviceSize>(i % 64), 4, static_cast<std::uint32_t>(i));
  }
  if (v.markers) {
    transfer_barrier(c, false);
    vkCmdFillBuffer(c, markers.handle(), 4, 4, k_ended);
    transfer_barrier(c, true);
  }
  cmd.end();

  const VkDevice dev = ctx->device();
  VkFenceCreateInfo fence_info{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkFence fence = VK_NULL_HANDLE;
  if (v.wait != Wait::fresh_fence) ctx->check(vkCreateFence(dev, &fence_info, nullptr, &fence), "creating a fence");
  auto* words = reinterpret_cast<volatile std::uint32_t*>(markers.mapped());
  Phases p;
  for (int it = 0; it < iterations + 5; ++it) {  // the first 5 are warm-up, not recorded
    words[0] = 0;
    words[1] = 0;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const auto t0 = Clock::now();
    double submit_us = 0, start_us = 0, end_us = 0;
    if (v.wait == Wait::library) {
      tg::vk::submit_and_wait(ctx, c, "a submit probe");
    } else {
      if (v.wait == Wait::fresh_fence) {
        ctx->check(vkCreateFence(dev, &fence_info, nullptr, &fence), "creating a fence");
      }
      VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
      submit.commandBufferCount = 1;
      submit.pCommandBuffers = &c;
      ctx->check(vkQueueSubmit(ctx->queue(), 1, &submit, fence), "submitting a probe");
      submit_us = since_us(t0);
      if (v.markers) {
        if (!spin_until(words, k_started)) throw tg::Error("the start marker never arrived");
        start_us = since_us(t0);
        if (!spin_until(words + 1, k_ended)) throw tg::Error("the end marker never arrived");
        end_us = since_us(t0);
      }
      if (v.wait == Wait::fresh_fence) {
        VkResult status;
        while ((status = vkGetFenceStatus(dev, fence)) == VK_NOT_READY) {
        }
        ctx->check(status, "polling a probe's fence");
        vkDestroyFence(dev, fence, nullptr);
        fence = VK_NULL_HANDLE;
      } else if (v.wait == Wait::blocking) {
        ctx->check(vkWaitForFences(dev, 1, &fence, VK_TRUE, 1'000'000'000ull), "waiting for a probe");
      } else {
        VkResult status;
        while ((status = vkGetFenceStatus(dev, fence)) == VK_NOT_READY) {
        }
        ctx->check(status, "polling a probe's fence");
      }
    }
    const double done_us = since_us(t0);
    if (v.wait != Wait::library && v.wait != Wait::fresh_fence) {
      ctx->check(vkResetFences(dev, 1, &fence), "resetting a fence");
    }
    if (it < 5) continue;
    p.submit.push_back(submit_us);
    p.start.push_back(start_us);
    p.end.push_back(end_us);
    p.done.push_back(done_us);
  }
  if (fence != VK_NULL_HANDLE) vkDestroyFence(dev, fence, nullptr);
  return p;
}

}  // namespace

int submit_probe(const Ctx& ctx, int iterations, const std::string& csv_path) {
  tg::vk::Buffer markers(ctx, 256, tg::vk::MemoryUse::readback);
  tg::vk::Buffer scratch(ctx, 4096, tg::vk::MemoryUse::device);
  const std::vector<SubmitVariant> variants{
      {"library submit_and_wait, no markers", Wait::library, false, 0},
      {"fence created + destroyed per submit", Wait::fresh_fence, false, 0},
      {"fence blocking, no markers", Wait::blocking, false, 0},
      {"fence polling, no markers", Wait::polling, false, 0},
      {"markers, fence blocking", Wait::blocking, true, 0},
      {"markers, fence polling", Wait::polling, true, 0},
      {"markers + 1 fill", Wait::polling, true, 1},
      {"markers + 40 fills, barriers", Wait::polling, true, 40},
      {"markers + 400 fills, barriers", Wait::polling, true, 400},
      {"library submit_and_wait again (drift)", Wait::library, false, 0},
  };
  std::FILE* csv = csv_path.empty() ? nullptr : std::fopen(csv_path.c_str(), "w");
  if (!csv_path.empty() && !csv) throw tg::Error("cannot write " + csv_path);
  if (csv) std::fprintf(csv, "variant,submit_us,start_us,end_us,done_us,done_p10_us,done_p90_us\n");
  std::printf("\nsubmission phases, median of %d submissions (us since the vkQueueSubmit call began)\n", iterations);
  std::printf("%-40s %9s %9s %9s %9s %9s %9s\n", "variant", "submit", "start", "end", "done", "done_p10", "done_p90");
  for (const SubmitVariant& v : variants) {
    const Phases p = time_variant(ctx, v, iterations, markers, scratch);
    const double s = median(p.submit), st = median(p.start), e = median(p.end), d = median(p.done);
    const double p10 = percentile(p.done, 0.1), p90 = percentile(p.done, 0.9);
    std::printf("%-40s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f\n", v.name.c_str(), s, st, e, d, p10, p90);
    std::fflush(stdout);
    if (csv) std::fprintf(csv, "%s,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f\n", v.name.c_str(), s, st, e, d, p10, p90);
  }
  if (csv) std::fclose(csv);
  return 0;
}

}  // namespace tg_probe
