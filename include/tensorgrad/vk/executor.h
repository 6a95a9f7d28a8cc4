#pragma once
// tg::vk::Program: a graph compiled for one Vulkan device. Compiling plans every value's place in
// a few device allocations (dead values' memory reused; docs/vulkan.md, "Memory"), takes the pipelines from the Context
// (compiling only those it does not hold yet), creates the descriptor sets, and records ONE command buffer: upload of
// the inputs from a host-visible staging buffer, every dispatch in node order with barriers only where a dispatch
// touches what an earlier one wrote (or overwrites what it read) since the last barrier, and readback of the outputs.
// run() replays it: write staging, submit, wait, read.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorgrad/interp/host_tensor.h"
#include "tensorgrad/ir/graph.h"
#include "tensorgrad/vk/context.h"

namespace tg::vk {

// After every run, graph output `output` is copied on the device into resident input `input` (an
// optimizer's update of a param or its state): the next run sees the new value without a host trip.
using Writeback = tg::Writeback;

// How f32 matmuls compute (ProgramOptions::matmul_precision; docs/vulkan.md, "Matmul precision").
// Products of f16 or bf16 values (a matmul whose operands are casts up from one 16-bit dtype) are
// exact in every mode and go to the matrix units wherever the device has them.
enum class MatmulPrecision : std::uint8_t {
  // fp32 multiply-adds on the portable kernel: fp32 inputs, fp32 accumulation. The default.
  ieee,
  // Each f32 operand as the sum of three bf16 parts (exact for normal values), the six products
  // of parts above 2^-24 of the leading one accumulated in f32: within the fp32 tolerance class,
  // on the matrix units where the device has bf16 ones, else the same arithmetic on the portable
  // kernel (slower than ieee there).
  split,
  // Two bf16 parts and three products: about 16 significant bits per product (better than TF32's
  // 11), on the matrix units where the device has bf16 ones. Not fp32-accurate: measured errors
  // in docs/vulkan.md.
  fast,
};
std::string_view to_string(MatmulPrecision precision);

struct ProgramOptions {
  // Bytes of sentinel after every value (rounded up to 4); check_guards() reports any overwritten.
  // 0: none. Guards turn memory reuse off (a debug mode): every guard then holds its sentinel
  // until the check.
  std::uint64_t guard_bytes = 0;
  // Record a GPU timestamp before and after every dispatch (a query pool of 2 per dispatch);
  // timings() then gives each dispatch's device time for the last run. Off: no queries recorded.
  bool timestamps = false;
  // Param and state inputs stay on the device between runs: write_input() sets them, read_input()
  // reads them, run() needs only the data inputs (a resident input passed to run() is written
  // first). Off: run() uploads every input each time.
  bool resident_params = false;
  // Applied after every committed run (see run()). Each input must be resident and of the output's
  // type, and the target of one writeback at most. Writeback outputs are not read back by run():
  // read the input instead.
  std::vector<Writeback> writebacks;
  // Runs of consecutive elementwise f32 nodes over one shape become one dispatch each
  // (src/vk/fusion.h): same bits as the unfused kernels, fewer dispatches and no round trips of
  // the intermediate values through memory. Off: one dispatch per node.
  bool fuse_elementwise = true;
  // A matmul operand made by a transpose of the last two axes (swap_axes(x, -2, -1), or a permute
  // swapping only those) is read from x in place, by the matmul kernel's transposed-operand path,
  // and the transpose records no dispatch when only such matmuls (or other absorbed transposes)
  // read its output and it is not a graph output (src/vk/transpose_absorb.h). Same bits as the
  // copy. Off: every transpose is materialized.
  bool absorb_transposes = true;
  // Graph outputs that stay on the device: run() neither reads them back nor returns them, and
  // read_output() fetches the last run's value on demand. For results the host needs only
  // sometimes (or never: a benchmark's chain), so a run moves no more data than it must. Each must
  // name a graph output that is not a writeback source (those stay on the device already).
  std::vector<std::string> device_outputs;
  // The most bytes one device allocation ("block") of the plan may hold; values are placed first
  // fit over the blocks, and a new block is made only when none has room. The host-visible
  // staging of inputs and outputs is packed into buffers under the same cap. 0: 4 GiB. Always at
  // least the largest value and at most the device's maxMemoryAllocationSize. Small caps make many
  // blocks (tests use them to run multi-block plans on small graphs).
  std::uint64_t max_block_bytes = 0;
  // The most workgroups one dispatch may launch. 0: the device's maxComputeWorkGroupCount[0],
  // capped at 65535 (Vulkan's guaranteed minimum). Past the cap every shader loops grid-stride;
  // a small cap (tests use 1-3) makes those loops run at small sizes, so they are checked without
  // tensors of 16 M elements. It is raised where a workgroup would otherwise loop more than 8
  // times (the kernels' loop-pass bounds for lavapipe assume the 65535 cap).
  std::uint32_t max_workgroups = 0;
  // f32 matmuls: ieee (fp32 multiply-adds), split (fp32-accurate on the matrix units) or fast
  // (TF32-like); see MatmulPrecision.
  MatmulPrecision matmul_precision = MatmulPrecision::ieee;
  // Early readback: the run is submitted as segments, cut in node order after at least this many
  // bytes of read-back outputs are final, and each segment's outputs are read back and handed to
  // run()'s sink as soon as it completes, while the device computes the later segments (a
  // data-parallel step reduces its first gradients during the rest of its backward). 0: one
  // submission, outputs read after all of it. Same values either way.
  std::uint64_t early_readback_bytes = 0;
};

// One dispatch's device time in the last run (ProgramOptions::timestamps).
struct DispatchTiming {
  NodeId node = kNoNode;
  std::string op;             // the op's registry name, or the launch's label (e.g. a fused group)
  double microseconds = 0.0;  // end minus start timestamp, in the device's timestamp period
};

struct ProgramStats {
  std::size_t dispatches = 0;              // recorded for every run
  std::size_t barriers = 0;                // compute->compute barriers between dispatches
  std::size_t constants = 0;               // nodes without inputs, computed once when the program was built
  std::size_t aliases = 0;                 // reshapes that share their input's memory (no dispatch)
  std::size_t absorbed_transposes = 0;     // transposes read in place by matmuls (no dispatch)
  std::uint64_t device_bytes = 0;          // the plan's device memory: all blocks together
  std::uint64_t unshared_bytes = 0;        // what one slot per value would have needed
  std::vector<std::uint64_t> block_bytes;  // bytes of each device allocation, in plan order
  // The most bytes alive at once (values and scratch, guards included): no placement can
  // need less, so device_bytes / peak_live_bytes is what fragmentation and block ends cost.
  std::uint64_t peak_live_bytes = 0;
  std::size_t staging_buffers = 0;  // host-visible upload and readback buffers
  std::size_t segments = 1;         // submissions per run (ProgramOptions::early_readback_bytes)
  // Distinct pipelines the program uses: compiled for it, or found in the Context, which keeps
  // those earlier programs compiled (Context::pipeline, pipeline_stats()).
  std::size_t pipelines_created = 0;
  std::size_t pipelines_reused = 0;
};

class Program {
 public:
  // Throws tg::Error naming the op when a node has no Vulkan kernel; naming the value when one
  // value exceeds maxStorageBufferRange or maxMemoryAllocationSize; naming the graph, the bytes
  // wanted and the heap when the plan exceeds the device's memory heap or an allocation runs out of
  // device memory (before anything runs); DeviceError when a Vulkan call fails.
  Program(std::shared_ptr<Context> context, const Graph& graph, ProgramOptions options = {});
  Program(Program&&) noexcept;
  Program& operator=(Program&&) noexcept;
  ~Program();

