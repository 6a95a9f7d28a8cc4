#include "tensorgrad/train/safetensors.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

#include "train/safetensors_file.h"
#include "train/safetensors_header.h"

namespace tg {
namespace {

using nlohmann::json;
using safetensors_header::quote;

// The reference implementation refuses larger headers; so do we, before allocating anything.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::size_t kLengthBytes = 8;  // the header length field

// How the bytes are read; the element width tells the integer sizes apart.
enum class Storage : std::uint8_t { f64, f32, f16, bf16, signed_int, unsigned_int, boolean };

struct StoredDType {
  std::string_view name;
  Storage storage;
  std::size_t bytes;
  DType ours;  // the type it is read as
};

// The five we write come first: stored_for picks the first entry of each of our dtypes. F16 and
// BF16 are read as f16 and bf16, bit for bit (no conversion).
constexpr StoredDType kStoredDTypes[] = {
    {"F32", Storage::f32, 4, DType::f32},          {"I32", Storage::signed_int, 4, DType::i32},
    {"BOOL", Storage::boolean, 1, DType::boolean}, {"F16", Storage::f16, 2, DType::f16},
    {"BF16", Storage::bf16, 2, DType::bf16},       {"F64", Storage::f64, 8, DType::f32},
    {"I64", Storage::signed_int, 8, DType::i32},   {"I16", Storage::signed_int, 2, DType::i32},
    {"I8", Storage::signed_int, 1, DType::i32},    {"U64", Storage::unsigned_int, 8, DType::i32},
    {"U32", Storage::unsigned_int, 4, DType::i32}, {"U16", Storage::unsigned_int, 2, DType::i32},
    {"U8", Storage::unsigned_int, 1, DType::i32},
};

const StoredDType* find_stored(std::string_view name) {
  for (const StoredDType& d : kStoredDTypes) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

const StoredDType& stored_for(DType dtype) {
  for (const StoredDType& d : kStoredDTypes) {
    if (d.ours == dtype) return d;  // the first match is the one we write
  }
  throw SafetensorsError("no safetensors dtype for " + std::string(dtype_name(dtype)));
}

std::string in_quotes(std::string_view name) { return "'" + std::string(name) + "'"; }

[[noreturn]] void fail(std::string_view source, const std::string& what) {
  throw SafetensorsError("safetensors file " + in_quotes(source) + ": " + what);
}

std::uint64_t read_le(const std::uint8_t* p, std::size_t bytes) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

void write_le(std::uint8_t* p, std::uint64_t v, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

// ------------------------------------------------------------------------------------------------
// Reading: the header first (every check), then the values.
// ------------------------------------------------------------------------------------------------

struct Entry {
  std::string name;
  const StoredDType* dtype = nullptr;
  Shape shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;

  TensorType type() const { return TensorType{dtype->ours, shape}; }
};

struct Layout {
  std::vector<Entry> entries;
  SafetensorsMetadata metadata;
  std::uint64_t data_start = 0;  // 8 + header length
  std::uint64_t data_size = 0;   // the bytes after the header, by the file's own size
};

// "a number", "an object", ...
std::string article(const json& v) {
  const std::string_view name = v.type_name();
  return (name.front() == 'a' || name.front() == 'o' ? "an " : "a ") + std::string(name);
}

// A count or offset: a number written as a plain non-negative integer that fits in 64 bits.
// nlohmann reads larger ones as floating point and "-0" as a signed zero, both refused here.
std::uint64_t as_count(const json& v, std::string_view source, const std::string& context) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  std::string got = v.is_number() ? v.dump() : v.type_name();
  if (v.is_number_integer() && v.get<std::int64_t>() == 0) got = "-0";
  if (v.is_number_float() && v.get<double>() >= 0x1p64) got += " (past 2^64 - 1)";
  fail(source, context + " must be a non-negative integer, got " + got);
}

Entry read_entry(const std::string& name, const json& info, std::uint64_t data_size, std::string_view source) {
  const std::string where = "tensor " + in_quotes(name);
  if (!info.is_object()) fail(source, where + ": expected an object, got " + article(info));
  // Fields other than these three are ignored, as the reference implementation does.
  const auto member = [&](const char* key) {
    const auto it = info.find(key);
    return it == info.end() ? nullptr : &*it;
  };
  const json* dtype = member("dtype");
  const json* shape = member("shape");
  const json* offsets = member("data_offsets");
  if (!dtype || !shape || !offsets) {
    fail(source, where + " lacks " + (!dtype ? "\"dtype\"" : !shape ? "\"shape\"" : "\"data_offsets\""));
  }
  Entry e;
  e.name = name;
  if (!dtype->is_string()) fail(source, where + ": \"dtype\" must be a string");
  const std::string& dtype_name = dtype->get_ref<const std::string&>();
  e.dtype = find_stored(dtype_name);
  if (!e.dtype) {
    fail(source, where + " has dtype " + quote(dtype_name) +
                     ", which tensorgrad does not read (it reads F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, "
                     "U16, U8, BOOL)");
  }
  if (!shape->is_array()) fail(source, where + ": \"shape\" must be an array");
  for (const json& dim : *shape) {
    const std::uint64_t d = as_count(dim, source, where + ": a shape dimension");
    if (d > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      fail(source, where + ": shape dimension " + std::to_string(d) + " does not fit in int64");
    }
    e.shape.push_back(static_cast<std::int64_t>(d));
  }
  // tensorgrad's own size limits (kMaxElements, docs/architecture.md "Size limits", a 0 dim counted
  // as 1): a tensor the library could not hold is refused here, with the file named. Within them the
  // element count below cannot overflow.
  if (std::string problem = shape_limit_problem(e.shape); !problem.empty()) fail(source, where + ": " + problem);
  const auto elements = static_cast<std::uint64_t>(num_elements(e.shape));
  if (!offsets->is_array() || offsets->size() != 2) {
    fail(source, where + ": \"data_offsets\" must be an array [begin, end]");
  }
  e.begin = as_count((*offsets)[0], source, where + ": data_offsets begin");
  e.end = as_count((*offsets)[1], source, where + ": data_offsets end");
  const std::string range = "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
  if (e.begin > e.end) fail(source, where + ": " + range + " end before they begin");
  if (e.end > data_size) {
    fail(source, where + ": " + range + " run past the end of the " + std::to_string(data_size) + "-byte data");
  }
  const bool overflows = elements > std::numeric_limits<std::uint64_t>::max() / e.dtype->bytes;
  const std::uint64_t needed = overflows ? 0 : elements * e.dtype->bytes;
  if (overflows || e.end - e.begin != needed) {
    fail(source, where + ": " + range + " hold " + std::to_string(e.end - e.begin) + " bytes, but " +
                     std::string(e.dtype->name) + shape_to_string(e.shape) + " needs " +
                     (overflows ? std::string("more than 2^64") : std::to_string(needed)));
  }
  return e;
}

SafetensorsMetadata read_metadata(const json& v, std::string_view source) {
  SafetensorsMetadata metadata;
  if (v.is_null()) return metadata;
  if (!v.is_object()) fail(source, "\"__metadata__\" must be an object of strings");
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string()) {
      fail(source, "\"__metadata__\" value of " + quote(key) + " is " + article(value) + ", not a string");
    }
    metadata.emplace(key, value.get<std::string>());
  }
  return metadata;
}

// The tensors must tile the data exactly: sorted by offset, each begins where the previous ended
// and the last ends at the end of the file. Anything else is a corrupt (or hostile) file.
void check_tiling(const std::vector<Entry>& entries, std::uint64_t data_size, std::string_view source) {
  std::vector<const Entry*> sorted;
  for (const Entry& e : entries) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(),
            [](const Entry* a, const Entry* b) { return std::tie(a->begin, a->end) < std::tie(b->begin, b->end); });
  std::uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry* e : sorted) {
    if (e->begin < covered) {
      fail(source, "tensor " + in_quotes(e->name) + " (bytes " + std::to_string(e->begin) + ".." +
                       std::to_string(e->end) + ") overlaps tensor " + in_quotes(previous->name) + " (bytes " +
                       std::to_string(previous->begin) + ".." + std::to_string(previous->end) + ")");
    }
    if (e->begin > covered) {
      fail(source, "data bytes " + std::to_string(covered) + ".." + std::to_string(e->begin) +
                       " belong to no tensor (a hole before tensor " + in_quotes(e->name) + ")");
    }
    covered = e->end;
    previous = e;
  }
  if (covered != data_size) {
    fail(source, "data bytes " + std::to_string(covered) + ".." + std::to_string(data_size) +
                     " at the end of the file belong to no tensor");
  }
}

