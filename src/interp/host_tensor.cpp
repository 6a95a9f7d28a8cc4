#include "tensorgrad/interp/host_tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "tensorgrad/ir/error.h"

namespace tg {

std::string_view host_storage_name(HostStorage storage) {
  switch (storage) {
    case HostStorage::f32:
      return "f32";
    case HostStorage::i32:
      return "i32";
    case HostStorage::u8:
      return "u8";
    case HostStorage::f64:
      return "f64";
    case HostStorage::f16:
      return "f16";
    case HostStorage::bf16:
      return "bf16";
  }
  return "?";
}

std::size_t host_storage_bytes(HostStorage storage) {
  switch (storage) {
    case HostStorage::f32:
    case HostStorage::i32:
      return 4;
    case HostStorage::u8:
      return 1;
    case HostStorage::f16:
    case HostStorage::bf16:
      return 2;
    case HostStorage::f64:
      return 8;
  }
  return 8;
}

namespace {

// The storage a dtype's elements have when not wide.
HostStorage own_storage(DType dtype) {
  if (dtype == DType::i32) return HostStorage::i32;
  if (dtype == DType::boolean) return HostStorage::u8;
  if (dtype == DType::f16) return HostStorage::f16;
  if (dtype == DType::bf16) return HostStorage::bf16;
  return HostStorage::f32;
}

// The element count of a host tensor's type, refusing a type past the size limits (shape.h) with a
// RuntimeError before anything is allocated for it.
std::int64_t checked_count(const TensorType& type) {
  if (std::string problem = shape_limit_problem(type.shape); !problem.empty()) {
    throw RuntimeError("a host tensor of type " + type.to_string() + " is past the size limits: " + problem);
  }
  return type.size();
}

void check_count(const TensorType& type, std::size_t given) {
  if (static_cast<std::int64_t>(given) != checked_count(type)) {
    throw RuntimeError("a tensor of type " + type.to_string() + " needs " + std::to_string(type.size()) +
                       " elements, got " + std::to_string(given));
  }
}

// Keeps a moved-in vector alive behind a shared_ptr without copying its elements.
template <class T>
std::shared_ptr<const void> hold(std::vector<T> data, const void*& out) {
  auto owner = std::make_shared<std::vector<T>>(std::move(data));
  out = owner->data();
  return owner;
}

// Uninitialized storage for n elements (callers write every one).
std::shared_ptr<const void> allocate(HostStorage storage, std::int64_t n, void*& out) {
  const std::size_t bytes = std::max<std::size_t>(1, static_cast<std::size_t>(n) * host_storage_bytes(storage));
  std::shared_ptr<std::byte[]> owner = std::make_shared_for_overwrite<std::byte[]>(bytes);
  out = owner.get();
  return owner;
}

constexpr float kZero = 0.0F;

}  // namespace

HostTensor::HostTensor() : type{DType::f32, {}}, storage_(HostStorage::f32), owner_(nullptr), data_(&kZero) {}

HostTensor::HostTensor(TensorType t, HostStorage storage, std::shared_ptr<const void> owner, const void* data)
    : type(std::move(t)), storage_(storage), owner_(std::move(owner)), data_(data) {}

HostTensor HostTensor::f32(Shape shape, std::vector<float> data) {
  TensorType type{DType::f32, std::move(shape)};
  check_count(type, data.size());
  const void* p = nullptr;
  auto owner = hold(std::move(data), p);
  return {std::move(type), HostStorage::f32, std::move(owner), p};
}

HostTensor HostTensor::f32(Shape shape, std::span<const float> data) {
  return f32(std::move(shape), std::vector<float>(data.begin(), data.end()));
}

HostTensor HostTensor::f32(Shape shape, std::initializer_list<float> data) {
  return f32(std::move(shape), std::vector<float>(data));
}

HostTensor HostTensor::i32(Shape shape, std::initializer_list<std::int32_t> data) {
  return i32(std::move(shape), std::vector<std::int32_t>(data));
}

HostTensor HostTensor::i32(Shape shape, std::vector<std::int32_t> data) {
  TensorType type{DType::i32, std::move(shape)};
  check_count(type, data.size());
  const void* p = nullptr;
  auto owner = hold(std::move(data), p);
  return {std::move(type), HostStorage::i32, std::move(owner), p};
}

HostTensor HostTensor::i32(Shape shape, std::span<const std::int32_t> data) {
  return i32(std::move(shape), std::vector<std::int32_t>(data.begin(), data.end()));
}

namespace {

// Bytes of 0 or 1 from any range of truth values.
template <class Range>
std::vector<std::uint8_t> bool_bytes(const Range& data) {
  std::vector<std::uint8_t> bytes;
  bytes.reserve(data.size());
  for (const bool b : data) bytes.push_back(b ? 1 : 0);
  return bytes;
}

}  // namespace

HostTensor HostTensor::boolean(Shape shape, std::span<const bool> data) {
  TensorType type{DType::boolean, std::move(shape)};
  check_count(type, data.size());
  const void* p = nullptr;
  auto owner = hold(bool_bytes(data), p);
  return {std::move(type), HostStorage::u8, std::move(owner), p};
}

HostTensor HostTensor::boolean(Shape shape, const std::vector<bool>& data) {
  TensorType type{DType::boolean, std::move(shape)};
  check_count(type, data.size());
  const void* p = nullptr;
  auto owner = hold(bool_bytes(data), p);
  return {std::move(type), HostStorage::u8, std::move(owner), p};
}

HostTensor HostTensor::low_precision(DType dtype, Shape shape, std::span<const float> values) {
  if (!is_low_precision(dtype)) {
    throw RuntimeError("HostTensor::low_precision makes f16 or bf16 tensors, not " + std::string(dtype_name(dtype)));
  }
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = f32_to_low_precision_bits(values[i], dtype);
  return from_bits(dtype, std::move(shape), std::move(bits));
}

HostTensor HostTensor::from_bits(DType dtype, Shape shape, std::vector<std::uint16_t> bits) {
  if (!is_low_precision(dtype)) {
    throw RuntimeError("HostTensor::from_bits makes f16 or bf16 tensors, not " + std::string(dtype_name(dtype)));
  }
  TensorType type{dtype, std::move(shape)};
  check_count(type, bits.size());
  const void* p = nullptr;
  auto owner = hold(std::move(bits), p);
  return {std::move(type), own_storage(dtype), std::move(owner), p};
}

HostTensor HostTensor::of(TensorType type, std::vector<double> data) {
  check_count(type, data.size());
  const void* p = nullptr;
  auto owner = hold(std::move(data), p);
  return {std::move(type), HostStorage::f64, std::move(owner), p};
}

HostTensor HostTensor::filled(TensorType type, double value) {
  const std::int64_t n = checked_count(type);
  const HostStorage storage = own_storage(type.dtype);
  void* p = nullptr;
  auto owner = allocate(storage, n, p);
  HostTensor t{std::move(type), storage, std::move(owner), p};
  for (std::size_t i = 0; i < t.size(); ++i) t.set(i, value);
  return t;
}

HostTensor HostTensor::view(Shape shape, std::span<const float> data) {
  TensorType type{DType::f32, std::move(shape)};
  check_count(type, data.size());
  return {std::move(type), HostStorage::f32, nullptr, data.data()};
}

HostTensor HostTensor::view(Shape shape, std::span<const std::int32_t> data) {
  TensorType type{DType::i32, std::move(shape)};
  check_count(type, data.size());
  return {std::move(type), HostStorage::i32, nullptr, data.data()};
}

HostTensor HostTensor::view(Shape shape, std::span<const bool> data) {
  static_assert(sizeof(bool) == 1, "bool views read one byte per element");
  TensorType type{DType::boolean, std::move(shape)};
  check_count(type, data.size());
  return {std::move(type), HostStorage::u8, nullptr, data.data()};
}

HostTensor HostTensor::adopt(TensorType type, HostStorage storage, std::shared_ptr<const void> owner,
                             const void* data) {
  checked_count(type);
  if (storage != HostStorage::f64 && storage != own_storage(type.dtype)) {
    throw RuntimeError("a host tensor of type " + type.to_string() + " cannot be stored as " +
                       std::string(host_storage_name(storage)));
  }
  if (!owner) throw RuntimeError("HostTensor::adopt needs an owner for the " + type.to_string() + " elements");
  return {std::move(type), storage, std::move(owner), data};
}

namespace {

[[noreturn]] void index_past_end(const HostTensor& t, std::size_t k) {
  throw RuntimeError("element index " + std::to_string(k) + " is past the end of the " + t.type.to_string() +
                     " host tensor, which has " + std::to_string(t.size()) + " elements");
}

}  // namespace

double HostTensor::at(std::size_t k) const {
  if (k >= size()) index_past_end(*this, k);
  return at_unchecked(k);
}

namespace {

[[noreturn]] void wrong_storage(const HostTensor& t, std::string_view wanted) {
  throw RuntimeError("the " + t.type.to_string() + " host tensor is stored as " +
                     std::string(host_storage_name(t.storage())) + ", not " + std::string(wanted) +
                     " (convert with narrowed(), to_f32(), to_i32() or to_f64())");
}

}  // namespace

std::span<const float> HostTensor::f32_data() const {
  if (storage_ != HostStorage::f32) wrong_storage(*this, "f32");
  return {static_cast<const float*>(data_), size()};
}

std::span<const std::int32_t> HostTensor::i32_data() const {
  if (storage_ != HostStorage::i32) wrong_storage(*this, "i32");
  return {static_cast<const std::int32_t*>(data_), size()};
}

std::span<const std::uint8_t> HostTensor::bool_data() const {
  if (storage_ != HostStorage::u8) wrong_storage(*this, "u8");
  return {static_cast<const std::uint8_t*>(data_), size()};
}

std::span<const double> HostTensor::f64_data() const {
  if (storage_ != HostStorage::f64) wrong_storage(*this, "f64");
  return {static_cast<const double*>(data_), size()};
}

std::span<const std::uint16_t> HostTensor::bits16_data() const {
  if (storage_ != HostStorage::f16 && storage_ != HostStorage::bf16) wrong_storage(*this, "f16 or bf16");
  return {static_cast<const std::uint16_t*>(data_), size()};
}

std::vector<double> HostTensor::to_f64() const {
  std::vector<double> out(size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = at_unchecked(i);
  return out;
}

std::vector<float> HostTensor::to_f32() const {
  if (storage_ == HostStorage::f32) {
    const auto data = f32_data();
    return {data.begin(), data.end()};
  }
  std::vector<float> out(size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(at_unchecked(i));
  return out;
}

std::vector<std::int32_t> HostTensor::to_i32() const {
  std::vector<std::int32_t> out(size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::int32_t>(at_unchecked(i));
  return out;
}

HostTensor HostTensor::narrowed() const {
  const HostStorage own = own_storage(type.dtype);
  if (storage_ == own) return *this;
  void* p = nullptr;
  auto owner = allocate(own, size(), p);
  HostTensor t{type, own, std::move(owner), p};
  for (std::size_t i = 0; i < size(); ++i) t.set(i, at_unchecked(i));
  return t;
}

void* HostTensor::make_own() {
  if (owner_ != nullptr && owner_.use_count() == 1) return const_cast<void*>(data_);  // ours alone
  void* p = nullptr;
  auto owner = allocate(storage_, size(), p);
  if (size() > 0) std::memcpy(p, data_, size() * host_storage_bytes(storage_));
  owner_ = std::move(owner);
  data_ = p;
  return p;
}

void HostTensor::set(std::size_t k, double value) {
  if (k >= size()) index_past_end(*this, k);  // before make_own, so a refused call copies nothing
  void* p = make_own();
  switch (storage_) {
    case HostStorage::f32:
      static_cast<float*>(p)[k] = static_cast<float>(value);
      return;
    case HostStorage::i32:
      static_cast<std::int32_t*>(p)[k] = static_cast<std::int32_t>(value);
      return;
    case HostStorage::u8:
      static_cast<std::uint8_t*>(p)[k] = value != 0.0 ? 1 : 0;
      return;
    case HostStorage::f64:
      static_cast<double*>(p)[k] = value;
      return;
    case HostStorage::f16:
    case HostStorage::bf16:
      // Rounded once from the double (round_to_dtype), then exact in float and in 16 bits.
      static_cast<std::uint16_t*>(p)[k] =
          f32_to_low_precision_bits(static_cast<float>(round_to_dtype(value, type.dtype)), type.dtype);
      return;
  }
}

std::span<float> HostTensor::mutable_f32() {
  if (storage_ != HostStorage::f32) wrong_storage(*this, "f32");
  return {static_cast<float*>(make_own()), size()};
}

std::span<std::int32_t> HostTensor::mutable_i32() {
  if (storage_ != HostStorage::i32) wrong_storage(*this, "i32");
  return {static_cast<std::int32_t*>(make_own()), size()};
}

std::span<double> HostTensor::mutable_f64() {
  if (storage_ != HostStorage::f64) wrong_storage(*this, "f64");
  return {static_cast<double*>(make_own()), size()};
}

std::span<double> HostTensor::mutable_wide() {
  if (storage_ != HostStorage::f64) *this = of(type, to_f64());
  return mutable_f64();
}

bool operator==(const HostTensor& a, const HostTensor& b) {
  if (a.type != b.type) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a.at_unchecked(i) != b.at_unchecked(i)) return false;
  }
  return true;
}

namespace {

void check_input_values(const GraphInput& in, const TensorType& expected, const HostTensor& given) {
  if (given.type != expected) {
    throw RuntimeError("input '" + in.name + "' expects " + expected.to_string() + ", got " + given.type.to_string());
  }
  // Only wide storage can hold a value its dtype cannot: i32 and bool storage are exact, except a
  // viewed or adopted byte other than 0 or 1.
  if (expected.dtype == DType::i32 && given.storage() == HostStorage::f64) {
    for (double v : given.f64_data()) {
      if (v != std::floor(v) || v < std::numeric_limits<std::int32_t>::min() ||
          v > std::numeric_limits<std::int32_t>::max()) {
        throw RuntimeError("input '" + in.name + "' is i32 but holds " + std::to_string(v));
      }
    }
  } else if (expected.dtype == DType::boolean) {
    for (std::size_t i = 0; i < given.size(); ++i) {
      const double v = given.at_unchecked(i);
      if (v != 0.0 && v != 1.0) throw RuntimeError("input '" + in.name + "' is bool but holds " + std::to_string(v));
    }
  }
}

}  // namespace

void validate_inputs(const Graph& graph, const TensorMap& inputs) {
  validate_inputs(graph, inputs, [](const GraphInput&) { return true; });
}

void validate_inputs(const Graph& graph, const TensorMap& inputs,
                     const std::function<bool(const GraphInput&)>& required) {
  for (const auto& [name, tensor] : inputs) {
    if (!graph.find_input(name)) {
      throw RuntimeError("graph '" + graph.name() + "' has no input named '" + name + "'");
    }
  }
  for (const GraphInput& in : graph.inputs()) {
    auto it = inputs.find(in.name);
    if (it == inputs.end()) {
      if (!required(in)) continue;
      throw RuntimeError("missing input '" + in.name + "' (" + std::string(input_kind_name(in.kind)) + ", " +
                         graph.type(in.value).to_string() + ")");
    }
    check_input_values(in, graph.type(in.value), it->second);
  }
}

}  // namespace tg
