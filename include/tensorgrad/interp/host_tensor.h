#pragma once
// Host-side tensor values passed into and out of backends.
//
// Elements are kept in their dtype's own width: f32 as float, i32 as int32_t, bool as one byte
// (0 or 1), f16 and bf16 as their 16-bit patterns (tensorgrad/ir/low_precision.h). Two kinds of tensor hold doubles
// instead ("wide" storage, HostStorage::f64): the f64 oracle's results (interpret with ComputeType::f64), so that they
// keep the oracle's precision, and tensors built from doubles with HostTensor::of. A backend converts wide elements on
// its own side (an f32 backend rounds them to float on every run), so inputs meant for a fast backend are built with
// f32()/i32()/boolean() or viewed with view().
//
// A tensor owns its elements or views caller memory. A view (HostTensor::view) copies nothing: the
// caller keeps the memory alive and unchanged while the view, or any copy of it, is in use.
// Copying a HostTensor shares its elements (copies are cheap); the mutating accessors (set,
// mutable_f32, ...) copy them first when they are shared or viewed, so a HostTensor behaves as a
// value: writing to one never changes another.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tensorgrad/ir/graph.h"
#include "tensorgrad/ir/low_precision.h"
#include "tensorgrad/ir/shape.h"

namespace tg {

// How a host tensor's elements are stored in memory.
enum class HostStorage : std::uint8_t {
  f32,   // float: f32 tensors
  i32,   // int32_t: i32 tensors
  u8,    // one byte holding 0 or 1: bool tensors
  f64,   // double ("wide"): any dtype; the oracle's float results and tensors built with of()
  f16,   // uint16_t IEEE binary16 bit patterns: f16 tensors
  bf16,  // uint16_t bfloat16 bit patterns: bf16 tensors
};
std::string_view host_storage_name(HostStorage storage);
std::size_t host_storage_bytes(HostStorage storage);  // bytes per element

class HostTensor {
 public:
  // The type the elements belong to. Set by the factories; the element count and storage follow
  // it, so reassign a whole HostTensor rather than its type.
  TensorType type;

  HostTensor();  // an f32 scalar holding 0

  // Owning factories. The vector overloads take the caller's vector without copying it.
  static HostTensor f32(Shape shape, std::vector<float> data);
  static HostTensor f32(Shape shape, std::span<const float> data);
  static HostTensor f32(Shape shape, std::initializer_list<float> data);
  static HostTensor i32(Shape shape, std::vector<std::int32_t> data);
  static HostTensor i32(Shape shape, std::span<const std::int32_t> data);
  static HostTensor i32(Shape shape, std::initializer_list<std::int32_t> data);
  static HostTensor boolean(Shape shape, std::span<const bool> data);
  static HostTensor boolean(Shape shape, const std::vector<bool>& data);
  // A 16-bit tensor (dtype f16 or bf16): `values` rounded to nearest even, or the bit patterns as
  // they are.
  static HostTensor low_precision(DType dtype, Shape shape, std::span<const float> values);
  static HostTensor from_bits(DType dtype, Shape shape, std::vector<std::uint16_t> bits);
  // Wide storage: each element kept as the given double (see the top of this file). i32 and bool
  // values are checked when a backend takes the tensor as an input.
  static HostTensor of(TensorType type, std::vector<double> data);
  // Every element `value`, in the dtype's own storage (rounded to float for f32).
  static HostTensor filled(TensorType type, double value);

  // Views of caller memory: no copy (see the top of this file).
  static HostTensor view(Shape shape, std::span<const float> data);
  static HostTensor view(Shape shape, std::span<const std::int32_t> data);
  static HostTensor view(Shape shape, std::span<const bool> data);

  // For backends handing over memory they allocated: `owner` keeps `data` alive; `data` holds
  // type.size() elements stored as `storage`. Checks that the storage suits the dtype.
  static HostTensor adopt(TensorType type, HostStorage storage, std::shared_ptr<const void> owner, const void* data);

