// The module tree (registration, dotted names, params()), param bindings and
// param arithmetic.
#include "tensorgrad/train/module.h"

#include <algorithm>

#include "tensorgrad/ir/error.h"

namespace tg {

namespace {

// This thread's innermost binding; each binding links to the one it nests in.
thread_local ParamBinding *innermost_binding = nullptr;

std::string join_path(const std::string &prefix, const std::string &name) {
  return prefix.empty() ? name : prefix + "." + name;
}

void check_local_name(const std::string &full_name, const std::string &name) {
  if (name.empty()) throw Error("module or param name must not be empty (under '" + full_name + "')");
  if (name.find('.') != std::string::npos) {
    throw Error("module or param name '" + name + "' (full name '" + full_name +
                "') must not contain '.': dots separate the path components of "
                "dotted names");
  }
}

}  // namespace

// ---- Module ----

Module::Module(Module &parent, std::string name) : parent_(&parent), name_(std::move(name)) {
  parent.add_entry(name_, this);
}

Module::~Module() {
  if (parent_ != nullptr) parent_->remove_entry(this);
}

std::string Module::path() const { return parent_ == nullptr ? std::string() : parent_->child_path(name_); }

std::string Module::child_path(const std::string &name) const { return join_path(path(), name); }

void Module::add_entry(std::string name, Entry entry) {
  const std::string full_name = child_path(name);
  check_local_name(full_name, name);
  const bool taken = std::any_of(entries_.begin(), entries_.end(), [&](const Named &e) { return e.name == name; });
  if (taken) throw Error("duplicate module or param name '" + full_name + "'");
  entries_.push_back({std::move(name), entry});
}

void Module::remove_entry(Entry entry) {
  std::erase_if(entries_, [&](const Named &e) { return e.entry == entry; });
}

void Module::collect(std::vector<const Param *> &out) const {
  for (const Named &e : entries_) {
    if (const auto *child = std::get_if<Module *>(&e.entry)) {
      (*child)->collect(out);
    } else {
      out.push_back(std::get<Param *>(e.entry));
    }
  }
}

std::vector<const Param *> Module::param_objects() const {
  std::vector<const Param *> out;
  collect(out);
  return out;
}

std::vector<ParamInfo> Module::params() const {
  std::vector<ParamInfo> out;
  for (const Param *p : param_objects()) out.push_back(p->info());
  return out;
}

// ---- Param ----

Param::Param(Module &owner, std::string name, Shape shape, ParamOptions options)
    : owner_(&owner),
      name_(std::move(name)),
      shape_(std::move(shape)),
      init_(std::move(options.init)),
      decay_(options.decay.value_or(default_decay(init_))) {
  // Checked before registering, so a refused param leaves the owner as it was.
  const std::string full_name = owner.child_path(name_);
  check_local_name(full_name, name_);
  for (const auto d : shape_) {
    if (d < 0) throw Error("param '" + full_name + "' has a negative dimension: " + shape_to_string(shape_));
  }
  check_init(init_, shape_, full_name);
  owner.add_entry(name_, this);
}

Param::~Param() { owner_->remove_entry(this); }

std::string Param::name() const { return owner_->child_path(name_); }

Tensor Param::tensor() const {
  for (const ParamBinding *b = innermost_binding; b != nullptr; b = b->outer_) {
    if (auto t = b->find(*this)) return *t;
  }
  throw CompileError("param '" + name() +
                     "' is not bound to the graph being traced: it belongs to another model instance than the one "
                     "compiled, or is used outside a binding (tg::ParamBinding bound(model, builder))");
}

// ---- ParamBinding ----

ParamBinding::ParamBinding(const Module &model, GraphBuilder &builder) : builder_(&builder), outer_(nullptr) {
  for (const Param *p : model.param_objects()) {
    tensors_.emplace(p, builder.param(p->name(), {DType::f32, p->shape()}));
  }
  // Linked only once every input exists: a throwing constructor leaves the
  // chain untouched.
  outer_ = innermost_binding;
  innermost_binding = this;
}

ParamBinding::~ParamBinding() {
  // Normally this is the innermost binding (scopes end in reverse order);
  // unlink it wherever it is.
  for (ParamBinding **link = &innermost_binding; *link != nullptr; link = &(*link)->outer_) {
    if (*link == this) {
      *link = outer_;
      return;
    }
  }
}

std::optional<Tensor> ParamBinding::find(const Param &param) const {
  const auto it = tensors_.find(&param);
  if (it == tensors_.end()) return std::nullopt;
  return it->second;
}

// ---- arithmetic with params ----

namespace {

OperandAt at(const ParamAt &p) { return OperandAt(p.param->tensor(), p.site); }

}  // namespace

Tensor operator+(ParamAt a, OperandAt b) { return at(a) + b; }
Tensor operator+(OperandAt a, ParamAt b) { return a + at(b); }
Tensor operator+(ParamAt a, ParamAt b) { return at(a) + at(b); }
Tensor operator-(ParamAt a, OperandAt b) { return at(a) - b; }
Tensor operator-(OperandAt a, ParamAt b) { return a - at(b); }
Tensor operator-(ParamAt a, ParamAt b) { return at(a) - at(b); }
Tensor operator*(ParamAt a, OperandAt b) { return at(a) * b; }
Tensor operator*(OperandAt a, ParamAt b) { return a * at(b); }
Tensor operator*(ParamAt a, ParamAt b) { return at(a) * at(b); }
Tensor operator/(ParamAt a, OperandAt b) { return at(a) / b; }
Tensor operator/(OperandAt a, ParamAt b) { return a / at(b); }
Tensor operator/(ParamAt a, ParamAt b) { return at(a) / at(b); }
Tensor operator-(ParamAt x) { return -TensorAt(x.param->tensor(), x.site); }

}  // namespace tg
