#pragma once
// Modules: a tree of params with dotted names, and the binding that turns params into graph inputs
// while a forward is traced.
//
//   struct MLP : tg::Module {
//     tg::Linear l1{*this, "l1", 1, 64};
//     tg::Linear l2{*this, "l2", 64, 1};
//   };
//   tg::Tensor forward(const MLP& m, tg::Tensor x) { return m.l2(tg::relu(m.l1(x))); }
//
// A child module or a param registers with its parent in its constructor, under a local name; its
// dotted name is the path from the root ("l1.W", "layers.0.attn.q.W"). Registration order is
// declaration order, and params() walks the tree depth-first in that order. Modules and params are
// neither copyable nor movable (children point at their parents), which the compiler enforces.
// A module or param that is destroyed (a throwing constructor, a ModuleList element) unregisters.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/ops/api.h"
#include "tensorgrad/ir/tensor.h"
#include "tensorgrad/train/init.h"

namespace tg {

class Param;

class Module {
 public:
  Module() = default;  // a root: its children's names start at it
  // A child of `parent`, named `name` there. Throws tg::Error for an empty name, a name with a '.'
  // (dots separate path components), or a name the parent already uses for a child or a param
  // (the message gives the full dotted name).
  Module(Module& parent, std::string name);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& local_name() const { return name_; }
  std::string path() const;  // dotted path from the root; "" for the root
  const Module* parent() const { return parent_; }

  // Every param under this module, depth-first in registration order, with names dotted from the
  // root of the tree (not from this module), so a sub-module's list matches the whole model's.
  std::vector<ParamInfo> params() const;
  std::vector<const Param*> param_objects() const;
  std::size_t num_params() const { return param_objects().size(); }

 private:
  friend class Param;
  using Entry = std::variant<Module*, Param*>;
  struct Named {
    std::string name;
    Entry entry;
  };
  void add_entry(std::string name, Entry entry);
  void remove_entry(Entry entry);
  void collect(std::vector<const Param*>& out) const;
  std::string child_path(const std::string& name) const;

  Module* parent_ = nullptr;
  std::string name_;
  std::vector<Named> entries_;  // children and params, in registration order
};

struct ParamOptions {
  InitSpec init = init::randn();
  std::optional<bool> decay;  // default: default_decay(init)
};

// A parameter: an f32 tensor of a fixed shape owned by a module. Inside a ParamBinding it stands for
// the graph input the binding created; tensor() (or the implicit conversions) returns that input.
class Param {
 public:
  // Throws tg::Error for a bad name (as Module), a negative dim, or an init spec that cannot fill
  // the shape (check_init), naming the dotted name.
  Param(Module& owner, std::string name, Shape shape, ParamOptions options = {});
  ~Param();
  Param(const Param&) = delete;
  Param& operator=(const Param&) = delete;

  const std::string& local_name() const { return name_; }
  std::string name() const;  // dotted from the root
  const Shape& shape() const { return shape_; }
  const InitSpec& init() const { return init_; }
  bool decay() const { return decay_; }
  ParamInfo info() const { return {name(), shape_, init_, decay_}; }
  const Module& owner() const { return *owner_; }

  // The graph input standing for this param in the innermost ParamBinding (of this thread) that
  // holds it. Throws CompileError naming the param when no binding holds it.
  Tensor tensor() const;
  operator Tensor() const { return tensor(); }            // NOLINT(google-explicit-constructor)
  operator Operand() const { return Operand(tensor()); }  // NOLINT(google-explicit-constructor)

 private:
  Module* owner_;
  std::string name_;
  Shape shape_;
  InitSpec init_;
  bool decay_;
};

// Binds every param of a model to a graph being traced: creates one param input per param
// (b.param(dotted name, f32[shape]), in params() order) and makes Param::tensor() return it while the
// binding lives. Bindings nest per thread (the innermost holding a param wins) and end with their
// scope, so one model can be bound to a training graph and then to an inference graph. The model is
// only read: tracing the same model on two threads at once is fine. Destroy a binding on the thread
// that made it.
class [[nodiscard]] ParamBinding {
 public:
  ParamBinding(const Module& model, GraphBuilder& builder);
  ~ParamBinding();
  ParamBinding(const ParamBinding&) = delete;
  ParamBinding& operator=(const ParamBinding&) = delete;

  GraphBuilder& builder() const { return *builder_; }
  // The input for `param`, or nullopt when the model bound here does not hold it.
  std::optional<Tensor> find(const Param& param) const;