  // Runs the graph. Throws RuntimeError naming the input when one is missing, unknown, or of the
  // wrong type (the same checks as tg::interpret), RuntimeError naming the op, the value and the
  // call site when an index or target is out of range, DeviceError when the device fails (a lost
  // device also makes the context unusable). Returns the outputs except writeback sources.
  // Writebacks cost no copy: each (output, input) pair owns two device slots that the program's two
  // recordings use in swapped roles, and a committed run flips which recording replays next. With
  // commit_writebacks = false the run's writebacks wait for commit(); a run that throws, or one never
  // committed, leaves params and state as they were.
  // With a sink, each output is also handed to it once read back: with early readback as soon as
  // its segment completes (on the calling thread, while the device runs the later segments),
  // otherwise after the whole run. An output handed over is final, but the run may still fail
  // after it (a later index check, a lost device). What the sink throws ends the run (after the
  // submitted segments completed) and propagates.
  TensorMap run(const TensorMap& inputs, bool commit_writebacks = true, const OutputSink& sink = {});
  // Accepts the writebacks of the last run made with commit_writebacks = false; throws tg::Error if
  // there is none (or it was committed already, or another run came after it).
  void commit();

  // Resident inputs (ProgramOptions::resident_params). write_input checks the name and type like
  // run() and throws tg::Error for an input that is not resident.
  void write_input(std::string_view name, const HostTensor& value);
  HostTensor read_input(std::string_view name) const;
  // Copies resident inputs `names` of `source` (a program on the same context; each of the same type
  // there) into this program's on the device, in one submission. Throws tg::Error naming the input
  // or the mismatch; DeviceError when the device fails.
  void copy_inputs_from(const Program& source, const std::vector<std::string>& names);
  // The last run's value of a device output (ProgramOptions::device_outputs); throws tg::Error for
  // any other name, or before the first run.
  HostTensor read_output(std::string_view name) const;
  // The host-visible memory non-resident input `name` is uploaded from at the start of each run
  // (its device words: f32 as float). A caller may write the value there itself, as soon as it has
  // it, and pass run() a HostTensor viewing exactly this memory: run() then makes no copy (a
  // data-parallel step writes each bucket's sums there while the backward still runs). Throws
  // tg::Error for an unknown or resident input. Valid as long as the program.
  std::span<std::byte> input_staging(std::string_view name);
  bool is_resident(std::string_view name) const;

  // After a run: one line per value whose guard region no longer holds the sentinel, naming the
  // value and the node that produced it. Empty when every guard is intact (or there are none).
  std::vector<std::string> check_guards() const;

  // Per-dispatch device times of the last run, in dispatch order; empty without
  // ProgramOptions::timestamps or before the first run.
  std::vector<DispatchTiming> timings() const;
  // Device time from the first dispatch's start to the last dispatch's end in the last run (uploads
  // and readback excluded); 0 without timestamps.
  double dispatch_span_microseconds() const;

  const ProgramStats& stats() const;
  const Graph& graph() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// What a Program of `graph` with `options` would allocate on a device with `info`'s limits, planned
// without a device (nothing is created): the memory fields of ProgramStats (device_bytes,
// block_bytes, unshared_bytes, peak_live_bytes) and the counts decided before recording
// (constants, aliases, absorbed transposes); dispatches, barriers and staging_buffers are 0. Throws
// what Program's constructor throws before it allocates (a missing kernel, a launch or a plan
// above the device's limits). For capacity planning: the largest batch whose plan fits a heap.
ProgramStats plan_memory(const Graph& graph, const DeviceInfo& info, const ProgramOptions& options = {});

// Whether the Vulkan executor has a kernel for `op`.
bool has_kernel(OpId op);

}  // namespace tg::vk
