// tg_vk_stream_probe: why does the executor's streaming add of 2^26 floats (W4) reach ~2.2 TB/s on
// an H200 where PyTorch's CUDA add reaches ~4.0 TB/s? Each variant changes one suspect at a time:
// memory layout (power-of-two offsets in one allocation, separate allocations), kernel code (the
// repo kernel's uvec4 + op switch + grid-stride loop, plain float vec4, scalar, vec4s per
// invocation, restrict), launch shape (workgroup size, persistent grids), barriers between
// dispatches, and the timing method itself (per-dispatch TOP/BOTTOM timestamps as the executor
// writes them, against two timestamps around the whole chain). vkCmdCopyBuffer and vkCmdFillBuffer
// give the device's own streaming rate as a reference. The last variants add, one at a time, what
// a Program's run puts around its dispatches (input upload, output readback, host idle time).
// The bda_* variants come in pairs on one block (a, b, c at 0, s, 2s as 1buf): bda_desc_<shape>
// binds the operands through descriptors, bda_addr_<shape> passes their buffer device addresses in
// push constants (probe_shaders/probe_addr.comp), for the scalar and vec4 launch shapes above:
// what addressing values by device address (no maxStorageBufferRange per value) would cost. At an
// n past maxStorageBufferRange only the bda_addr_* variants run.
// --mode submit (or both, the default) also times the phases of a tiny submission
// (bench/vk_submit_probe.cpp): where the ~0.55 ms floor of one Program::run goes.
//
//   tg_vk_stream_probe [--n ELEMENTS] [--dispatches 20] [--repeats 5] [--sms 132] [--out PATH]
//                      [--mode stream|submit|both] [--submits 300] [--submit-out PATH]
//                      [--only NAME,NAME...]   (variants whose names contain one of these)
//                      [--bda on|off]   (off: the context without device addresses, a control)
//
// Per variant: one submission checks the result (outputs poisoned with NaN first, a guard after
// each output), then `repeats` submissions of the chain with per-dispatch timestamps and `repeats`
// with timestamps only around the chain. Columns: median and min per-dispatch time of dispatches
// 2..D (the first is reported apart: it runs after the idle gap of the host's wait), chain =
// (last end - first start) / D with per-dispatch stamps, ends = the same without them. GB/s counts
// 12 bytes per element for an add, 8 for a copy, 4 for a fill.
#include "vk_stream_probe.h"

#include <vulkan/vulkan.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include "examples/command_line.h"
#include "tensorgrad/vk/context.h"

// Generated at build time by glslangValidator --vn (bench/CMakeLists.txt).
#include "probe_spv/probe_addr_scalar.h"
#include "probe_spv/probe_addr_vec4.h"
#include "probe_spv/probe_repo_binary.h"
#include "probe_spv/probe_scalar.h"
#include "probe_spv/probe_vec4.h"
#include "probe_spv/probe_vec4_copy.h"
#include "probe_spv/probe_vec4_restrict.h"

