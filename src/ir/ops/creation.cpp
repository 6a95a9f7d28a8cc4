// STUB: to be replaced by the real definitions of this family.
#include "rules.h"

namespace tg {

const OpDef& Full_def() {
  static const OpDef def{.name = op_name(OpId::Full)};
  return def;
}

const OpDef& Zeros_def() {
  static const OpDef def{.name = op_name(OpId::Zeros)};
  return def;
}

const OpDef& Ones_def() {
  static const OpDef def{.name = op_name(OpId::Ones)};
  return def;
}

const OpDef& Arange_def() {
  static const OpDef def{.name = op_name(OpId::Arange)};
  return def;
}

}  // namespace tg