// The header length the first 8 bytes claim, checked against the cap and against the file's total
// size before anything is allocated for it.
std::uint64_t header_length(std::span<const std::uint8_t> first8, std::uint64_t total_size, std::string_view source) {
  if (total_size < kLengthBytes) {
    fail(source, "the file has " + std::to_string(total_size) + " bytes, fewer than the 8-byte header length");
  }
  const std::uint64_t header_size = read_le(first8.data(), kLengthBytes);
  if (header_size > kMaxHeaderBytes) {
    fail(source, "header length " + std::to_string(header_size) + " is over the limit of " +
                     std::to_string(kMaxHeaderBytes) + " bytes");
  }
  if (header_size > total_size - kLengthBytes) {
    fail(source, "header length " + std::to_string(header_size) + " runs past the end of the " +
                     std::to_string(total_size) + "-byte file");
  }
  return header_size;
}

// Parses and checks the header (`header` is its JSON text) of a file of `total_size` bytes: every
// byte range must lie within the data that size leaves.
Layout read_layout(std::string_view header, std::uint64_t total_size, std::string_view source) {
  if (header.empty() || header.front() != '{') fail(source, "the header does not start with '{'");
  json root;
  try {
    root = safetensors_header::parse(header);
  } catch (const Error& e) {
    fail(source, std::string("the header is not valid JSON: ") + e.what());
  }
  if (!root.is_object()) fail(source, "the header is not a JSON object");
  Layout layout;
  layout.data_start = kLengthBytes + header.size();
  layout.data_size = total_size - layout.data_start;
  // In key order (nlohmann's objects are sorted maps), so the first bad tensor reported does not
  // depend on how the writer ordered the header.
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      layout.metadata = read_metadata(value, source);
    } else {
      layout.entries.push_back(read_entry(key, value, layout.data_size, source));
    }
  }
  check_tiling(layout.entries, layout.data_size, source);
  return layout;
}

