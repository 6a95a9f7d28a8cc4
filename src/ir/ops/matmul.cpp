// STUB: to be replaced by the real definitions of this family.
#include "rules.h"

namespace tg {

const OpDef& Matmul_def() {
  static const OpDef def{.name = op_name(OpId::Matmul)};
  return def;
}

}  // namespace tg
