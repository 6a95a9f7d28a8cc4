// STUB: to be replaced by the real definitions of this family.
#include "rules.h"

namespace tg {

const OpDef& Add_def() {
  static const OpDef def{.name = op_name(OpId::Add)};
  return def;
}

const OpDef& Sub_def() {
  static const OpDef def{.name = op_name(OpId::Sub)};
  return def;
}

const OpDef& Mul_def() {
  static const OpDef def{.name = op_name(OpId::Mul)};
  return def;
}

const OpDef& Div_def() {
  static const OpDef def{.name = op_name(OpId::Div)};
  return def;
}

const OpDef& Minimum_def() {
  static const OpDef def{.name = op_name(OpId::Minimum)};
  return def;
}

const OpDef& Maximum_def() {
  static const OpDef def{.name = op_name(OpId::Maximum)};
  return def;
}

const OpDef& Less_def() {
  static const OpDef def{.name = op_name(OpId::Less)};
  return def;
}

const OpDef& Greater_def() {
  static const OpDef def{.name = op_name(OpId::Greater)};
  return def;
}

const OpDef& Equal_def() {
  static const OpDef def{.name = op_name(OpId::Equal)};
  return def;
}

const OpDef& Where_def() {
  static const OpDef def{.name = op_name(OpId::Where)};
  return def;
}

}  // namespace tg