// Sign-extends the low `bytes` bytes of v.
std::int64_t sign_extend(std::uint64_t v, std::size_t bytes) {
  const int unused_bits = static_cast<int>(64 - 8 * bytes);
  return static_cast<std::int64_t>(v << unused_bits) >> unused_bits;
}

HostTensor decode_entry(const Entry& e, const std::uint8_t* data, std::string_view source) {
  const auto count = static_cast<std::size_t>(num_elements(e.shape));
  if (e.dtype->storage == Storage::f16 || e.dtype->storage == Storage::bf16) {
    // The little-endian bit patterns as they are: NaN payloads, -0 and subnormals survive.
    std::vector<std::uint16_t> bits(count);
    for (std::size_t i = 0; i < count; ++i) bits[i] = static_cast<std::uint16_t>(read_le(data + 2 * i, 2));
    return HostTensor::from_bits(e.dtype->ours, e.shape, std::move(bits));
  }
  std::vector<double> values(count);
  const std::size_t width = e.dtype->bytes;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t raw = read_le(data + i * width, width);
    switch (e.dtype->storage) {
      case Storage::f64:
        values[i] = std::bit_cast<double>(raw);
        break;
      case Storage::f32:
        values[i] = std::bit_cast<float>(static_cast<std::uint32_t>(raw));
        break;
      case Storage::f16:
      case Storage::bf16:
        break;  // returned above
      case Storage::boolean:
        if (raw > 1) {
          fail(source, "tensor " + in_quotes(e.name) + " is BOOL but element " + std::to_string(i) + " is byte " +
                           std::to_string(raw));
        }
        values[i] = static_cast<double>(raw);
        break;
      case Storage::signed_int:
      case Storage::unsigned_int: {
        const bool is_signed = e.dtype->storage == Storage::signed_int;
        const std::int64_t v = is_signed ? sign_extend(raw, width) : 0;
        constexpr std::int32_t kMin = std::numeric_limits<std::int32_t>::min();
        constexpr std::int32_t kMax = std::numeric_limits<std::int32_t>::max();
        if (is_signed ? (v < kMin || v > kMax) : raw > static_cast<std::uint64_t>(kMax)) {
          fail(source, "tensor " + in_quotes(e.name) + " (" + std::string(e.dtype->name) + ") element " +
                           std::to_string(i) + " = " + (is_signed ? std::to_string(v) : std::to_string(raw)) +
                           " does not fit in i32");
        }
        values[i] = is_signed ? static_cast<double>(v) : static_cast<double>(raw);
        break;
      }
    }
  }
  // F64 stays wide (an oracle's inputs and goldens keep their precision); the rest is stored in the
  // dtype's own width, which holds every value the checks above let through exactly.
  HostTensor t = HostTensor::of(e.type(), std::move(values));
  return e.dtype->storage == Storage::f64 ? t : t.narrowed();
}

