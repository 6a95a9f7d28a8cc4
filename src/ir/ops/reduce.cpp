// STUB: to be replaced by the real definitions of this family.
#include "rules.h"

namespace tg {

const OpDef& Sum_def() {
  static const OpDef def{.name = op_name(OpId::Sum)};
  return def;
}

const OpDef& Mean_def() {
  static const OpDef def{.name = op_name(OpId::Mean)};
  return def;
}

const OpDef& Max_def() {
  static const OpDef def{.name = op_name(OpId::Max)};
  return def;
}

const OpDef& Min_def() {
  static const OpDef def{.name = op_name(OpId::Min)};
  return def;
}

const OpDef& Argmax_def() {
  static const OpDef def{.name = op_name(OpId::Argmax)};
  return def;
}

const OpDef& Argmin_def() {
  static const OpDef def{.name = op_name(OpId::Argmin)};
  return def;
}

}  // namespace tg
