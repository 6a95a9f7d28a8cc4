#pragma once
// tg_vk_stream_probe's device side (bench/vk_stream_probe_device.cpp): buffers, pipelines, the
// timed chains and the result check. bench/vk_stream_probe.cpp picks the variants and reports.
#include <vulkan/vulkan.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tensorgrad/vk/context.h"
#include "vk/buffer.h"

namespace tg_probe {

using Ctx = std::shared_ptr<tg::vk::Context>;

inline constexpr VkDeviceSize k_guard = 64 * 1024;  // checked after each output for overruns
inline constexpr float k_fill_value = 1.5f;

struct Options {
  std::uint64_t n = std::uint64_t{1} << 26;
  int dispatches = 20;
  int repeats = 5;
  std::uint32_t sms = 132;  // H200
  std::string out;
  std::string mode = "both";  // stream, submit or both
  int submits = 300;          // submissions per variant of the submit probe
  std::string submit_out;
  std::string only;  // comma-separated pieces of variant names; empty: every variant
  bool bda = true;   // ask for buffer device addresses (the bda_addr_* variants need them)
};

struct Region {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0;
  VkDeviceAddress address = 0;  // of `offset` in `buffer`, for the device-address variants; else 0
};

// Where a, b and the output(s) live; every output has k_guard bytes after it.
struct Layout {
  std::string name;
  Region a, b;
  std::vector<Region> outs;
  std::vector<VkDescriptorSet> sets;  // one per output
};

enum class Kind { shader, copy, fill };
enum class Expect { sum, copy_a, fill };
enum class Stamps { none, pairs, ends };

struct Variant {
  std::string name;
  Kind kind = Kind::shader;
  Expect expect = Expect::sum;
  double bytes_per_element = 12;
  Layout* layout = nullptr;
  VkPipeline pipeline = VK_NULL_HANDLE;
  std::array<std::uint32_t, 3> groups{1, 1, 1};
  bool barriers = true;
  // Operands reached through device addresses in the push constants (a new push per dispatch, as
  // a bound descriptor set per dispatch for the others) instead of descriptors.
  bool addressed = false;
  // What a Program's run puts around its dispatches, added one at a time: the inputs (a and b)
  // copied from host-visible staging first, the output copied to host-visible memory after, and
  // the host idle between submissions (a Program's run converts its inputs and outputs).
  bool upload = false;
  bool readback = false;
  int idle_ms = 0;
  std::string skip;  // non-empty: not run, and why
};

struct Result {
  std::string check;  // "PASS" or "FAIL ..."
  double first_us = 0, median_us = 0, mean_us = 0, min_us = 0, chain_us = 0, ends_us = 0;
};

class DeviceBuffer;

class Probe {
 public:
  Probe(Ctx ctx, const Options& opt);
  Probe(const Probe&) = delete;
  Probe& operator=(const Probe&) = delete;
  ~Probe();

  // Bytes between consecutive tensors of a packed layout: n * 4 rounded up to 256, so every offset
  // is a multiple of minStorageBufferOffsetAlignment.
  VkDeviceSize slot() const { return slot_; }
  std::uint32_t memory_type() const;
  // A device-local buffer (memory chosen as the library chooses it) owned by the probe.
  VkBuffer buffer(VkDeviceSize size, bool dedicated = false);
  // The same as a tg::vk::Buffer with a device address (the context must have them), offset 0.
  Region addressable(VkDeviceSize size);
  void add_sets(Layout& layout);
  // Specialization constants 0, 1, 2: workgroup size, vec4s per invocation, grid-stride.
  VkPipeline pipeline(std::span<const std::uint32_t> spirv, std::uint32_t wg, std::uint32_t vpi, bool grid_stride);
  void upload(const std::vector<float>& host, const std::vector<Region>& to);
  Result run(const Variant& v, const std::vector<float>& a, const std::vector<float>& b);

 private:
  void submit(const char* what, const std::function<void(VkCommandBuffer)>& record);
  void record_chain(VkCommandBuffer cmd, const Variant& v, Stamps stamps);
  std::string verify(const Variant& v, const std::vector<float>& a, const std::vector<float>& b);

  Ctx ctx_;
  Options opt_;
  VkDeviceSize bytes_ = 0, slot_ = 0;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout pipeline_layout_ = VK_NULL_HANDLE;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  VkQueryPool queries_ = VK_NULL_HANDLE;
  std::uint64_t stamp_mask_ = ~std::uint64_t{0};
  std::vector<VkPipeline> pipelines_;
  std::vector<std::unique_ptr<DeviceBuffer>> buffers_;
  std::vector<tg::vk::Buffer> addressable_;
  std::unique_ptr<tg::vk::Buffer> staging_, readback_, inputs_staging_, samples_;
};

// bench/vk_submit_probe.cpp: times the phases of a tiny submission (submit call, device start,
// device end, fence signalled); writes a CSV to `csv_path` when non-empty.
int submit_probe(const Ctx& ctx, int iterations, const std::string& csv_path);

}  // namespace tg_probe
