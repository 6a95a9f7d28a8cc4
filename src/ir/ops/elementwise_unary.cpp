// STUB: to be replaced by the real definitions of this family.
#include "rules.h"

namespace tg {

const OpDef& Neg_def() {
  static const OpDef def{.name = op_name(OpId::Neg)};
  return def;
}

const OpDef& Abs_def() {
  static const OpDef def{.name = op_name(OpId::Abs)};
  return def;
}

const OpDef& Square_def() {
  static const OpDef def{.name = op_name(OpId::Square)};
  return def;
}

const OpDef& Sqrt_def() {
  static const OpDef def{.name = op_name(OpId::Sqrt)};
  return def;
}

const OpDef& Rsqrt_def() {
  static const OpDef def{.name = op_name(OpId::Rsqrt)};
  return def;
}

const OpDef& Exp_def() {
  static const OpDef def{.name = op_name(OpId::Exp)};
  return def;
}

const OpDef& Log_def() {
  static const OpDef def{.name = op_name(OpId::Log)};
  return def;
}

const OpDef& Sin_def() {
  static const OpDef def{.name = op_name(OpId::Sin)};
  return def;
}

const OpDef& Cos_def() {
  static const OpDef def{.name = op_name(OpId::Cos)};
  return def;
}

const OpDef& Tanh_def() {
  static const OpDef def{.name = op_name(OpId::Tanh)};
  return def;
}

const OpDef& Sigmoid_def() {
  static const OpDef def{.name = op_name(OpId::Sigmoid)};
  return def;
}

const OpDef& Relu_def() {
  static const OpDef def{.name = op_name(OpId::Relu)};
  return def;
}

const OpDef& Gelu_def() {
  static const OpDef def{.name = op_name(OpId::Gelu)};
  return def;
}

const OpDef& Silu_def() {
  static const OpDef def{.name = op_name(OpId::Silu)};
  return def;
}

const OpDef& Clamp_def() {
  static const OpDef def{.name = op_name(OpId::Clamp)};
  return def;
}

const OpDef& StopGradient_def() {
  static const OpDef def{.name = op_name(OpId::StopGradient)};
  return def;
}

}  // namespace tg