// `data` is the layout's data_size bytes after the header.
SafetensorsFile decode_layout(const Layout& layout, std::span<const std::uint8_t> data, std::string_view source) {
  SafetensorsFile file;
  file.metadata = layout.metadata;
  for (const Entry& e : layout.entries) {
    file.tensors.emplace(e.name, decode_entry(e, data.data() + e.begin, source));
    file.stored_dtypes.emplace(e.name, std::string(e.dtype->name));
  }
  return file;
}

// A file's layout, read from its first 8 + N bytes only: the header length and every byte range are
// bounded by the size fstat() gives before anything is allocated for them.
Layout read_file_layout(const safetensors_file::InputFile& file) {
  std::uint8_t first8[kLengthBytes] = {};
  if (file.size() >= kLengthBytes) file.read_at(0, first8);
  const std::uint64_t header_size = header_length(first8, file.size(), file.path());
  std::string header(header_size, '\0');
  file.read_at(kLengthBytes, std::span(reinterpret_cast<std::uint8_t*>(header.data()), header.size()));
  return read_layout(header, file.size(), file.path());
}

SafetensorsFile read_file_data(const safetensors_file::InputFile& file, const Layout& layout) {
  std::vector<std::uint8_t> data(layout.data_size);
  file.read_at(layout.data_start, data);
  file.check_unchanged();
  return decode_layout(layout, data, file.path());
}

// ------------------------------------------------------------------------------------------------
// Writing.
// ------------------------------------------------------------------------------------------------

void check_storable(const std::string& name, const HostTensor& t) {
  const auto refuse = [&](const std::string& what) {
    throw SafetensorsError("cannot save tensor " + in_quotes(name) + " of type " + t.type.to_string() + ": " + what);
  };
  if (name == "__metadata__") refuse("the name \"__metadata__\" is reserved for the header's metadata");
  if (!safetensors_header::is_valid_utf8(name)) refuse("the name is not valid UTF-8");
  for (std::size_t i = 0; i < t.size(); ++i) {
    const double v = t.at_unchecked(i);
    if (t.type.dtype == DType::i32 && (v != std::floor(v) || v < std::numeric_limits<std::int32_t>::min() ||
                                       v > std::numeric_limits<std::int32_t>::max())) {
      refuse("element " + std::to_string(i) + " = " + std::to_string(v) + " is not an i32");
    }
    if (t.type.dtype == DType::boolean && v != 0.0 && v != 1.0) {
      refuse("element " + std::to_string(i) + " = " + std::to_string(v) + " is not a bool (0 or 1)");
    }
  }
}

std::uint64_t encode_value(DType dtype, double v) {  // v passed check_storable
  if (dtype == DType::f32) return std::bit_cast<std::uint32_t>(static_cast<float>(v));
  if (dtype == DType::i32) return static_cast<std::uint32_t>(static_cast<std::int32_t>(v));
  return v != 0.0 ? 1 : 0;
}

}  // namespace

