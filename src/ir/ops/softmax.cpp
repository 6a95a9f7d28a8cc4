// STUB: to be replaced by the real definitions of this family.
#include "rules.h"

namespace tg {

const OpDef& Softmax_def() {
  static const OpDef def{.name = op_name(OpId::Softmax)};
  return def;
}

const OpDef& LogSoftmax_def() {
  static const OpDef def{.name = op_name(OpId::LogSoftmax)};
  return def;
}

}  // namespace tg
