// STUB: to be replaced by the real definitions of this family.
#include "rules.h"

namespace tg {

const OpDef& Reshape_def() {
  static const OpDef def{.name = op_name(OpId::Reshape)};
  return def;
}

const OpDef& Permute_def() {
  static const OpDef def{.name = op_name(OpId::Permute)};
  return def;
}

const OpDef& SwapAxes_def() {
  static const OpDef def{.name = op_name(OpId::SwapAxes)};
  return def;
}

const OpDef& BroadcastTo_def() {
  static const OpDef def{.name = op_name(OpId::BroadcastTo)};
  return def;
}

const OpDef& SumToShape_def() {
  static const OpDef def{.name = op_name(OpId::SumToShape)};
  return def;
}

}  // namespace tg