namespace {

using namespace tg_probe;

// The command line (--help lists it with the defaults); `bda` is --bda's word, on or off.
void add_options(CLI::App& app, Options& o, std::string& bda) {
  using tg::examples::at_least;
  app.option_defaults()->always_capture_default();
  app.add_option("--n", o.n, "elements per operand: a positive multiple of 4 below 2^32")
      ->check(tg::examples::not_negative());
  app.add_option("--dispatches", o.dispatches, "dispatches in a chain")->check(at_least(1, "POSITIVE"));
  app.add_option("--repeats", o.repeats, "timed submissions per variant and method")->check(at_least(1, "POSITIVE"));
  app.add_option("--sms", o.sms, "the device's multiprocessors, for the persistent grids")
      ->check(at_least(1, "POSITIVE"));
  app.add_option("--out", o.out, "also write the stream table here");
  app.add_option("--mode", o.mode, "which probes run")->check(CLI::IsMember({"stream", "submit", "both"}));
  app.add_option("--submits", o.submits, "submissions per variant of the submit probe")->check(at_least(1, "POSITIVE"));
  app.add_option("--submit-out", o.submit_out, "also write the submit table here");
  app.add_option("--only", o.only, "run only the variants whose names contain one of these comma-separated pieces");
  app.add_option("--bda", bda, "off: the context without buffer device addresses, a control")
      ->check(CLI::IsMember({"on", "off"}));
}

// Groups as a 2-D grid whose x * y is as close to `groups` as the 65535-per-axis limit allows, so
// the kernels' bounds checks retire at most a few empty groups (2^16 groups -> 32768 x 2).
std::array<std::uint32_t, 3> grid_2d(std::uint64_t groups) {
  const std::uint64_t y = (groups + 65534) / 65535;
  return {static_cast<std::uint32_t>((groups + y - 1) / y), static_cast<std::uint32_t>(y), 1};
}

std::string memory_flags(VkMemoryPropertyFlags f) {
  std::string s;
  if (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) s += "device_local ";
  if (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) s += "host_visible ";
  if (f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) s += "host_coherent ";
  if (f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) s += "host_cached ";
  return s.empty() ? "none" : s;
}

// Deterministic inputs in [-1, 1): a hash per index, far faster than a std:: distribution at 2^26.
std::vector<float> inputs(std::uint64_t n, std::uint64_t seed) {
  std::vector<float> v(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    std::uint64_t z = (i + seed) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
    v[i] = float((z >> 40) & 0xFFFFFF) / float(1 << 23) - 1.f;
  }
  return v;
}

// Where each variant's operands live. Those of the variants before bda_* (allocate_bound) exist only
// at an n whose tensors fit one binding; bda_* ones (allocate_addressed) only with device addresses.
struct Layouts {
  // The executor's layout: one allocation, values packed back to back (a, b, c at 0, 256, 512 MiB
  // for 2^26 floats: power-of-two apart). Then the same with odd padding, and one allocation each.
  Layout one{"1buf"}, pad{"1buf_pad"}, sep{"3alloc"}, ded{"3alloc_dedicated"}, distinct{"distinct_out"};
  Layout blk{"bda_block"};  // the bda_* variants' operands, in memory with device addresses
};

void allocate_bound(Probe& p, Layouts& l, int dispatches) {
  const VkDeviceSize s = p.slot();
  const VkBuffer big = p.buffer(3 * s + k_guard);
  l.one.a = {big, 0};
  l.one.b = {big, s};
  l.one.outs = {{big, 2 * s}};
  const VkDeviceSize pad_b = 68 * 1024, pad_c = 204 * 1024;
  const VkBuffer padded = p.buffer(3 * s + pad_c + k_guard);
  l.pad.a = {padded, 0};
  l.pad.b = {padded, s + pad_b};
  l.pad.outs = {{padded, 2 * s + pad_c}};
  for (Layout* x : {&l.sep, &l.ded}) {
    x->a = {p.buffer(s + k_guard, x == &l.ded), 0};
    x->b = {p.buffer(s + k_guard, x == &l.ded), 0};
    x->outs = {{p.buffer(s + k_guard, x == &l.ded), 0}};
  }
  // One output per dispatch, so the chain needs no barriers (no hazards): what barriers cost.
  l.distinct.a = l.one.a;
  l.distinct.b = l.one.b;
  for (int i = 0; i < dispatches; ++i) l.distinct.outs.push_back({p.buffer(s + k_guard), 0});
  for (Layout* x : {&l.one, &l.pad, &l.sep, &l.ded, &l.distinct}) p.add_sets(*x);
}

// The bda_* variants' block: a, b, c at 0, s, 2s in one addressable allocation, as 1buf (three when
// one would exceed maxMemoryAllocationSize). Returns why the bda_* variants cannot run, or "".
std::string allocate_addressed(Probe& p, const tg::vk::Context& ctx, Layout& blk) {
  const tg::vk::DeviceInfo& info = ctx.info();
  if (!ctx.has_buffer_device_address()) {
    return info.api_version < VK_API_VERSION_1_2
               ? info.name + " is a Vulkan 1.1 device (device addresses are a Vulkan 1.2 feature)"
               : info.name + " lacks the Vulkan 1.2 feature bufferDeviceAddress";
  }
  if (!ctx.has_shader_int64()) return "no shaderInt64 on " + info.name + " (probe_addr.comp adds 64-bit addresses)";
  const VkDeviceSize s = p.slot();
  if (3 * s + k_guard <= info.max_memory_allocation_size) {
    const Region r = p.addressable(3 * s + k_guard);
    blk.a = r;
    blk.b = {r.buffer, s, r.address + s};
    blk.outs = {{r.buffer, 2 * s, r.address + 2 * s}};
  } else if (s + k_guard <= info.max_memory_allocation_size) {
    blk.name = "bda_3alloc";
    blk.a = p.addressable(s + k_guard);
    blk.b = p.addressable(s + k_guard);
    blk.outs = {p.addressable(s + k_guard)};
  } else {
    return "a tensor exceeds maxMemoryAllocationSize (" + std::to_string(info.max_memory_allocation_size) + " bytes)";
  }
  return "";
}

int probe(const Options& opt) {
  tg::vk::ContextOptions options;
  options.pipeline_cache_dir = "";  // the probe's pipelines are no business of the user's cache
  // Printed as they arrive, so messages from the teardown (leaks) show too.
  options.on_validation_message = [](const std::string& m) { std::fprintf(stderr, "validation: %s\n", m.c_str()); };
  options.buffer_device_address = opt.bda;
  const Ctx ctx = tg::vk::Context::create(options);
  const tg::vk::DeviceInfo& info = ctx->info();
  if (!info.timestamps_supported) throw tg::Error(info.name + " has no timestamps on its compute queue");
  if (opt.mode != "stream") {
    std::printf("device: %s\n", info.summary().c_str());
    submit_probe(ctx, opt.submits, opt.submit_out);
    if (opt.mode == "submit") return 0;
  }
  Probe p(ctx, opt);
  // Past one binding's range only the device-address variants can run: nothing else is allocated.
  const std::string unbound = opt.n * 4 <= info.max_storage_buffer_range
                                  ? ""
                                  : "a tensor of " + std::to_string(opt.n * 4) + " bytes exceeds maxStorageBufferRange";
  Layouts l;
  if (unbound.empty()) allocate_bound(p, l, opt.dispatches);
  const std::string no_address = opt.bda ? allocate_addressed(p, *ctx, l.blk) : "--bda off";
  if (unbound.empty() && no_address.empty()) p.add_sets(l.blk);

  const VkMemoryType type = ctx->memory_properties().memoryTypes[p.memory_type()];
  std::printf("device: %s\n", info.summary().c_str());
  std::printf(
      "timestamp period %.3f ns, subgroup %u, maxStorageBufferRange %llu, minStorageBufferOffsetAlignment "
      "%llu, maxMemoryAllocationSize %llu\nmemory type %u: %s(heap %u, %llu MiB)\n",
      info.timestamp_period, info.subgroup_size, (unsigned long long)info.max_storage_buffer_range,
      (unsigned long long)info.min_storage_buffer_offset_alignment, (unsigned long long)info.max_memory_allocation_size,
      p.memory_type(), memory_flags(type.propertyFlags).c_str(), type.heapIndex,
      (unsigned long long)(ctx->memory_properties().memoryHeaps[type.heapIndex].size >> 20));
  std::printf("buffer device addresses: %s\n",
              (no_address.empty() ? "on, bda_* operands in " + l.blk.name : "none: " + no_address).c_str());
  std::printf("n = %llu floats (%.1f MiB per tensor), %d dispatches per chain, %d repeats\n", (unsigned long long)opt.n,
              double(opt.n) * 4 / 1048576, opt.dispatches, opt.repeats);
  std::fflush(stdout);

  const std::vector<float> a = inputs(opt.n, 1), b = inputs(opt.n, 2);
  std::vector<Region> to_a, to_b;
  for (const Layout* x : {&l.one, &l.pad, &l.sep, &l.ded, &l.blk}) {
    if (x->a.buffer != VK_NULL_HANDLE) to_a.push_back(x->a), to_b.push_back(x->b);
  }
  p.upload(a, to_a);
  p.upload(b, to_b);

  const std::uint64_t n4 = opt.n / 4;
  const std::span<const std::uint32_t> repo(k_probe_repo_binary), vec4(k_probe_vec4), scalar(k_probe_scalar),
      restrict_vec4(k_probe_vec4_restrict), copy_vec4(k_probe_vec4_copy), addr_vec4(k_probe_addr_vec4),
      addr_scalar(k_probe_addr_scalar);
  std::vector<Variant> variants;
  auto add = [&](std::string name, Layout& x, std::span<const std::uint32_t> spirv, std::uint32_t wg, std::uint32_t vpi,
                 std::uint64_t cap) {
    Variant v{std::move(name)};
    v.layout = &x;
    v.addressed = spirv.data() == addr_vec4.data() || spirv.data() == addr_scalar.data();
    const bool per_float = spirv.data() == scalar.data() || spirv.data() == addr_scalar.data();
    const std::uint64_t items = per_float ? opt.n : n4;
    const std::uint64_t groups = (items + std::uint64_t{wg} * vpi - 1) / (std::uint64_t{wg} * vpi);
    // cap > 0: a 1-D grid-stride grid of at most `cap` groups, as the executor launches the repo kernel.
    v.groups =
        cap ? std::array<std::uint32_t, 3>{static_cast<std::uint32_t>(std::min(groups, cap)), 1, 1} : grid_2d(groups);
    if (wg > info.max_compute_work_group_invocations || wg > info.max_compute_work_group_size[0])
      v.skip = "workgroup " + std::to_string(wg) + " above the device limit";
    else if (&x == &l.blk && !no_address.empty())
      v.skip = no_address;
    else if (!v.addressed)
      v.skip = unbound;
    if (v.skip.empty()) v.pipeline = p.pipeline(spirv, wg, vpi, cap > 0 && spirv.data() != repo.data());
    variants.push_back(v);
  };
  const std::uint64_t persist_small = 8ull * opt.sms, persist_large = 16ull * opt.sms;
  add("repo_1buf (baseline)", l.one, repo, 256, 1, 65535);
  add("repo_1buf_pad", l.pad, repo, 256, 1, 65535);
  add("repo_3alloc", l.sep, repo, 256, 1, 65535);
  add("repo_3alloc_dedicated", l.ded, repo, 256, 1, 65535);
  add("scalar_wg256_2d", l.one, scalar, 256, 1, 0);
  for (std::uint32_t wg : {128u, 256u, 512u, 1024u}) add("vec4_wg" + std::to_string(wg) + "_2d", l.one, vec4, wg, 1, 0);
  add("vec4x2_wg256_2d", l.one, vec4, 256, 2, 0);
  add("vec4x4_wg256_2d", l.one, vec4, 256, 4, 0);
  add("vec4_restrict_wg256_2d", l.one, restrict_vec4, 256, 1, 0);
  add("vec4x4_restrict_wg256_2d", l.one, restrict_vec4, 256, 4, 0);
  add("vec4_gridstride_65535", l.one, vec4, 256, 1, 65535);
  add("repo_persist_" + std::to_string(persist_small), l.one, repo, 256, 1, persist_small);
  add("repo_persist_" + std::to_string(persist_large), l.one, repo, 256, 1, persist_large);
  add("vec4_persist_" + std::to_string(persist_small), l.one, vec4, 256, 1, persist_small);
  add("vec4_persist_" + std::to_string(persist_large), l.one, vec4, 256, 1, persist_large);
  add("vec4_wg256_2d_1buf_pad", l.pad, vec4, 256, 1, 0);
  add("vec4_wg256_2d_3alloc", l.sep, vec4, 256, 1, 0);
  add("repo_nobarrier_distinct_out", l.distinct, repo, 256, 1, 65535);
  variants.back().barriers = false;
  add("vec4_copy_wg256_2d", l.one, copy_vec4, 256, 1, 0);
  variants.back().expect = Expect::copy_a;
  variants.back().bytes_per_element = 8;
  variants.push_back({"copy_buffer", Kind::copy, Expect::copy_a, 8, &l.one});
  variants.back().skip = unbound;
  variants.push_back({"fill_buffer", Kind::fill, Expect::fill, 4, &l.one});
  variants.back().skip = unbound;
  // What a Program adds around the same chain, one thing at a time, then all together.
  add("repo_1buf + upload", l.one, repo, 256, 1, 65535);
  variants.back().upload = true;
  add("repo_1buf + readback", l.one, repo, 256, 1, 65535);
  variants.back().readback = true;
  add("repo_1buf + idle 200ms", l.one, repo, 256, 1, 65535);
  variants.back().idle_ms = 200;
  add("repo_1buf + upload+readback", l.one, repo, 256, 1, 65535);
  variants.back().upload = variants.back().readback = true;
  add("repo_1buf + upload+idle", l.one, repo, 256, 1, 65535);
  variants.back().upload = true;
  variants.back().idle_ms = 200;
  add("repo_1buf + readback+idle", l.one, repo, 256, 1, 65535);
  variants.back().readback = true;
  variants.back().idle_ms = 200;
  add("repo_1buf + upload+readback+idle", l.one, repo, 256, 1, 65535);
  variants.back().upload = variants.back().readback = true;
  variants.back().idle_ms = 200;
  add("repo_1buf_again (drift)", l.one, repo, 256, 1, 65535);
  // Descriptor vs device address on the same memory, in pairs run back to back (the clock drifts
  // over a run): the scalar and vec4 launch shapes above. bda_desc_* against the plain variant of
  // the same shape also shows whether memory allocated for device addresses streams differently.
  auto pair = [&](const std::string& shape, bool per_float, std::uint32_t wg, std::uint32_t vpi, std::uint64_t cap) {
    add("bda_desc_" + shape, l.blk, per_float ? scalar : vec4, wg, vpi, cap);
    add("bda_addr_" + shape, l.blk, per_float ? addr_scalar : addr_vec4, wg, vpi, cap);
  };
  pair("scalar_wg256_2d", true, 256, 1, 0);
  for (std::uint32_t wg : {128u, 256u, 512u, 1024u}) pair("vec4_wg" + std::to_string(wg) + "_2d", false, wg, 1, 0);
  pair("vec4x2_wg256_2d", false, 256, 2, 0);
  pair("vec4x4_wg256_2d", false, 256, 4, 0);
  pair("vec4_gridstride_65535", false, 256, 1, 65535);
  pair("vec4_persist_" + std::to_string(persist_small), false, 256, 1, persist_small);
  pair("vec4_persist_" + std::to_string(persist_large), false, 256, 1, persist_large);

  std::FILE* csv = opt.out.empty() ? nullptr : std::fopen(opt.out.c_str(), "w");
  if (!opt.out.empty() && !csv) throw tg::Error("cannot write " + opt.out);
  if (csv) {
    std::fprintf(csv, "# device=%s; n=%llu; dispatches=%d; repeats=%d\n", info.name.c_str(), (unsigned long long)opt.n,
                 opt.dispatches, opt.repeats);
    std::fprintf(csv,
                 "variant,layout,groups_x,groups_y,bytes_per_element,check,first_us,median_us,mean_us,min_us,"
                 "chain_us,ends_us,gbps_median,gbps_ends\n");
  }
  std::printf("%-30s %10s %8s %10s %10s %10s %10s %8s  %s\n", "variant", "median_us", "GB/s", "min_us", "first_us",
              "chain_us", "ends_us", "ends_GB/s", "check  grid");
  int failures = 0;
  // --only: the variants whose names contain one of the comma-separated pieces, in list order.
  std::vector<std::string> wanted;
  for (std::size_t from = 0; from <= opt.only.size() && !opt.only.empty();) {
    const std::size_t comma = std::min(opt.only.find(',', from), opt.only.size());
    wanted.push_back(opt.only.substr(from, comma - from));
    from = comma + 1;
  }
  for (const Variant& v : variants) {
    if (!wanted.empty() && std::none_of(wanted.begin(), wanted.end(),
                                        [&](const std::string& w) { return v.name.find(w) != std::string::npos; })) {
      continue;
    }
    const std::string grid = std::to_string(v.groups[0]) + "x" + std::to_string(v.groups[1]);
    if (!v.skip.empty()) {
      std::printf("%-30s SKIP (%s)\n", v.name.c_str(), v.skip.c_str());
      continue;
    }
    const Result r = p.run(v, a, b);
    const double bytes = v.bytes_per_element * double(opt.n);
    if (r.check != "PASS") {
      ++failures;
      std::printf("%-30s %s\n", v.name.c_str(), r.check.c_str());
    } else {
      std::printf("%-30s %10.1f %8.0f %10.1f %10.1f %10.1f %10.1f %8.0f  PASS   %s\n", v.name.c_str(), r.median_us,
                  bytes / (r.median_us * 1e3), r.min_us, r.first_us, r.chain_us, r.ends_us, bytes / (r.ends_us * 1e3),
                  v.kind == Kind::shader ? grid.c_str() : "-");
    }
    std::fflush(stdout);
    if (csv) {
      std::fprintf(csv, "%s,%s,%u,%u,%g,%s,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.1f,%.1f\n", v.name.c_str(),
                   v.layout->name.c_str(), v.groups[0], v.groups[1], v.bytes_per_element,
                   r.check == "PASS" ? "PASS" : "FAIL", r.first_us, r.median_us, r.mean_us, r.min_us, r.chain_us,
                   r.ends_us, r.check == "PASS" ? bytes / (r.median_us * 1e3) : 0.0,
                   r.check == "PASS" ? bytes / (r.ends_us * 1e3) : 0.0);
    }
  }
  if (csv) std::fclose(csv);
  if (ctx->validation_enabled()) {
    const std::vector<std::string> messages = ctx->validation_messages();
    std::printf("validation messages: %zu\n", messages.size());
    failures += static_cast<int>(messages.size());
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  std::string bda = "on";
  CLI::App app{"Streaming-add and submission probes of the Vulkan executor's costs", "tg_vk_stream_probe"};
  add_options(app, options, bda);
  CLI11_PARSE(app, argc, argv);
  options.bda = bda == "on";
  try {
    // n travels as a 32-bit push constant; the bda_addr_* variants address past 4 GiB in 64 bits.
    if (options.n == 0 || options.n % 4 != 0 || options.n > 0xFFFFFFFFull)
      throw tg::Error("--n must be a positive multiple of 4 below 2^32");
    return probe(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tg_vk_stream_probe: %s\n", e.what());
    return 2;
  }
}