  HostStorage storage() const { return storage_; }
  bool is_view() const { return owner_ == nullptr; }
  std::size_t size() const { return static_cast<std::size_t>(type.size()); }
  // Element i as a double, whatever the storage. Throws RuntimeError naming i and the element count
  // when i is not below size().
  double at(std::size_t i) const;
  // The same without the bounds check, for loops whose index is known to run below size(): the
  // whole-tensor conversions and comparisons, where a check per element would cost. Past the end
  // it reads out of bounds.
  double at_unchecked(std::size_t i) const {
    switch (storage_) {
      case HostStorage::f32:
        return static_cast<const float*>(data_)[i];
      case HostStorage::i32:
        return static_cast<const std::int32_t*>(data_)[i];
      case HostStorage::u8:
        return static_cast<const std::uint8_t*>(data_)[i];
      case HostStorage::f64:
        return static_cast<const double*>(data_)[i];
      case HostStorage::f16:
        return f16_bits_to_f32(static_cast<const std::uint16_t*>(data_)[i]);
      case HostStorage::bf16:
        return bf16_bits_to_f32(static_cast<const std::uint16_t*>(data_)[i]);
    }
    return 0.0;
  }

  // The elements in their storage; each throws RuntimeError when the storage differs.
  std::span<const float> f32_data() const;
  std::span<const std::int32_t> i32_data() const;
  std::span<const std::uint8_t> bool_data() const;
  std::span<const double> f64_data() const;
  std::span<const std::uint16_t> bits16_data() const;  // f16 or bf16 storage
  const void* raw_data() const { return data_; }
  // What keeps the elements alive (null for a view); a backend that reads them in place holds it.
  const std::shared_ptr<const void>& owner() const { return owner_; }

  // Copies, converted: to_f32 rounds (exact for f16 and bf16), to_i32 truncates (exact for i32 and
  // bool tensors).
  std::vector<double> to_f64() const;
  std::vector<float> to_f32() const;
  std::vector<std::int32_t> to_i32() const;
  // The same values in the dtype's own storage (wide f32 elements rounded to float); no copy when
  // they are stored so already.
  HostTensor narrowed() const;

  // Writes; each first makes the elements this tensor's own (see the top of this file). set()
  // converts `value` to the storage and throws RuntimeError, changing nothing, when i is not below
  // size(); the spans throw RuntimeError when the storage differs.
  void set(std::size_t i, double value);
  std::span<float> mutable_f32();
  std::span<std::int32_t> mutable_i32();
  std::span<double> mutable_f64();
  // The elements made wide (stored as f64, converted first when they are not) and writable: for
  // changes finer than the dtype resolves, such as a finite-difference step on an oracle input.
  std::span<double> mutable_wide();

  // Same type and the same element values (compared as doubles: NaN equals nothing).
  friend bool operator==(const HostTensor& a, const HostTensor& b);

 private:
  HostTensor(TensorType type, HostStorage storage, std::shared_ptr<const void> owner, const void* data);
  void* make_own();  // copies the elements when shared or viewed; returns them writable

  HostStorage storage_ = HostStorage::f32;
  std::shared_ptr<const void> owner_;  // null for a view of caller memory
  const void* data_ = nullptr;
};

using TensorMap = std::map<std::string, HostTensor, std::less<>>;

// Receives a run's outputs one at a time, by name, as a backend has them (Session::run).
using OutputSink = std::function<void(const std::string& name, const HostTensor& value)>;

// The input checks every backend makes before a run: no unknown names, no missing input, each of
// its graph type, i32 values integral and in range, bool values 0 or 1. Throws RuntimeError naming
// the input, what was expected and what came.
void validate_inputs(const Graph& graph, const TensorMap& inputs);
// The same checks, but only the inputs for which `required` holds must be present (a backend that
// keeps params and state resident takes only the data inputs on each run).
void validate_inputs(const Graph& graph, const TensorMap& inputs,
                     const std::function<bool(const GraphInput&)>& required);

}  // namespace tg