 private:
  friend class Param;
  GraphBuilder* builder_;
  std::unordered_map<const Param*, Tensor> tensors_;
  ParamBinding* outer_;  // the binding that was innermost before this one
};

// `auto bound = tg::bind_params(model, builder);` (guaranteed copy elision: the binding stays put).
inline ParamBinding bind_params(const Module& model, GraphBuilder& builder) { return {model, builder}; }

// A list of child modules named "0", "1", ... under one name: transformer blocks "layers.0",
// "layers.1", ... . T is constructed as T(list, index as string, args...), so a composite module
// declares `using tg::Module::Module;` or a constructor taking (Module& parent, std::string name, ...).
template <class T>
class ModuleList : public Module {
 public:
  ModuleList(Module& parent, std::string name) : Module(parent, std::move(name)) {}
  // `count` elements, each constructed with the same extra arguments.
  // (`count` is signed so that `{*this, "layers", cfg.n_layers, cfg}` with an int does not narrow.)
  template <class... Args>
  ModuleList(Module& parent, std::string name, std::int64_t count, const Args&... args)
      : Module(parent, std::move(name)) {
    if (count < 0) throw Error("ModuleList '" + path() + "': count must be >= 0, got " + std::to_string(count));
    for (std::int64_t i = 0; i < count; ++i) emplace_back(args...);
  }

  template <class... Args>
  T& emplace_back(Args&&... args) {
    items_.push_back(std::make_unique<T>(*this, std::to_string(items_.size()), std::forward<Args>(args)...));
    return *items_.back();
  }

  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  // An index past the end throws CompileError naming the list and its size (not std::out_of_range:
  // inside a loss that is a mistake in the model, and compile reports it as one).
  T& operator[](std::size_t i) { return *items_[checked(i)]; }
  const T& operator[](std::size_t i) const { return *items_[checked(i)]; }

  // Iterates the elements as T& (not as the owning pointers).
  template <class Elem, class Base>
  class Iterator {
   public:
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    Iterator() = default;
    explicit Iterator(Base it) : it_(it) {}
    Elem& operator*() const { return **it_; }
    Elem* operator->() const { return it_->get(); }
    Iterator& operator++() {
      ++it_;
      return *this;
    }
    Iterator operator++(int) {
      Iterator old = *this;
      ++it_;
      return old;
    }
    friend bool operator==(const Iterator&, const Iterator&) = default;

   private:
    Base it_{};
  };
  using iterator = Iterator<T, typename std::vector<std::unique_ptr<T>>::iterator>;
  using const_iterator = Iterator<const T, typename std::vector<std::unique_ptr<T>>::const_iterator>;
  iterator begin() { return iterator(items_.begin()); }
  iterator end() { return iterator(items_.end()); }
  const_iterator begin() const { return const_iterator(items_.begin()); }
  const_iterator end() const { return const_iterator(items_.end()); }

 private:
  std::size_t checked(std::size_t i) const {
    if (i >= items_.size()) {
      throw CompileError("ModuleList '" + path() + "' has " + std::to_string(items_.size()) + " elements; index " +
                         std::to_string(i) + " is out of range");
    }
    return i;
  }
  std::vector<std::unique_ptr<T>> items_;
};

// Arithmetic with params on either side. The call site rides on ParamAt's conversion (as on
// OperandAt's), so a shape error names the user's line. (Functions taking a Tensor or an Operand
// accept a Param directly through its conversions.)
class ParamAt {
 public:
  ParamAt(const Param& p, CallSite loc = CallSite::current()) : param(&p), site(loc) {}  // NOLINT
  const Param* param;
  CallSite site;
};
Tensor operator+(ParamAt a, OperandAt b);
Tensor operator+(OperandAt a, ParamAt b);
Tensor operator+(ParamAt a, ParamAt b);
Tensor operator-(ParamAt a, OperandAt b);
Tensor operator-(OperandAt a, ParamAt b);
Tensor operator-(ParamAt a, ParamAt b);
Tensor operator*(ParamAt a, OperandAt b);
Tensor operator*(OperandAt a, ParamAt b);
Tensor operator*(ParamAt a, ParamAt b);
Tensor operator/(ParamAt a, OperandAt b);
Tensor operator/(OperandAt a, ParamAt b);
Tensor operator/(ParamAt a, ParamAt b);
Tensor operator-(ParamAt x);

}  // namespace tg
