// Shared by shaders/reduce.comp and shaders/reduce_split.comp (an #include, not a shader): the
// reduce family's ops, their identity values and their fold of one (value, index) pair into
// another. `op` is a push constant, uniform across the dispatch. Written with if/else, not a
// switch: a branch costs llvmpipe no loop pass (see kernels.h on its loop limit), and the folds
// run once per term.

const uint OP_SUM = 0, OP_MEAN = 1, OP_MAX = 2, OP_MIN = 3, OP_ARGMAX = 4, OP_ARGMIN = 5;
const uint NONE = 0xffffffffu;  // no index yet: loses to every element

bool is_arg_op(uint op) { return op == OP_ARGMAX || op == OP_ARGMIN; }

float init_value(uint op) {
  if (op == OP_MAX) return uintBitsToFloat(0xff800000u);  // -inf
  if (op == OP_MIN) return uintBitsToFloat(0x7f800000u);  // +inf
  return 0.0;
}

// Whether (vb, ib) replaces (va, ia) as the arg-extremum: NONE loses, the first NaN wins, else the
// strictly better value, ties to the smaller index. A total order on (value, index), so any fixed
// grouping of the folds picks the same element as one pass in index order.
bool arg_takes(uint op, float va, uint ia, float vb, uint ib) {
  if (ib == NONE) return false;
  if (ia == NONE) return true;
  const bool na = isnan(va), nb = isnan(vb);
  if (na || nb) return (na && nb) ? ib < ia : nb;
  if (vb == va) return ib < ia;
  return op == OP_ARGMAX ? vb > va : vb < va;
}

// Folds (vb, ib) into (va, ia); for sum/mean/max/min only the value matters. Max and min
// propagate NaN.
void fold(uint op, inout float va, inout uint ia, float vb, uint ib) {
  if (op == OP_SUM || op == OP_MEAN) {
    va = va + vb;
  } else if (op == OP_MAX) {
    va = (vb > va || isnan(vb)) ? vb : va;
  } else if (op == OP_MIN) {
    va = (vb < va || isnan(vb)) ? vb : va;
  } else if (arg_takes(op, va, ia, vb, ib)) {
    va = vb;
    ia = ib;
  }
}