std::vector<std::uint8_t> encode_safetensors(const TensorMap& tensors, const SafetensorsMetadata& metadata) {
  for (const auto& [key, value] : metadata) {
    if (!safetensors_header::is_valid_utf8(key) || !safetensors_header::is_valid_utf8(value)) {
      throw SafetensorsError("cannot save metadata " + in_quotes(key) + ": not valid UTF-8");
    }
  }
  // Widest elements first (then by name), as the reference writer orders them, so that every
  // tensor's data starts at a multiple of its element size.
  std::vector<std::pair<const std::string*, const HostTensor*>> order;
  for (const auto& [name, tensor] : tensors) {
    check_storable(name, tensor);
    order.emplace_back(&name, &tensor);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return stored_for(a.second->type.dtype).bytes > stored_for(b.second->type.dtype).bytes;
  });
  // Members in the order written (ordered_json): the metadata, then the tensors as ordered above,
  // each as {"dtype", "shape", "data_offsets"}, like the reference writer. The keys are unique (map
  // keys, and "__metadata__" is refused as a tensor name), so members are appended to the object's
  // underlying vector: ordered_map's operator[] searches linearly, quadratic in the tensor count.
  using ordered_json = nlohmann::ordered_json;
  ordered_json root = ordered_json::object();
  auto& members = root.get_ref<ordered_json::object_t&>();
  members.reserve(order.size() + 1);
  if (!metadata.empty()) members.emplace_back("__metadata__", ordered_json(metadata));
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : order) {
    const StoredDType& stored = stored_for(tensor->type.dtype);
    const std::uint64_t size = tensor->size() * stored.bytes;
    ordered_json info = ordered_json::object();
    info["dtype"] = stored.name;
    info["shape"] = tensor->type.shape;
    info["data_offsets"] = {offset, offset + size};
    members.emplace_back(*name, std::move(info));
    offset += size;
  }
  std::string header = root.dump();
  // Pad with spaces so the data starts 8-byte aligned, as the reference writer does.
  header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<std::uint8_t> bytes(8 + header.size() + offset);
  write_le(bytes.data(), header.size(), 8);
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  std::uint8_t* out = bytes.data() + 8 + header.size();
  for (const auto& [name, tensor] : order) {
    if (is_low_precision(tensor->type.dtype)) {
      // The 16-bit patterns themselves (a wide tensor is rounded to its dtype first, once).
      const HostTensor narrow = tensor->narrowed();  // kept alive: the span below points into it
      for (const std::uint16_t bits : narrow.bits16_data()) {
        write_le(out, bits, 2);
        out += 2;
      }
      continue;
    }
    const std::size_t width = stored_for(tensor->type.dtype).bytes;
    for (const double v : tensor->to_f64()) {
      write_le(out, encode_value(tensor->type.dtype, v), width);
      out += width;
    }
  }
  return bytes;
}

SafetensorsFile decode_safetensors(std::span<const std::uint8_t> bytes, std::string_view source) {
  const std::uint64_t header_size = header_length(bytes, bytes.size(), source);
  const std::string_view header(reinterpret_cast<const char*>(bytes.data() + kLengthBytes), header_size);
  const Layout layout = read_layout(header, bytes.size(), source);
  return decode_layout(layout, bytes.subspan(layout.data_start), source);
}

void save_safetensors(const std::string& path, const TensorMap& tensors, const SafetensorsMetadata& metadata) {
  std::vector<std::uint8_t> bytes;
  try {
    bytes = encode_safetensors(tensors, metadata);
  } catch (const SafetensorsError& e) {
    fail(path, e.what());
  }
  safetensors_file::write_atomically(path, bytes);
}

SafetensorsFile load_safetensors(const std::string& path) {
  const safetensors_file::InputFile file(path);
  return read_file_data(file, read_file_layout(file));
}

SafetensorsFile load_matching(const std::string& path, const std::map<std::string, TensorType>& expected) {
  const safetensors_file::InputFile file(path);
  const Layout layout = read_file_layout(file);
  std::string missing, unexpected, mismatched;
  std::map<std::string_view, const Entry*> found;
  for (const Entry& e : layout.entries) found.emplace(e.name, &e);
  // The file's own dtype name is added where it was converted, and on a dtype mismatch (a BF16
  // tensor for an f32 param names BF16).
  const auto describe = [](const Entry& e, bool dtype_differs) {
    const bool converted = e.dtype->name != stored_for(e.dtype->ours).name;
    return e.type().to_string() + (converted || dtype_differs ? " (stored as " + std::string(e.dtype->name) + ")" : "");
  };
  for (const auto& [name, type] : expected) {
    const auto it = found.find(name);
    if (it == found.end()) {
      missing += (missing.empty() ? "" : ", ") + in_quotes(name) + " " + type.to_string();
    } else if (it->second->type() != type) {
      mismatched += "\n  " + in_quotes(name) + ": expected " + type.to_string() + ", found " +
                    describe(*it->second, it->second->type().dtype != type.dtype);
    }
  }
  for (const Entry& e : layout.entries) {
    if (!expected.contains(e.name))
      unexpected += (unexpected.empty() ? "" : ", ") + in_quotes(e.name) + " " + describe(e, false);
  }
  if (!missing.empty() || !unexpected.empty() || !mismatched.empty()) {
    std::string message = "does not hold the expected tensors:";
    if (!missing.empty()) message += "\n  missing: " + missing;
    if (!unexpected.empty()) message += "\n  unexpected: " + unexpected;
    fail(path, message + mismatched);
  }
  return read_file_data(file, layout);
}

}  // namespace tg
