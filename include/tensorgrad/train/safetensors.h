#pragma once
// Params and optimizer state as safetensors files (https://github.com/huggingface/safetensors), the
// format PyTorch's `safetensors` package reads and writes: an 8-byte little-endian header length N,
// N bytes of UTF-8 JSON naming each tensor's dtype, shape and byte range, then the raw data,
// little-endian and row-major.
//
// Writing: f32 tensors are stored as F32 (values rounded to the nearest float, as the f32 backends
// do on upload), i32 as I32, bool as BOOL, f16 as F16 and bf16 as BF16: two bytes per element, the
// tensor's 16-bit patterns as they are (a wide f16/bf16 tensor is rounded to its dtype once). A save writes a temporary
// file ".<name>.tmp-<pid>-<n>" next to the target, fsyncs it and renames it over the target, so a crash or an error
// leaves either the old file or the complete new one, never a half-written file (on error the temporary file is
// removed). A save first removes the temporary files that killed saves of the same target left (their writer's process
// is gone and nobody holds their lock; docs/training/safetensors.md).
//
// Reading: F32, I32, BOOL, F16 and BF16 come back as f32, i32, bool, f16 and bf16 (F16 and BF16
// bit for bit: NaN payloads, -0 and subnormals kept). An F16 or BF16 tensor is not widened to f32:
// loading one for an f32 param is a dtype mismatch (load_matching), cast it explicitly instead.
// Wider or other types are converted to ours where no value is lost, and refused where one would be:
//   F64        -> f32 tensor type, but the double values are kept unrounded in HostTensor::values
//                 (the f64 oracle sees them exactly; f32 backends round them on upload)
//   I8, I16, U8, U16 -> i32 (exact);  I64, U32, U64 -> i32 when every value fits, else an error
// Any other dtype (F8_*, complex, ...) is an error. Only regular files are read (symlinks to one
// included): a directory, FIFO, device or socket is refused by type without blocking. The header
// length (at most 100,000,000 bytes) and every byte range are checked against the file's size
// before anything is allocated or read for them. The file is checked completely before anything
// is returned: a header that is short, not JSON, or names byte ranges that leave holes, overlap or
// run past the data throws SafetensorsError naming the file and the problem.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tensorgrad/interp/host_tensor.h"
#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/shape.h"

namespace tg {

// Free-form string pairs stored under the header's "__metadata__" key (e.g. {"step", "1200"}).
using SafetensorsMetadata = std::map<std::string, std::string>;

struct SafetensorsFile {
  TensorMap tensors;
  SafetensorsMetadata metadata;
  // Each tensor's dtype as the file stored it ("F32", "BF16", "I64", ...), before conversion.
  std::map<std::string, std::string> stored_dtypes;
};

// A malformed or mismatching file, or a failed read or write. The message names the file.
class SafetensorsError : public Error {
 public:
  using Error::Error;
};

// Writes `tensors` (and `metadata`, if any) to `path` atomically, replacing any file there. Throws
// SafetensorsError if a tensor's values do not fit its type (element count, i32 not integral or out
// of range, bool not 0 or 1), a name or metadata string is not valid UTF-8 or a tensor is named
// "__metadata__", or the file system refuses; the target is then untouched.
void save_safetensors(const std::string& path, const TensorMap& tensors, const SafetensorsMetadata& metadata = {});

// Reads every tensor and the metadata of `path`.
SafetensorsFile load_safetensors(const std::string& path);

// Reads `path` and checks that it holds exactly the `expected` tensors, each of its expected type
// (after the conversions above). Otherwise throws one SafetensorsError listing every missing
// tensor, every unexpected one and every dtype or shape mismatch (expected vs found); the file's
// data is not decoded then.
SafetensorsFile load_matching(const std::string& path, const std::map<std::string, TensorType>& expected);

// The same encoding and decoding on bytes in memory. `source` names the bytes in error messages.
std::vector<std::uint8_t> encode_safetensors(const TensorMap& tensors, const SafetensorsMetadata& metadata = {});
SafetensorsFile decode_safetensors(std::span<const std::uint8_t> bytes, std::string_view source = "<memory>");

}  // namespace tg
