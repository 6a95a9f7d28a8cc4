// fuzz_safetensors: the safetensors decoder on arbitrary bytes, and the encoder on whatever it
// accepts (fuzz_entry.h). decode_safetensors is the code load_safetensors runs on a file's bytes.
#include <cmath>
#include <span>
#include <string>

#include "fuzz_entry.h"
#include "tensorgrad/ir/error.h"
#include "tensorgrad/train/safetensors.h"

namespace tg::fuzz {
namespace {

// What a value reads back as after the writer stored it in its tensor's dtype.
double stored_value(DType dtype, double v) {
  return dtype == DType::f32 ? static_cast<double>(static_cast<float>(v)) : v;
}

bool same_value(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

void check_consistent(const SafetensorsFile& file) {
  for (const auto& [name, tensor] : file.tensors) {
    if (static_cast<std::int64_t>(tensor.size()) != tensor.type.size()) {
      throw FuzzBug("decoded tensor '" + name + "' of type " + tensor.type.to_string() + " holds " +
                    std::to_string(tensor.size()) + " values");
    }
    if (!file.stored_dtypes.contains(name)) throw FuzzBug("decoded tensor '" + name + "' has no stored dtype");
  }
  if (file.stored_dtypes.size() != file.tensors.size())
    throw FuzzBug("stored_dtypes names tensors that were not decoded");
}

}  // namespace

int fuzz_safetensors(const std::uint8_t* data, std::size_t size) {
  SafetensorsFile file;
  try {
    file = decode_safetensors(std::span<const std::uint8_t>(data, size), "fuzz input");
  } catch (const Error&) {
    return 0;  // refused with a typed error
  }
  check_consistent(file);
  // Whatever loads must save: the writer accepts every name, metadata string and value the reader
  // produces (a file read back from one's own checkpoint must be writable again).
  std::vector<std::uint8_t> encoded;
  try {
    encoded = encode_safetensors(file.tensors, file.metadata);
  } catch (const Error& e) {
    throw FuzzBug(std::string("encode_safetensors refuses what decode_safetensors returned: ") + e.what());
  }
  SafetensorsFile again;
  try {
    again = decode_safetensors(encoded, "re-encoded fuzz input");
  } catch (const Error& e) {
    throw FuzzBug(std::string("decode_safetensors refuses what encode_safetensors wrote: ") + e.what());
  }
  check_consistent(again);
  if (again.metadata != file.metadata) throw FuzzBug("the metadata changed in encode -> decode");
  if (again.tensors.size() != file.tensors.size()) throw FuzzBug("the tensor count changed in encode -> decode");
  for (const auto& [name, tensor] : file.tensors) {
    const auto it = again.tensors.find(name);
    if (it == again.tensors.end()) throw FuzzBug("tensor '" + name + "' was lost in encode -> decode");
    const HostTensor& back = it->second;
    if (back.type != tensor.type) {
      throw FuzzBug("tensor '" + name + "' changed type in encode -> decode: " + tensor.type.to_string() + " -> " +
                    back.type.to_string());
    }
    for (std::size_t i = 0; i < tensor.size(); ++i) {
      if (!same_value(back.at(i), stored_value(tensor.type.dtype, tensor.at(i)))) {
        throw FuzzBug("tensor '" + name + "' element " + std::to_string(i) + " changed in encode -> decode");
      }
    }
  }
  return 0;
}

}  // namespace tg::fuzz
